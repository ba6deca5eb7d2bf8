#!/usr/bin/env python3
"""Two gloo ranks training an MLP from a DataLoader; rank 1's dataset is slow
(its __getitem__ sleeps), as a slow input pipeline would be. One trace per rank
(export_chrome_trace), the legacy profiler of Debian's PyTorch 1.13.

    /usr/bin/python3 record_gloo_loader.py OUT_DIR 30   # rank 1's loader: 30 ms a batch
gave gloo2_slow_loader1_rank{0,1}.json.gz (OUT_DIR/rank{0,1}.json, gzipped)."""
import os, sys, time
import torch, torch.distributed as dist, torch.multiprocessing as mp
import torch.nn as nn, torch.nn.functional as F
from torch.profiler import profile, schedule, ProfilerActivity


class Data(torch.utils.data.Dataset):
    def __init__(self, rank, slow_s):
        self.rank, self.slow_s = rank, slow_s
    def __len__(self):
        return 10_000
    def __getitem__(self, i):
        if self.slow_s:
            time.sleep(self.slow_s)
        g = torch.Generator().manual_seed(self.rank * 100_000 + i)
        return torch.randn(256, generator=g), int(torch.randint(0, 10, (1,), generator=g))


def worker(rank, world, out, slow_rank, slow_ms, port):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Data(rank, slow_ms / 1000 / 64 if rank == slow_rank else 0), batch_size=64)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=10)) as prof:
        for step, (x, y) in enumerate(loader):
            if step == 12:
                break
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
    prof.export_chrome_trace(os.path.join(out, f"rank{rank}.json"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    out, slow_ms = sys.argv[1], float(sys.argv[2])
    os.makedirs(out, exist_ok=True)
    mp.spawn(worker, args=(2, out, 1, slow_ms, 29611), nprocs=2, join=True)

#!/usr/bin/python3
# Records the 4-rank gloo traces gloo4_rank*.json.gz and gloo4_slow2_rank*.json.gz
# (tests/e2e/import_test.cc, fleet_test.cc): a DDP step, then all_reduce, broadcast,
# all_gather and barrier each step, profiled on the CPU with Debian's PyTorch:
#   /usr/bin/python3 record_gloo4.py gloo4 && gzip -9 gloo4_rank*.json
#   /usr/bin/python3 record_gloo4.py gloo4_slow2 --port 29601 --slow-rank 2 --sleep-ms 20 && gzip -9 gloo4_slow2_rank*.json
# 4-rank gloo job: DDP + explicit collectives; options: slow rank (sleep), skip a barrier once, different windows
import sys, os, time, argparse, torch, torch.nn as nn, torch.distributed as dist, torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import profile, schedule, ProfilerActivity, record_function
p = argparse.ArgumentParser()
p.add_argument("out"); p.add_argument("--port", type=int, default=29600)
p.add_argument("--world", type=int, default=4); p.add_argument("--steps", type=int, default=10)
p.add_argument("--slow-rank", type=int, default=-1); p.add_argument("--sleep-ms", type=float, default=0)
p.add_argument("--skip-rank", type=int, default=-1)  # this rank skips the barrier of step 4, does an extra one at step 5
p.add_argument("--uneven", action="store_true")     # rank 0 profiles more steps than the others
p.add_argument("--no-ddp", action="store_true")
p.add_argument("--mm-rank", type=int, default=-1); p.add_argument("--mm-n", type=int, default=0)
a = p.parse_args()
def work(rank):
    os.environ["MASTER_ADDR"] = "127.0.0.1"; os.environ["MASTER_PORT"] = str(a.port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=a.world)
    torch.manual_seed(rank)
    model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 16))
    if not a.no_ddp: model = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    if a.uneven:
        sch = schedule(wait=1, warmup=1, active=(a.steps - 2 if rank == 0 else 4))
    else:
        sch = schedule(wait=1, warmup=1, active=a.steps - 2)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, schedule=sch,
                 on_trace_ready=lambda pr: pr.export_chrome_trace(f"{a.out}_rank{rank}.json")) as prof:
        for s in range(a.steps):
            if a.skip_rank == rank and s == 5:
                dist.barrier()  # ... and calls it late, at the start of step 5
            if rank == a.slow_rank:
                with record_function("injected_sleep"):
                    time.sleep(a.sleep_ms / 1000)
            if rank == a.mm_rank:
                with record_function("injected_matmuls"):
                    m = torch.randn(256, 256)
                    for _ in range(a.mm_n): m = torch.tanh(m @ m)
            x = torch.randn(64, 128); y = torch.randn(64, 16)
            with record_function("fwd_bwd"):
                loss = ((model(x) - y) ** 2).mean(); opt.zero_grad(); loss.backward()
            opt.step()
            t = torch.ones(1000) * rank
            dist.all_reduce(t)
            dist.broadcast(t, 0)
            lst = [torch.zeros(1000) for _ in range(a.world)]
            dist.all_gather(lst, t)
            if a.skip_rank == rank and s == 4:
                pass          # skips step 4's barrier ...
            else:
                dist.barrier()
            prof.step()
    dist.destroy_process_group()
if __name__ == "__main__":
    mp.spawn(work, nprocs=a.world)

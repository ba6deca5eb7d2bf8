#!/usr/bin/env python3
"""Small multi-process gloo training job that records one torch.profiler trace per rank.

Usage: record_gloo_faults.py --world N --model mlp|cnn|ddp|manual --out DIR [--slow-compute R,...]
                [--sleep R:MS] [--slow-steps S,...] [--handler tb|export] [--steps N] [--port P]

Written as a user would write such a job (an outside probe of `fleet`, 2026-11-28);
the traces in this directory made with it (PyTorch 1.13, Debian's python3-torch):
  gloo3_pause2_rank{0,1,2}.json.gz        --world 3 --model mlp --sleep 2:300 --slow-steps 6
      (rank 2 sleeps 300 ms before its step 6 only: a one-off pause)
  ddp3_slow1_steps56_rank{0,1,2}.json.gz  --world 3 --model ddp --slow-compute 1 --slow-factor 6 --slow-steps 5,6
      (rank 1 runs 6 extra layers in steps 5 and 6 only)
Each rank's file is tensorboard_trace_handler's rankN.*.pt.trace.json, gzipped and renamed.
gloo2_cnn_healthy_rank{0,1}.json.gz came from a second probe's own script of the same kind (2 ranks,
a small cnn, manual all_reduce, export_chrome_trace, 12 steps, no fault) on a loaded machine: each
rank has one-off spikes (rank 0 in step 3, rank 1 in steps 2 and 5), and no one is to be flagged.
"""
import argparse, os, time
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import profile, schedule, ProfilerActivity, tensorboard_trace_handler


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--model", default="mlp")
    p.add_argument("--out", required=True)
    p.add_argument("--slow-compute", default="")   # ranks that do extra compute in forward
    p.add_argument("--slow-factor", type=int, default=3)
    p.add_argument("--sleep", default="")          # "R:MS" ranks that sleep before each step
    p.add_argument("--slow-steps", default="")     # only these steps are slow (default all)
    p.add_argument("--handler", default="tb")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--port", type=int, default=29511)
    return p.parse_args()


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(256, 512)
        self.l2 = nn.Linear(512, 512)
        self.l3 = nn.Linear(512, 10)
        self.extra = None

    def forward(self, x):
        h = F.relu(self.l1(x))
        if self.extra:
            for _ in range(self.extra):
                h = F.relu(self.l2(h))
        h = F.relu(self.l2(h))
        return self.l3(h)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 8 * 8, 10)
        self.extra = None

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.c1(x)), 2)
        if self.extra:
            for _ in range(self.extra):
                h = h + 0 * F.relu(self.c2(h))[:, :16]  # wasted conv
        h = F.max_pool2d(F.relu(self.c2(h)), 2)
        return self.fc(h.flatten(1))


def batch(model_kind, rank, step):
    g = torch.Generator().manual_seed(rank * 1000 + step)
    if model_kind == "cnn":
        return torch.randn(32, 3, 32, 32, generator=g), torch.randint(0, 10, (32,), generator=g)
    return torch.randn(128, 256, generator=g), torch.randint(0, 10, (128,), generator=g)


def worker(rank, a):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(a.port)
    dist.init_process_group("gloo", rank=rank, world_size=a.world)
    torch.manual_seed(0)
    base = CNN() if a.model == "cnn" else MLP()
    slow_compute = {int(r) for r in a.slow_compute.split(",") if r}
    sleep_ranks = {}
    for item in a.sleep.split(",") if a.sleep else []:
        r, ms = item.split(":")
        sleep_ranks[int(r)] = float(ms) / 1000.0
    slow_steps = {int(s) for s in a.slow_steps.split(",") if s}

    if a.model == "ddp":
        model = nn.parallel.DistributedDataParallel(base, bucket_cap_mb=1)
    else:
        model = base
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    os.makedirs(a.out, exist_ok=True)
    if a.handler == "tb":
        ready = tensorboard_trace_handler(a.out, worker_name=f"rank{rank}")
    else:
        ready = lambda p: p.export_chrome_trace(os.path.join(a.out, f"rank{rank}.json"))

    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=1, warmup=1, active=a.steps - 2),
                 on_trace_ready=ready) as prof:
        for step in range(a.steps):
            active = (not slow_steps) or (step in slow_steps)
            if rank in sleep_ranks and active:
                time.sleep(sleep_ranks[rank])          # slow data loader / host
            x, y = batch(a.model, rank, step)
            base.extra = a.slow_factor if (rank in slow_compute and active) else None
            out = model(x)
            loss = F.cross_entropy(out, y)
            opt.zero_grad()
            loss.backward()
            if a.model in ("mlp", "cnn"):
                # plain data parallel: average the gradients by hand
                for p_ in base.parameters():
                    dist.all_reduce(p_.grad)
                    p_.grad /= a.world
            elif a.model == "manual":
                pass
            if a.model == "manual":
                grads = [p_.grad for p_ in base.parameters()]
                flat = torch.cat([g.flatten() for g in grads])
                dist.all_reduce(flat)
                flat /= a.world
                # gather the loss from everyone, broadcast a scale from rank 0
                losses = [torch.zeros(1) for _ in range(a.world)]
                dist.all_gather(losses, loss.detach().reshape(1))
                scale = torch.ones(1)
                dist.broadcast(scale, src=0)
                off = 0
                for g in grads:
                    n = g.numel()
                    g.copy_(flat[off:off + n].view_as(g) * scale)
                    off += n
            opt.step()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    a = parse_args()
    mp.spawn(worker, args=(a,), nprocs=a.world, join=True)

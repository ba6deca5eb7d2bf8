#!/usr/bin/python3
# The legacy-profiler gloo traces legacy_mild3_slow1_* and legacy_nosteps3_* (Debian's PyTorch 1.13),
# recorded on a 2-core VM by an outside test of `fleet` on imports:
#   record_legacy_mild.py mild1 3 29541 --sched --slow-rank 1 --slow-extra 2
#     (rank 1 about 1.15x its peers in most steps; rank 2, on the shared cores, stalled in steps 1-4)
#   record_legacy_mild.py nost 3 29531 --nosteps --slow-rank 1 --slow-extra 8 (no step marked)
#   record_legacy_mild.py tr_comp 3 PORT --sched --slow-rank 0 --slow-extra 25 --slow-steps 8,9
#     (legacy_oneoff3_slow0_*: rank 0 62 ms late in step 8; rank 1, on the shared cores, late once too)
"""Record one Chrome trace per rank of a small gloo DDP-style training job.

usage: rec.py OUTDIR WORLD PORT [--slow-rank R --slow-extra N] [--sleep-rank R --sleep-ms MS]
              [--slow-steps a,b] [--steps N] [--ddp] [--sched]
"""
import argparse, os, sys, time
import torch, torch.nn as nn, torch.distributed as dist, torch.multiprocessing as mp
from torch.profiler import profile, ProfilerActivity, record_function, schedule


def worker(rank, a):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(a.port)
    torch.set_num_threads(1)
    if a.pin:
        os.sched_setaffinity(0, {(rank + a.pin_shift) % os.cpu_count()})
    dist.init_process_group("gloo", rank=rank, world_size=a.world)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    if a.ddp:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 256); y = torch.randint(0, 10, (64,))
    extra = torch.randn(256, 256)
    slow_steps = set(int(s) for s in a.slow_steps.split(",")) if a.slow_steps else None

    def one_step(i):
        if rank == a.sleep_rank and (slow_steps is None or i in slow_steps):
            time.sleep(a.sleep_ms / 1000.0)
        with record_function("forward"):
            out = model(x)
            loss = nn.functional.cross_entropy(out, y)
        if rank == a.slow_rank and (slow_steps is None or i in slow_steps):
            with record_function("extra_compute"):
                t = extra
                for _ in range(a.slow_extra):
                    t = torch.tanh(t @ extra)
        with record_function("backward"):
            opt.zero_grad(); loss.backward()
        if not a.ddp:
            with record_function("allreduce_grads"):
                for p in model.parameters():
                    dist.all_reduce(p.grad); p.grad /= a.world
        with record_function("optimizer"):
            opt.step()

    for _ in range(2):
        one_step(-1)  # warm up outside the trace
    dist.barrier()
    if a.sched:
        sch = schedule(wait=1, warmup=1, active=a.steps)
        with profile(activities=[ProfilerActivity.CPU], schedule=sch) as prof:
            for i in range(a.steps + 2):
                one_step(i); prof.step()
    elif a.nosteps:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for i in range(a.steps):
                one_step(i)
    else:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for i in range(a.steps):
                with record_function("ProfilerStep#%d" % i):
                    one_step(i)
    prof.export_chrome_trace(os.path.join(a.out, "rank%d.json" % rank))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("out"); p.add_argument("world", type=int); p.add_argument("port", type=int)
    p.add_argument("--slow-rank", type=int, default=-1); p.add_argument("--slow-extra", type=int, default=0)
    p.add_argument("--sleep-rank", type=int, default=-1); p.add_argument("--sleep-ms", type=float, default=0)
    p.add_argument("--slow-steps", default="")
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--ddp", action="store_true"); p.add_argument("--sched", action="store_true")
    p.add_argument("--pin", action="store_true"); p.add_argument("--nosteps", action="store_true"); p.add_argument("--pin-shift", type=int, default=0)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    mp.spawn(worker, args=(a,), nprocs=a.world)
    print("recorded in %.1f s" % (time.time() - t0))

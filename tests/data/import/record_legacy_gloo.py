#!/usr/bin/python3
# The legacy-profiler gloo traces legacy_mix4_slow0_* and legacy_sub4_slow3_* (Debian's PyTorch 1.13, no
# Kineto: no process group names, no args), recorded on a 2-core VM:
#   record_legacy_gloo.py mixslow0_4 --world 4 --steps 10 --mix --slow-rank 0 --sleep-ms 12
#   record_legacy_gloo.py subnd4 --world 4 --steps 10 --subgroups --no-ddp --sub-slow-rank 3 --sleep-ms 10
#   record_legacy_gloo.py ddp2 (legacy_ddp2_*: two ranks of DDP, one all_reduce a step)
import sys, os, time, argparse, json
import torch, torch.nn as nn, torch.distributed as dist, torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import profile, schedule, ProfilerActivity, record_function, tensorboard_trace_handler
p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--port", type=int, default=29650)
p.add_argument("--world", type=int, default=2)
p.add_argument("--steps", type=int, default=8)
p.add_argument("--slow-rank", type=int, default=-1)
p.add_argument("--sleep-ms", type=float, default=0)
p.add_argument("--mm-rank", type=int, default=-1)
p.add_argument("--mm-n", type=int, default=0)
p.add_argument("--mix", action="store_true")          # broadcast/all_gather/reduce_scatter/barrier/send-recv
p.add_argument("--subgroups", action="store_true")    # new_group([0,1]), new_group([2,3])
p.add_argument("--sub-slow-rank", type=int, default=-1)  # rank that sleeps before its subgroup all_reduce only
p.add_argument("--short-rank", type=int, default=-1)  # this rank profiles fewer steps
p.add_argument("--sched", default="")                 # wait,warmup,active,repeat
p.add_argument("--tb", action="store_true")           # tensorboard_trace_handler(use_gzip)
p.add_argument("--full", action="store_true")         # record_shapes, with_stack, profile_memory
p.add_argument("--no-ddp", action="store_true")
p.add_argument("--sub-n", default="2,2")  # all_reduces per step in group {0,1}, {2,3}
a = p.parse_args()

def work(rank):
    os.environ["MASTER_ADDR"] = "127.0.0.1"; os.environ["MASTER_PORT"] = str(a.port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=a.world)
    g01 = g23 = None
    if a.subgroups:
        g01 = dist.new_group([0, 1]); g23 = dist.new_group([2, 3])
    torch.manual_seed(rank)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 8))
    if not a.no_ddp: model = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = a.steps
    if a.sched:
        w, wu, ac, rp = [int(v) for v in a.sched.split(",")]
        sch = schedule(wait=w, warmup=wu, active=ac, repeat=rp)
    else:
        act = steps - 2
        if rank == a.short_rank: act = max(1, act // 2)
        sch = schedule(wait=1, warmup=1, active=act)
    cycle = [0]
    def handler(pr):
        if a.tb:
            tensorboard_trace_handler(a.out + "_tb", worker_name=f"rank{rank}", use_gzip=True)(pr)
        else:
            suffix = f"_c{cycle[0]}" if a.sched else ""
            pr.export_chrome_trace(f"{a.out}_rank{rank}{suffix}.json")
        cycle[0] += 1
    kw = dict(record_shapes=True, with_stack=True, profile_memory=True) if a.full else {}
    with profile(activities=[ProfilerActivity.CPU], schedule=sch, on_trace_ready=handler, **kw) as prof:
        for s in range(steps):
            if rank == a.slow_rank:
                with record_function("injected_sleep"):
                    time.sleep(a.sleep_ms / 1000)
            if rank == a.mm_rank:
                with record_function("injected_matmuls"):
                    m = torch.randn(192, 192)
                    for _ in range(a.mm_n): m = torch.tanh(m @ m)
            x = torch.randn(32, 64); y = torch.randn(32, 8)
            with record_function("fwd_bwd"):
                loss = ((model(x) - y) ** 2).mean(); opt.zero_grad(); loss.backward()
            opt.step()
            if a.mix:
                t = torch.ones(256) * rank
                dist.broadcast(t, 0)
                lst = [torch.zeros(256) for _ in range(a.world)]
                dist.all_gather(lst, t)
                # reduce_scatter is not supported by gloo in 1.13: emulate with reduce + scatter
                try:
                    out = torch.zeros(64)
                    dist.reduce_scatter(out, [torch.ones(64) for _ in range(a.world)])
                except Exception as e:
                    if s == 0 and rank == 0: print("reduce_scatter:", type(e).__name__, str(e)[:80], flush=True)
                    dist.reduce(t, 0)
                    sc = torch.zeros(64)
                    dist.scatter(sc, [torch.ones(64) for _ in range(a.world)] if rank == 0 else None, src=0)
                dist.barrier()
                # ring send/recv
                buf = torch.zeros(128)
                nxt, prv = (rank + 1) % a.world, (rank - 1) % a.world
                if rank % 2 == 0:
                    dist.send(torch.ones(128) * rank, nxt); dist.recv(buf, prv)
                else:
                    dist.recv(buf, prv); dist.send(torch.ones(128) * rank, nxt)
            if a.subgroups:
                t = torch.ones(512) * rank
                if rank == a.sub_slow_rank:
                    with record_function("injected_sleep"):
                        time.sleep(a.sleep_ms / 1000)
                grp = g01 if rank in (0, 1) else g23
                n01, n23 = [int(v) for v in a.sub_n.split(",")]
                for _ in range(n01 if rank in (0, 1) else n23):
                    dist.all_reduce(t, group=grp)
            prof.step()
    dist.barrier()
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(work, nprocs=a.world)

#!/usr/bin/python3
"""Records the real PyTorch profiler traces that tests/e2e/import_test.cc imports.

Run with Debian's PyTorch (apt-get install python3-torch), from this folder:
    /usr/bin/python3 record_traces.py
It writes, gzipped and small:
  cpu_mlp.json.gz               a 3-layer MLP trained for a few steps on CPU under
                                torch.profiler with a schedule, so ProfilerStep#N
                                annotations mark the steps;
  gloo_rank0.json.gz,           a two-process torch.distributed job (backend gloo,
  gloo_rank1.json.gz            world size 2) doing all_reduce and broadcast under
                                torch.profiler, one trace per rank;
  gloo_slow_rank{0,1,2}.json.gz three ranks of data-parallel steps (compute, then an
                                all_reduce), rank 2 computing 1.7 times as long;
  gloo_even_rank{0,1,2}.json.gz the same with no slow rank (recorded, not committed);
  gloo_phase_rank{0,1}.json.gz  two ranks of steps with four all_reduces each (as
                                DDP's gradient buckets), rank 1 computing more before
                                the first only: slow once a step (--phase records
                                these alone).
With --cuda it records the CUDA trace instead (cuda_mlp_nccl.json.gz: the same MLP on
a GPU, its gradients all-reduced in a one-rank NCCL group), when torch sees a GPU. The
committed one was recorded on an NVIDIA H200 with PyTorch 2.11 (CUDA 13).
"""
import argparse
import gzip
import json
import os
import shutil
import socket
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, schedule

HERE = os.path.dirname(os.path.abspath(__file__))


def gzip_trace(src, dst):
    # Re-serialised compactly (same events, no indentation) so the files stay small.
    with open(src) as f:
        trace = json.load(f)
    with gzip.open(dst, "wt", compresslevel=9) as f:
        json.dump(trace, f, separators=(",", ":"))
    os.remove(src)


def mlp(device):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 10)).to(device)


def train_steps(model, device, prof, steps):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 32, device=device)
    y = torch.randint(0, 10, (16,), device=device)
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        prof.step()


def record_cpu(out_dir):
    model = mlp("cpu")
    tmp = os.path.join(out_dir, "cpu_mlp.json")
    # wait 1, warmup 1, then 3 active steps: ProfilerStep#2..#4 are recorded.
    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(tmp)) as prof:
        train_steps(model, "cpu", prof, 5)
    gzip_trace(tmp, os.path.join(out_dir, "cpu_mlp.json.gz"))


def record_cuda(out_dir):
    # One-rank NCCL group: real nccl:/c10d ops and distributedInfo, on one GPU.
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    model = mlp("cuda")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 32, device="cuda")
    y = torch.randint(0, 10, (16,), device="cuda")
    tmp = os.path.join(out_dir, "cuda_mlp_nccl.json")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=1, warmup=1, active=3),
                 on_trace_ready=lambda p: p.export_chrome_trace(tmp)) as prof:
        for _ in range(5):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
            opt.step()
            prof.step()
        torch.cuda.synchronize()
    dist.destroy_process_group()
    gzip_trace(tmp, os.path.join(out_dir, "cuda_mlp_nccl.json.gz"))


def gloo_worker(rank, world, port, out_dir):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)
    t = torch.full((1024,), float(rank))
    tmp = os.path.join(out_dir, f"gloo_rank{rank}.json")
    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=0, warmup=1, active=3, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(tmp)) as prof:
        for step in range(4):
            dist.all_reduce(t)
            dist.broadcast(t, src=0)
            t = t / world + rank
            if step == 2:
                dist.barrier()
            prof.step()
    dist.destroy_process_group()
    gzip_trace(tmp, os.path.join(out_dir, f"gloo_rank{rank}.json.gz"))


def profiled_gloo_steps(rank, world, port, out_dir, prefix, size, reps_of):
    # Ten steps of a gloo job under torch.profiler (the last eight recorded):
    # each step, for each entry of reps_of(), that many tanh(x @ a) then an
    # all_reduce of the result.
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)
    torch.manual_seed(rank)
    a = torch.randn(size, size)
    tmp = os.path.join(out_dir, f"{prefix}_rank{rank}.json")
    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=1, warmup=1, active=8, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(tmp)) as prof:
        for step in range(10):
            for reps in reps_of():
                x = a
                for _ in range(reps):
                    x = torch.tanh(x @ a) * 0.5
                dist.all_reduce(x)
            prof.step()
    dist.destroy_process_group()
    gzip_trace(tmp, os.path.join(out_dir, f"{prefix}_rank{rank}.json.gz"))


def gloo_steps_worker(rank, world, port, out_dir, prefix, slow_rank):
    # Data-parallel steps: the same compute on every rank, then an all_reduce
    # of the result; `slow_rank` (if >= 0) computes 1.7 times as long, as a
    # rank on a slower or busier machine would.
    reps = 17 if rank == slow_rank else 10
    profiled_gloo_steps(rank, world, port, out_dir, prefix, 192, lambda: [reps])


def gloo_phase_worker(rank, world, port, out_dir, slow_rank):
    # Four all_reduces a step with a little compute before each; `slow_rank`
    # computes 3 times as long before the step's first one only.
    first = 18 if rank == slow_rank else 6
    profiled_gloo_steps(rank, world, port, out_dir, "gloo_phase", 160, lambda: [first, 6, 6, 6])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--cuda", action="store_true", help="record the CUDA trace only")
    ap.add_argument("--phase", action="store_true", help="record gloo_phase_rank*.json.gz only")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    if args.phase:
        mp.spawn(gloo_phase_worker, args=(2, free_port(), args.out, 1), nprocs=2, join=True)
        return
    if args.cuda:
        if not torch.cuda.is_available():
            sys.exit("no CUDA device visible to torch")
        record_cuda(args.out)
        return
    record_cpu(args.out)
    mp.spawn(gloo_worker, args=(2, free_port(), args.out), nprocs=2, join=True)
    # Three ranks, 8 profiled steps: rank 2 slow, then none slow (the fleet tests).
    mp.spawn(gloo_steps_worker, args=(3, free_port(), args.out, "gloo_slow", 2), nprocs=3, join=True)
    mp.spawn(gloo_steps_worker, args=(3, free_port(), args.out, "gloo_even", -1), nprocs=3, join=True)


if __name__ == "__main__":
    main()

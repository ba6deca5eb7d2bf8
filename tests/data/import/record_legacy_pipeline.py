#!/usr/bin/python3
# The legacy-profiler pipeline traces legacy_pipe3_* (balanced, 5,5,5) and legacy_pipe3_slow2_* (5,5,12):
#   record_legacy_pipeline.py pipebal3 29681 5,5,5 ; record_legacy_pipeline.py pipeslow2 29682 5,5,12
# 3-stage pipeline over gloo send/recv. argv: OUT PORT [SLEEP_MS_PER_RANK e.g. 5,5,5]: each stage's work is a sleep
# (no CPU contention), so 5,5,5 is truly balanced and 5,5,12 makes rank 2 the bottleneck.
import os, sys, time, torch, torch.distributed as dist, torch.multiprocessing as mp
from torch.profiler import profile, schedule, ProfilerActivity, record_function
OUT = sys.argv[1]; PORT = int(sys.argv[2]); SLEEP = [float(v) for v in sys.argv[3].split(",")] if len(sys.argv) > 3 else None; W = 3; STEPS = 10; MICRO = 2
def work(rank):
    os.environ["MASTER_ADDR"] = "127.0.0.1"; os.environ["MASTER_PORT"] = str(PORT)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=W)
    w = torch.randn(256, 256) / 16
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=STEPS - 2),
                 on_trace_ready=lambda p: p.export_chrome_trace(f"{OUT}_rank{rank}.json")) as prof:
        for s in range(STEPS):
            for m in range(MICRO):
                x = torch.randn(64, 256) if rank == 0 else torch.zeros(64, 256)
                if rank > 0: dist.recv(x, rank - 1)
                with record_function("stage_compute"):
                    if SLEEP: time.sleep(SLEEP[rank] / 1000); x = torch.tanh(x @ w)
                    else:
                        for _ in range(20): x = torch.tanh(x @ w)
                if rank < W - 1: dist.send(x, rank + 1)
            dist.barrier()
            prof.step()
    dist.destroy_process_group()
if __name__ == "__main__":
    mp.spawn(work, nprocs=W)

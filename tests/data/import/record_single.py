#!/usr/bin/python3
# Records tb_w0.*.pt.trace.json.gz (tests/e2e/import_test.cc): one process profiled in two
# cycles (schedule repeat=2) by tensorboard_trace_handler, a file per cycle:
#   /usr/bin/python3 record_single.py tbdir tb   (its files w0.MILLIS.pt.trace.json.gz, renamed tb_w0.MILLIS...)
# single-process traces with many profiler features
import sys, os, torch, torch.nn as nn
from torch.profiler import profile, schedule, ProfilerActivity, record_function, tensorboard_trace_handler
torch.manual_seed(0)
out = sys.argv[1]
class DS(torch.utils.data.Dataset):
    def __len__(self): return 4096
    def __getitem__(self, i): return torch.randn(64), torch.randn(8)
@torch.jit.script
def scripted_act(x):
    return torch.relu(x) * 2.0 + 1.0
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
dl = torch.utils.data.DataLoader(DS(), batch_size=32, num_workers=2)
def step(x, y):
    with record_function("## outer_step ##"):
        with record_function("forward_block"):
            with record_function("inner_fwd"):
                h = model(x)
            h = scripted_act(h)
            loss = ((h - y) ** 2).mean()
        with record_function("backward_block"):
            opt.zero_grad(); loss.backward()
        with record_function("opt_block"):
            opt.step()
mode = sys.argv[2] if len(sys.argv) > 2 else "features"
it = iter(dl)
if mode == "features":
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=True, profile_memory=True, with_flops=True,
                 schedule=schedule(wait=1, warmup=1, active=3),
                 on_trace_ready=lambda p: p.export_chrome_trace(out)) as prof:
        for i in range(6):
            x, y = next(it); step(x, y); prof.step()
elif mode == "tb":
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=3, repeat=2),
                 on_trace_ready=tensorboard_trace_handler(out, worker_name="w0", use_gzip=True)) as prof:
        for i in range(12):
            x, y = next(it); step(x, y); prof.step()
elif mode == "big":
    # many small ops
    n = int(sys.argv[3])
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 on_trace_ready=lambda p: p.export_chrome_trace(out)) as prof:
        for s in range(n):
            with record_function(f"ProfilerStep#{s}"):
                a = torch.ones(4)
                for k in range(2000):
                    a = a + 1.0
            prof.step()

# The mlp sample's step in PyTorch on the CPU, for bench/vs_pytorch.sh:
# 784-1024-1024-10, batch 64, SGD, cross-entropy; prints steps/s (median of
# the timed steps). Settings follow ../shared/MACHINE-NOTES.md.
import sys
import time

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
torch.set_num_threads(1)
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(784, 1024), torch.nn.ReLU(),
    torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
    torch.nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
loss_fn = torch.nn.CrossEntropyLoss()
x = torch.randn(64, 784)
y = torch.randint(0, 10, (64,))
times = []
for step in range(steps):
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    loss.item()  # the same read the shardscope sample does each step
    times.append(time.perf_counter() - t0)
timed = sorted(times[10:])
median = timed[len(timed) // 2]
print(f"{1.0 / median:.1f}")

# The llama sample's training step in PyTorch on the CPU, for
# bench/vs_pytorch.sh: byte vocabulary 256, d_model 256, 2 layers, 4 heads,
# SwiGLU FFN 1024, RMSNorm, RoPE, seq 128, batch 8, AdamW. Prints steps/s
# (median of the timed steps). Settings follow ../shared/MACHINE-NOTES.md.
import math
import sys
import time

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
torch.set_num_threads(1)
torch.manual_seed(0)
V, D, L, H, F, T, B = 256, 256, 2, 4, 1024, 128, 8
DH = D // H


class RMSNorm(torch.nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables():
    pos = torch.arange(T, dtype=torch.float32)[:, None]
    i = torch.arange(DH, dtype=torch.float32)[None, :] % (DH // 2)
    ang = pos * torch.pow(10000.0, -2.0 * i / DH)
    return torch.cos(ang), torch.sin(ang)


COS, SIN = rope_tables()


def rope(x):
    x1, x2 = x[..., : DH // 2], x[..., DH // 2 :]
    return x * COS + torch.cat([-x2, x1], dim=-1) * SIN


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.n2 = RMSNorm(D), RMSNorm(D)
        self.q, self.k, self.v, self.o = (torch.nn.Linear(D, D) for _ in range(4))
        self.gate, self.up, self.down = torch.nn.Linear(D, F), torch.nn.Linear(D, F), torch.nn.Linear(F, D)

    def forward(self, x):
        h = self.n1(x)
        split = lambda y: y.view(B, T, H, DH).transpose(1, 2)
        q, k, v = rope(split(self.q(h))), rope(split(self.k(h))), split(self.v(h))
        s = q @ k.transpose(-1, -2) / math.sqrt(DH)
        s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), -1e9)
        a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, D)
        x = x + self.o(a)
        h = self.n2(x)
        return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(V, D)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(L))
        self.norm, self.head = RMSNorm(D), torch.nn.Linear(D, V)

    def forward(self, x):
        h = self.embed(x)
        for b in self.blocks:
            h = b(h)
        return self.head(self.norm(h))


model = Model()
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
x = torch.randint(0, V, (B, T))
y = torch.randint(0, V, (B * T,))
times = []
for step in range(steps):
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x).view(B * T, V), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    loss.item()
    times.append(time.perf_counter() - t0)
timed = sorted(times[3:])
print(f"{1.0 / timed[len(timed) // 2]:.2f}")

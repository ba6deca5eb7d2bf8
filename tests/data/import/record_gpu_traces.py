#!/usr/bin/env python3
"""Records real traces on a machine with an NVIDIA GPU, PyTorch 2.x and JAX, for the import tests.

    python3 record_gpu_traces.py OUT_DIR [PART ...]

Each part runs in a process of its own (a fresh CUDA context), with a time limit, and writes
gzipped traces into OUT_DIR; a part that fails leaves its error in OUT_DIR/log.txt and the others
go on. Parts, and the files the tests import (committed beside this script; recorded on an
NVIDIA H100 with PyTorch 2.11 and JAX 0.11, 2026-11-27):
  torch_compile   cuda_compile.json.gz: a small transformer under torch.compile (Triton
                  kernels), CPU and CUDA activities, record_shapes and profile_memory ([memory]
                  instants), a side stream copying the next batch from pinned memory while the
                  step computes; small enough that the GPU mostly waits for its launches;
  cuda_graphs     cuda_graphs.json.gz: the same model compiled with mode="reduce-overhead"
                  (CUDA graphs: one cudaGraphLaunch stands for many kernels);
  ddp_gloo        cuda_ddp_gloo_rank{0,1}.json.gz: two processes on the one GPU, DDP over gloo
                  (CUDA tensors), rank 1 waiting 8 ms for its "data" every step;
  jax_gpu         jax_gpu_mlp.json.gz: a jitted MLP train step on the GPU under jax.profiler
                  (steps from StepTraceAnnotation), the profiler's perfetto_trace.json.gz;
  jax_cpu8        jax_cpu8_gspmd.json.gz: the same step sharded over 8 host-platform CPU
                  devices (a 4x2 mesh): XLA's own all-reduces, run for each device on shared
                  host threads;
  jax_cpu8_slow   jax_cpu8_slow_device5.json.gz: the same, 8 steps, with a host callback that
                  sleeps 4 ms on device 5 only (inside a shard_map): a slow chip, really;
  torch_features  cuda_features.json.gz (recorded on an H200): eager steps with with_stack,
                  record_function spans, a side stream joined by an event, CUDA sync events;
  big             big_transformer.json.gz (not committed, about 3 MB): a 12-layer transformer
                  in bf16 for 12 profiled steps, about 150 thousand events;
  xplane_*        one capture each kept in both of XLA's forms, the XSpace (NAME.xplane.pb.gz)
                  and its Perfetto JSON (NAME.json.gz), recorded on an H200 with JAX 0.11 on
                  2026-11-28: xplane_gpu (xplane_gpu_mlp, 6 steps on the GPU), xplane_cpu8 (8
                  CPU devices, 8 steps; XSpace only committed), xplane_cpu8_slow (xplane_cpu8_slow5:
                  device 5 sleeping 4 ms a step), xplane_2proc (xplane_2host_slow6_host{0,1}: two
                  processes of 4 CPU devices, jax.distributed with gloo, global device 6 slowed),
                  xplane_2proc_slowhost (xplane_2host_slowhost1_host{0,1}: the same job, 10 steps,
                  process 1 sleeping 3 ms before dispatching each step: a slow host), and
                  xplane_2proc_healthy (xplane_2host_healthy_host{0,1}: nothing slowed). The same
                  under asynchronous dispatch (the loop not blocking on each step): xplane_gpu_async
                  (a bigger MLP, 8 steps), xplane_cpu8_async (xplane_cpu8_async_slow5) and
                  xplane_2proc_async (xplane_2host_async_slow6_host{0,1}).
The JAX parts also leave the profiler's whole log directory (xplane.pb included) as NAME.tar.
"""
import glob
import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import traceback

PARTS = ["torch_compile", "cuda_graphs", "ddp_gloo", "jax_gpu", "jax_cpu8", "jax_cpu8_slow", "big", "torch_features",
         "xplane_gpu", "xplane_cpu8", "xplane_cpu8_slow", "xplane_2proc", "xplane_2proc_slowhost",
         "xplane_2proc_healthy", "xplane_gpu_async", "xplane_cpu8_async", "xplane_2proc_async"]
LIMIT_S = {"torch_compile": 150, "cuda_graphs": 150, "ddp_gloo": 120, "big": 150, "jax_gpu": 90, "jax_cpu8": 90,
           "jax_cpu8_slow": 90, "torch_features": 120,
           "xplane_gpu": 90, "xplane_cpu8": 90, "xplane_cpu8_slow": 90, "xplane_2proc": 120,
           "xplane_2proc_slowhost": 120, "xplane_2proc_healthy": 120, "xplane_gpu_async": 90,
           "xplane_cpu8_async": 90, "xplane_2proc_async": 120}


def gzip_json(src, dst):
    with open(src) as f:
        trace = json.load(f)
    with gzip.open(dst, "wt", compresslevel=9) as f:
        json.dump(trace, f, separators=(",", ":"))
    os.remove(src)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- PyTorch -------------------------------------------------------------------------------

def transformer(layers, d, heads):
    import torch
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
    return torch.nn.Sequential(torch.nn.TransformerEncoder(layer, layers), torch.nn.Linear(d, 1000))


def profiled(out_path, steps_active, **kw):
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule
    tmp = out_path[:-3]
    return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                   schedule=schedule(wait=1, warmup=1, active=steps_active),
                   on_trace_ready=lambda p: p.export_chrome_trace(tmp), **kw), tmp


def part_torch_compile(out, mode=None, name="cuda_compile"):
    import torch
    model = transformer(2, 256, 4).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    compiled = torch.compile(model, mode=mode) if mode else torch.compile(model)
    host_x = torch.randn(8, 128, 256).pin_memory()
    host_y = torch.randint(0, 1000, (8, 128)).pin_memory()
    copy_stream = torch.cuda.Stream()
    x, y = host_x.cuda(), host_y.cuda()
    for _ in range(3):  # compile before the profiler opens
        loss = torch.nn.functional.cross_entropy(compiled(x).flatten(0, 1), y.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    path = os.path.join(out, f"{name}.json.gz")
    prof, tmp = profiled(path, 4, record_shapes=True, profile_memory=True)
    with prof:
        for _ in range(6):
            if mode == "reduce-overhead":
                torch.compiler.cudagraph_mark_step_begin()
            with torch.cuda.stream(copy_stream):  # the next batch, beside the step
                nx, ny = host_x.to("cuda", non_blocking=True), host_y.to("cuda", non_blocking=True)
            loss = torch.nn.functional.cross_entropy(compiled(x).flatten(0, 1), y.flatten())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.current_stream().wait_stream(copy_stream)
            x, y = nx, ny
            loss.item()
            prof.step()
    torch.cuda.synchronize()
    gzip_json(tmp, path)


def part_cuda_graphs(out):
    part_torch_compile(out, mode="reduce-overhead", name="cuda_graphs")


def part_torch_features(out):
    """Eager steps with what users switch on: with_stack (Python frames), record_function
    spans, a second stream joined by an event, a device-to-device copy, and CUDA sync events."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule
    model = transformer(2, 256, 4).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(8, 128, 256, device="cuda")
    y = torch.randint(0, 1000, (8, 128), device="cuda")
    side = torch.cuda.Stream()
    path = os.path.join(out, "cuda_features.json.gz")
    tmp = path[:-3]
    kw = {}
    try:
        from torch._C._profiler import _ExperimentalConfig
        kw["experimental_config"] = _ExperimentalConfig(enable_cuda_sync_events=True)
    except Exception:
        pass
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=schedule(wait=1, warmup=1, active=3),
                 with_stack=True, record_shapes=True,
                 on_trace_ready=lambda p: p.export_chrome_trace(tmp), **kw) as prof:
        for _ in range(5):
            with record_function("data"):
                xb = x.clone()
            with record_function("forward"):
                loss = torch.nn.functional.cross_entropy(model(xb).flatten(0, 1), y.flatten())
            with record_function("backward"):
                loss.backward()
            done = torch.cuda.Event()
            with torch.cuda.stream(side):
                side.wait_stream(torch.cuda.current_stream())
                stats = torch.stack([p.grad.norm() for p in model.parameters()]).sum()
                done.record(side)
            torch.cuda.current_stream().wait_event(done)
            with record_function("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            stats.item()
            prof.step()
    torch.cuda.synchronize()
    gzip_json(tmp, path)


def ddp_worker(rank, world, port, out):
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    model = torch.nn.parallel.DistributedDataParallel(transformer(2, 256, 4).cuda(), device_ids=[0])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(8, 64, 256, device="cuda")
    y = torch.randint(0, 1000, (8, 64), device="cuda")
    path = os.path.join(out, f"cuda_ddp_gloo_rank{rank}.json.gz")
    prof, tmp = profiled(path, 4, record_shapes=True)
    with prof:
        for _ in range(6):
            if rank == 1:
                time.sleep(0.008)  # this rank's data arrives late
            loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            prof.step()
    gzip_json(tmp, path)
    dist.destroy_process_group()


def part_ddp_gloo(out):
    import torch.multiprocessing as mp
    mp.spawn(ddp_worker, args=(2, free_port(), out), nprocs=2, join=True)


def part_big(out):
    import torch
    model = transformer(12, 768, 12).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(8, 512, 768, device="cuda")
    y = torch.randint(0, 1000, (8, 512), device="cuda")
    path = os.path.join(out, "big_transformer.json.gz")
    prof, tmp = profiled(path, 12, record_shapes=True)
    with prof:
        for _ in range(14):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            prof.step()
    torch.cuda.synchronize()
    gzip_json(tmp, path)


# ---- JAX ------------------------------------------------------------------------------------

def slow_device(mesh, slow, seconds):
    """A shard_map'd identity whose host callback sleeps on device `slow` only: that device's
    work is late to the all-reduces after it, as a slow chip's would be."""
    import jax
    from jax.sharding import PartitionSpec as P
    try:
        shard_map = jax.shard_map
    except AttributeError:
        from jax.experimental.shard_map import shard_map

    def body(h):
        idx = jax.lax.axis_index("data") * mesh.shape["model"] + jax.lax.axis_index("model")

        def host(i, v):
            if int(i) == slow:
                time.sleep(seconds)
            return v
        return jax.pure_callback(host, jax.ShapeDtypeStruct(h.shape, h.dtype), idx, h)

    spec = P("data", "model")
    for kw in ({}, {"check_vma": False}, {"check_rep": False}):
        try:
            f = shard_map(body, mesh=mesh, in_specs=spec, out_specs=spec, **kw)
            return f
        except TypeError:
            continue
    raise RuntimeError("no shard_map signature fits")


def jax_train(out, name, mesh_shape, slow=None, steps=5, keep_as=None, dist=None, host_sleep=0.0, blocking=True,
              dims=(512, 1024, 256)):
    """keep_as: also keep the profile's xplane.pb as OUT/KEEP_AS.xplane.pb.gz and its Perfetto JSON
    as OUT/KEEP_AS.json.gz: one recording in both of the forms XLA's profiler writes. dist: (process
    id, processes, port) for a multi-process job on CPU devices (jax.distributed, gloo). host_sleep:
    seconds this process sleeps before dispatching each step (a slow host: its devices start late).
    blocking=False: the loop does not wait for each step (JAX's asynchronous dispatch), so each step's
    span on the host ends long before its devices run it; dims: (features, hidden, batch)."""
    import jax
    if dist:
        for opt, val in (("jax_cpu_collectives_implementation", "gloo"),):
            try:
                jax.config.update(opt, val)
            except Exception as e:  # a JAX that has no such option, or gloo as its only one
                print("config", opt, e)
        jax.distributed.initialize(coordinator_address=f"127.0.0.1:{dist[2]}", num_processes=dist[1],
                                   process_id=dist[0])
    import jax.numpy as jnp
    import numpy as np
    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    d, hid, batch = dims
    params = {"w1": jax.random.normal(k1, (d, hid)) * 0.02, "w2": jax.random.normal(k2, (hid, d)) * 0.02}
    x = jax.random.normal(k3, (batch, d))
    if mesh_shape:
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        devices = np.array(jax.devices()[: mesh_shape[0] * mesh_shape[1]]).reshape(mesh_shape)
        mesh = Mesh(devices, ("data", "model"))

        def put(a, spec):
            if not dist:
                return jax.device_put(a, NamedSharding(mesh, spec))
            host = np.asarray(a)  # every process made the same values from the same key
            return jax.make_array_from_callback(host.shape, NamedSharding(mesh, spec), lambda i: host[i])
        params = {"w1": put(params["w1"], P(None, "model")), "w2": put(params["w2"], P("model", None))}
        x = put(x, P("data", None))

    def loss_fn(p, x):
        h = jax.nn.relu(x @ p["w1"])
        if slow is not None:  # forward only: the callback has no derivative, its input none to take
            h = h + 0.0 * slow_device(mesh, slow, 0.004)(jax.lax.stop_gradient(h))
        return jnp.mean((h @ p["w2"] - x) ** 2)

    @jax.jit
    def step(p, x):
        loss, g = jax.value_and_grad(loss_fn)(p, x)
        return jax.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g), loss

    params, loss = step(params, x)
    loss.block_until_ready()
    logdir = os.path.join(out, name + "_logdir")
    try:
        jax.profiler.start_trace(logdir, create_perfetto_trace=True)
    except TypeError:
        jax.profiler.start_trace(logdir)
    for i in range(steps):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            if host_sleep:
                time.sleep(host_sleep)
            params, loss = step(params, x)
            if blocking:
                loss.block_until_ready()
    loss.block_until_ready()
    jax.profiler.stop_trace()
    for trace in glob.glob(os.path.join(logdir, "plugins", "profile", "*", "perfetto_trace.json.gz")):
        shutil.copy(trace, os.path.join(out, keep_as + ".json.gz" if keep_as else
                                        {"jax_gpu": "jax_gpu_mlp", "jax_cpu8": "jax_cpu8_gspmd",
                                         "jax_cpu8_slow": "jax_cpu8_slow_device5"}[name] + ".json.gz"))
    for xplane in glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb")):
        if keep_as:
            with open(xplane, "rb") as f, gzip.open(os.path.join(out, keep_as + ".xplane.pb.gz"), "wb", 9) as g:
                shutil.copyfileobj(f, g)
    with tarfile.open(os.path.join(out, name + ".tar"), "w") as t:
        t.add(logdir, arcname=name)
    shutil.rmtree(logdir)
    try:
        print(name, "loss", float(loss), "devices", jax.devices())
    except Exception:  # a multi-process job's loss is not all on this process
        print(name, "devices", jax.devices())


def part_jax_gpu(out):
    jax_train(out, "jax_gpu", None)


def part_jax_cpu8(out):
    jax_train(out, "jax_cpu8", (4, 2))


def part_jax_cpu8_slow(out):
    jax_train(out, "jax_cpu8_slow", (4, 2), slow=5, steps=8)


# One recording each, kept both as XLA's profiler writes it (xplane.pb) and as its Perfetto JSON.
def part_xplane_gpu(out):
    jax_train(out, "xplane_gpu", None, steps=6, keep_as="xplane_gpu_mlp")


def part_xplane_cpu8(out):
    jax_train(out, "xplane_cpu8", (4, 2), steps=8, keep_as="xplane_cpu8")


def part_xplane_cpu8_slow(out):
    jax_train(out, "xplane_cpu8_slow", (4, 2), slow=5, steps=8, keep_as="xplane_cpu8_slow5")


# Asynchronous dispatch: the loop does not block on each step (as most JAX training loops),
# so the devices run each step after its span on the host has ended.
def part_xplane_gpu_async(out):
    jax_train(out, "xplane_gpu_async", None, steps=8, keep_as="xplane_gpu_async", blocking=False,
              dims=(2048, 4096, 4096))


def part_xplane_cpu8_async(out):
    jax_train(out, "xplane_cpu8_async", (4, 2), slow=5, steps=8, keep_as="xplane_cpu8_async_slow5", blocking=False)


def part_xplane_2proc_async(out):
    two_processes(out, "async")


def part_xplane_2proc(out):
    """Two processes of 4 CPU devices each (jax.distributed, gloo all-reduces between them), global
    device 6 (process 1's third) slowed: one xplane.pb per host, as a multi-host job writes them."""
    port = free_port()
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=4")
    procs = [subprocess.Popen([sys.executable, __file__, out, "--worker2", str(i), str(port)], env=env)
             for i in range(2)]
    rcs = [p.wait(timeout=100) for p in procs]
    if any(rcs):
        raise RuntimeError(f"workers exited {rcs}")


def two_processes(out, kind):
    port = free_port()
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=4")
    procs = [subprocess.Popen([sys.executable, __file__, out, "--worker2", str(i), str(port), kind], env=env)
             for i in range(2)]
    rcs = [p.wait(timeout=100) for p in procs]
    if any(rcs):
        raise RuntimeError(f"workers exited {rcs}")


def part_xplane_2proc_slowhost(out):
    """The same two processes, no device slowed: process 1 sleeps 3 ms before dispatching each step,
    so its 4 devices reach the all-reduces that span both hosts late together (a slow host)."""
    two_processes(out, "slowhost")


def part_xplane_2proc_healthy(out):
    """The same two processes, nothing slowed."""
    two_processes(out, "healthy")


def worker2(out, i, port, kind=""):
    if kind == "async":
        jax_train(out, f"xplane_2proc_async_p{i}", (4, 2), slow=6, steps=8, keep_as=f"xplane_2host_async_slow6_host{i}",
                  dist=(i, 2, port), blocking=False)
        return
    if kind in ("slowhost", "healthy"):
        jax_train(out, f"xplane_2proc_{kind}_p{i}", (4, 2), steps=10,
                  keep_as=f"xplane_2host_{'slowhost1' if kind == 'slowhost' else 'healthy'}_host{i}",
                  dist=(i, 2, port), host_sleep=0.003 if i == 1 and kind == "slowhost" else 0.0)
        return
    jax_train(out, f"xplane_2proc_p{i}", (4, 2), slow=6, steps=8, keep_as=f"xplane_2host_slow6_host{i}",
              dist=(i, 2, port))


# ---- driver ----------------------------------------------------------------------------------

def main():
    out = os.path.abspath(sys.argv[1])
    if len(sys.argv) > 4 and sys.argv[2] == "--worker2":
        worker2(out, int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else "")
        return
    if len(sys.argv) > 3 and sys.argv[2] == "--part":
        globals()["part_" + sys.argv[3]](out)
        return
    os.makedirs(out, exist_ok=True)
    parts = sys.argv[2:] or PARTS
    with open(os.path.join(out, "log.txt"), "a") as log:
        for p in parts:
            env = dict(os.environ, PYTHONUNBUFFERED="1")
            if p.startswith("jax_cpu8") or p.startswith("xplane_cpu8"):
                env.update(JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=8")
            if p.startswith("jax") or p.startswith("xplane"):
                env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
            t0 = time.time()
            try:
                r = subprocess.run([sys.executable, __file__, out, "--part", p], env=env, timeout=LIMIT_S[p],
                                   capture_output=True, text=True)
                log.write(f"== {p}: rc {r.returncode} in {time.time() - t0:.1f} s\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}\n")
            except subprocess.TimeoutExpired:
                log.write(f"== {p}: timed out after {LIMIT_S[p]} s\n")
            except Exception:
                log.write(f"== {p}: {traceback.format_exc()}\n")
            log.flush()
            print(f"{p}: {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()

"""Per synchronous graph decode step (llama-1b bs 1, context 1000): the CUDA runtime/driver
calls and top-level aten ops the host makes, counted and timed with torch.profiler, plus the
unprofiled step time. Ad-hoc (#34): run under two trees to see where the host time went,
`TAG=main python bench/host_calls.py llama-1b` (bench/results/host-calls-h100-2026-11-27.txt)."""
import collections, os, sys, time, torch
from torch.profiler import profile, ProfilerActivity
from specdec import Engine
from specdec.bench.common import fast_weights, live_batch, sync
from specdec.rounds import RoundRunner
DEV = os.environ.get("DEV", "cuda"); tag = os.environ.get("TAG", "")
model = sys.argv[1] if len(sys.argv) > 1 else "llama-1b"
dt = torch.bfloat16 if DEV == "cuda" else torch.float32
ctx = 1000 if DEV == "cuda" else 50
with fast_weights(DEV, dt):
    eng = Engine(model=model, spec=None, device=DEV, dtype=str(dt).split(".")[1], max_batch=8, max_context=4096)
g = RoundRunner(eng, True, [1, 8], False)
if hasattr(g, "capture_all"): g.capture_all()
eng.rounds = g
N = 100
with live_batch(eng, 1, ctx) as reqs:
    for _ in range(30): g.decode_step(reqs)
    sync(DEV); t = time.perf_counter()
    for _ in range(N): g.decode_step(reqs)
    sync(DEV); print(f"[{tag}] {(time.perf_counter() - t) / N * 1e3:.3f} ms per sync graph decode step, unprofiled")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEV == "cuda" else [])
    with profile(activities=acts) as p:
        for _ in range(N): g.decode_step(reqs)
        sync(DEV)
api, ops, kern = collections.Counter(), collections.Counter(), collections.Counter()
api_t, ops_t = collections.Counter(), collections.Counter()
for e in p.events():
    name = e.name
    dev = str(getattr(e, "device_type", "")).endswith("CUDA")
    if dev:
        kern[name[:70]] += 1
    elif name.startswith(("cuda", "cu")) and not name.startswith("cudaGraph") or name.startswith("cudaGraph"):
        api[name] += 1; api_t[name] += e.cpu_time_total
    elif name.startswith("aten::") and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")):
        ops[name] += 1; ops_t[name] += e.cpu_time_total
print(f"[{tag}] runtime/driver calls per step: {sum(api.values()) / N:.1f}, {sum(api_t.values()) / N:.1f} us")
for k, v in api.most_common(20): print(f"[{tag}]   {v / N:5.1f} x {api_t[k] / N:7.1f} us  {k}")
print(f"[{tag}] top-level aten ops per step: {sum(ops.values()) / N:.1f}, {sum(ops_t.values()) / N:.1f} us")
for k, v in ops.most_common(25): print(f"[{tag}]   {v / N:5.1f} x {ops_t[k] / N:7.1f} us  {k}")
print(f"[{tag}] device kernels per step outside/inside graphs: {sum(kern.values()) / N:.1f}")
for k, v in kern.most_common(15): print(f"[{tag}]   {v / N:5.1f}  {k}")

"""Ad-hoc: where a bs-1 Engine.generate() step goes on the GPU, plain vs speculative, on the
trained pair (bf16, graphs and overlap on). Interleaved timing, then torch.profiler's CPU ops
and cProfile's Python functions per step.

    python bench/e2e_host_profile.py [topk,steps,ndt ...]"""
import cProfile
import io
import pstats
import sys
import time

import torch

from specdec import Engine, SpecConfig
from specdec.bench.common import sync
from specdec.bench.e2e import fixture_paths, heldout_prompts

NEW = 256
target, draft, heldout = fixture_paths()
prompts = heldout_prompts(heldout, 1)
configs = [tuple(map(int, c.split(","))) for c in sys.argv[1:]] or [(1, 3, 4), (1, 5, 6)]


def engine(spec):
    return Engine(model=target, spec=spec, draft=draft, device="cuda", dtype="bfloat16",
                  cuda_graph=True, overlap=True, cuda_graph_bs=[1], max_batch=1,
                  max_context=len(prompts[0]) + NEW + 64)


engines = {"plain": engine(None)}
for c in configs:
    engines[c] = engine(SpecConfig(topk=c[0], num_steps=c[1], num_draft_tokens=c[2]))
for e in engines.values():
    e.generate(prompts, max_new_tokens=32)

times = {k: [] for k in engines}
steps = {}
for _ in range(7):  # interleaved: drift hits every engine alike
    for k, e in engines.items():
        sync("cuda")
        s0 = e.stats.rounds
        t0 = time.perf_counter()
        out = e.generate(prompts, max_new_tokens=NEW)
        sync("cuda")
        times[k].append(time.perf_counter() - t0)
        steps[k] = (e.stats.rounds - s0) or len(out[0])
for k, ts in times.items():
    med = sorted(ts)[len(ts) // 2]
    print(f"{str(k):>10}: median {med * 1e3:7.1f} ms  {NEW / med:7.1f} tok/s  "
          f"{steps[k]} steps  {med / steps[k] * 1e3:.3f} ms/step  all {[round(t * 1e3) for t in ts]}",
          flush=True)

for k, e in engines.items():
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        e.generate(prompts, max_new_tokens=64)
        sync("cuda")
    n = steps[k] * 64 / NEW
    avg = prof.key_averages()
    cpu = sorted(avg, key=lambda a: a.self_cpu_time_total, reverse=True)
    tot = sum(a.self_cpu_time_total for a in avg) / n
    dev = lambda a: float(getattr(a, "self_device_time_total", 0) or 0)
    kern = [a for a in avg if dev(a) > 0 and a.device_type == torch.autograd.DeviceType.CUDA]
    print(f"== {k}: GPU busy {sum(map(dev, kern)) / n:.0f} us/step, "
          f"{sum(a.count for a in kern) / n:.0f} kernels/step")
    print(f"== {k}: torch.profiler CPU self time {tot:.0f} us/step; top ops per step")
    for a in cpu[:22]:
        print(f"   {a.self_cpu_time_total / n:8.1f} us {a.count / n:6.1f}x  {a.key[:80]}")
    pr = cProfile.Profile()
    pr.enable()
    e.generate(prompts, max_new_tokens=64)
    sync("cuda")
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(30)
    print(f"== {k}: cProfile tottime (64 tokens)\n" + s.getvalue()[-9000:])
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("cumtime").print_stats(45)
    print(f"== {k}: cProfile cumtime (64 tokens)\n" + s.getvalue()[-9000:])

# Each captured graph alone: host cost of a replay call, and its GPU time back to back.
for k, e in engines.items():
    for r in e.rounds.runners:
        g = r.graphs[1]
        sync("cuda")
        t0 = time.perf_counter()
        for _ in range(50):
            g.replay()
        host = (time.perf_counter() - t0) / 50
        sync("cuda")
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(50):
            g.replay()
        b.record()
        sync("cuda")
        print(f"{str(k):>10} {type(r.phase).__name__:>17}: replay() host {host * 1e6:6.1f} us, "
              f"back to back {a.elapsed_time(b) / 50 * 1e3:6.1f} us/replay")

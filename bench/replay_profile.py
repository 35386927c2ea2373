"""#34 (one GPU): the device timeline of one captured decode step replayed (graph.replay), and the
median time of the synchronous graph step, llama-1b and llama-8b at bs 1 and 8: span = busy + gaps, busy split by
kernel kind, against the floor (weights + KV over copy bandwidth). The bench's own code paths. Ad-hoc
(#34): `python bench/replay_profile.py llama-1b,llama-8b` (OUT: where the JSON goes; DEV=cpu runs
the tiny model on the CPU stand-in), bench/results/replay-profile-h100-2026-11-27.{txt,json}."""
import json, os, sys, torch
DEV = os.environ.get("DEV", "cuda")
from specdec import Engine
from specdec.engine import DTYPES
from specdec.rounds import RoundRunner
from specdec.bench.common import fast_weights, live_batch, median, time_ms, step_floor, copy_bandwidth, free
from specdec.bench.timeline import step_timeline, profiled
from torch.autograd import DeviceType

def kind(n):
    n = n.lower()
    if "splitkreduce" in n: return "gemm split-K reduce"
    if "nvjet" in n or "gemm" in n or "cutlass" in n or "sm90_xmma" in n: return "gemm"
    if "paged_attention" in n: return "attention"
    if "combine_splits" in n: return "attention combine"
    if "rms_norm" in n: return "rmsnorm"
    if "silu" in n: return "silu*mul"
    if "argmax" in n or "greedy" in n: return "argmax"
    return "other"

bw = copy_bandwidth(DEV)["bytes_per_s"]
out = []
iters, warmup, context = 20, 5, 1000
for model in sys.argv[1].split(","):
    with fast_weights(DEV, DTYPES["bfloat16"]):
        eng = Engine(model=model, spec=None, device=DEV, dtype="bfloat16", max_batch=8, max_context=context + 200)
    runner = RoundRunner(eng, True, [1, 8], False); runner.capture_all(); eng.rounds = runner
    for bs in (1, 8):
        floor, parts = step_floor(eng, bs=bs, context=context, warmup=warmup, iters=iters,
                                  bytes_per_s=bw)
        with live_batch(eng, bs, context) as reqs:
            step = lambda: runner.decode_step(reqs)
            sync_ms = median(time_ms(step, DEV, iters, warmup))
            step_timeline(step, DEV, 3)  # the profiler's warm-up, left out
            g = runner.decode_runner.graphs[runner.decode_runner.bucket(bs)]
            rep_ms = median(time_ms(g.replay, DEV, iters, warmup))
            line = step_timeline(g.replay, DEV, iters)
            prof = profiled(g.replay, DEV, iters)
            ks = [e for e in prof.events() if e.device_type == DeviceType.CUDA and not e.name.startswith(DEV)]
            by = {}
            for e in ks:
                by.setdefault(kind(e.name), [0.0, 0])
                by[kind(e.name)][0] += (e.time_range.end - e.time_range.start) / 1e3 / iters
                by[kind(e.name)][1] += 1 / iters
        row = {"model": model, "bs": bs, "floor_ms": floor, "weight_bytes": parts["weight_bytes"], "kv_bytes": parts["kv_bytes"],
               "sync_graph_step_ms": sync_ms, "replay_ms": rep_ms, "replay_timeline": line,
               "replay_by_kind": {k: {"ms": v[0], "per_step": v[1]} for k, v in sorted(by.items(), key=lambda kv: -kv[1][0])}}
        out.append(row)
        print(f"{model} bs={bs}: floor {floor:.3f} ms (weights {parts['weight_bytes']/bw*1e3:.3f}, KV {parts['kv_bytes']/bw*1e3:.3f}); "
              f"sync step {sync_ms:.3f}; replay {rep_ms:.3f} = x{rep_ms/floor:.2f}; under the profiler span {line['span_ms']:.3f} = busy {line['busy_ms']:.3f} + gaps {line['gap_ms']:.3f}, {line['kernels_per_step']:.0f} kernels", flush=True)
        for k, v in row["replay_by_kind"].items():
            print(f"    {v['ms']:7.3f} ms  x{v['per_step']:5.0f}  {k}")
    del runner, eng; free(DEV)
json.dump({"device": torch.cuda.get_device_name() if DEV == "cuda" else DEV, "copy_bytes_per_s": bw, "command": "python bench/replay_profile.py " + sys.argv[1], "rows": out},
          open(os.environ.get("OUT", "/tmp") + "/replay-profile.json", "w"), indent=1)

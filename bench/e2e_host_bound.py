"""Ad-hoc: is a bs-1 generate() bound by the host or the GPU? The time spent inside
InFlight.wait (the host idle, waiting for the device) against the whole call, plain and
speculative, page sizes 1 and 16 (trained pair, bf16, graphs and overlap on).

    python bench/e2e_host_bound.py"""
import sys, time
import torch
from specdec import Engine, SpecConfig
from specdec import overlap as O
from specdec.bench.common import sync
from specdec.bench.e2e import fixture_paths, heldout_prompts
NEW = 256
t, d, h = fixture_paths()
prompts = heldout_prompts(h, 1)
W = [0.0]
ow = O.InFlight.wait
def wait(self):
    t0 = time.perf_counter(); r = ow(self); W[0] += time.perf_counter() - t0; return r
O.InFlight.wait = wait
cfgs = [None, (1,3,4), (1,4,5), (1,5,6)]
for ps in (1, 16):
    engines = {}
    for c in cfgs:
        engines[c] = Engine(model=t, spec=None if c is None else SpecConfig(topk=c[0],
                                                                            num_steps=c[1],
                                                                            num_draft_tokens=c[2]),
                                                                            draft=d, device="cuda",
                                                                            dtype="bfloat16",
                   cuda_graph=True, overlap=True, cuda_graph_bs=[1], max_batch=1, page_size=ps,
                   max_context=len(prompts[0]) + NEW + 64)
        engines[c].generate(prompts, max_new_tokens=32)
    res = {c: [] for c in cfgs}
    for _ in range(7):
        for c, e in engines.items():
            sync("cuda"); W[0] = 0.0; r0 = e.stats.rounds
            t0 = time.perf_counter(); out = e.generate(prompts, max_new_tokens=NEW); sync("cuda")
            res[c].append((time.perf_counter() - t0, W[0], (e.stats.rounds - r0) or len(out[0])))
    for c, rs in res.items():
        rs.sort()
        wall, w, n = rs[len(rs)//2]
        print(f"page {ps:2d} {str(c):>10}: median {wall*1e3:6.1f} ms (all {[round(x[0]*1e3) for x in sorted(rs, key=lambda x: x[0])]}), {n} steps, "
              f"{wall/n*1e3:.3f} ms/step, waiting on the device {w/wall*100:4.1f}% -> host busy {(wall-w)/n*1e3:.3f} ms/step", flush=True)
    del engines; torch.cuda.empty_cache()

"""Ad-hoc: the kernels of one replay of the whole-round graph (trained pair, (1,3,4), bs 1,
bf16), by count, over 20 back-to-back replays under torch.profiler."""
import torch, collections
from specdec import Engine, SpecConfig
from specdec.bench.common import sync
from specdec.bench.e2e import fixture_paths, heldout_prompts
t, d, h = fixture_paths()
prompts = heldout_prompts(h, 1)
eng = Engine(model=t, spec=SpecConfig(topk=1,num_steps=3,num_draft_tokens=4), draft=d,
             device="cuda", dtype="bfloat16", cuda_graph=True, overlap=True, cuda_graph_bs=[1],
             max_batch=1, max_context=len(prompts[0]) + 320)
eng.generate(prompts, max_new_tokens=64)
g = eng.rounds.fused.graphs[1]
for _ in range(5): g.replay()
sync("cuda")
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
    for _ in range(20): g.replay()
    sync("cuda")
evs = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
byname = collections.defaultdict(lambda: [0, 0.0])
for e in evs:
    byname[e.name][0] += 1; byname[e.name][1] += e.device_time_total if hasattr(e,'device_time_total') else e.cuda_time_total
tot = sum(v[1] for v in byname.values())/20
print(f"kernels/replay {sum(v[0] for v in byname.values())/20:.0f}, busy {tot:.0f} us/replay")
for k, (n, us) in sorted(byname.items(), key=lambda kv: -kv[1][0])[:90]:
    print(f"{n/20:6.1f}x {us/20:7.1f} us  {k[:110]}")

"""Ad-hoc: where the overlapped Engine.step() time goes (H100, bf16, bs 1, context 1000)."""
import sys, time, torch
from specdec import Engine, SpecConfig
from specdec.bench.common import fast_weights, prompts, sync
from specdec.bench.profile import profiled
from specdec.engine import DTYPES

def run(model, spec):
    with fast_weights("cuda", DTYPES["bfloat16"]):
        eng = Engine(model=model, spec=spec, device="cuda", dtype="bfloat16", max_batch=1,
                     max_context=1300, cuda_graph=True, cuda_graph_bs=[1], overlap=True)
    eng.add_request(prompts(1, 1000, eng.cfg.vocab_size)[0], 200)
    with torch.inference_mode():
        for _ in range(20):
            eng.step()
        sync("cuda"); t0 = time.perf_counter(); n = 40
        for _ in range(n):
            eng.step()
        sync("cuda"); wall = (time.perf_counter() - t0) * 1e3 / n
        prof = profiled(eng.step, "cuda", n)
    avg = prof.key_averages()
    dev = lambda e: float(getattr(e, "self_device_time_total", 0) or 0)
    ks = sorted((e for e in avg if dev(e) > 0), key=dev, reverse=True)
    busy = sum(dev(e) for e in ks) / n / 1e3
    launches = sum(e.count for e in ks) / n
    name = f"{model} {'spec(1,3,4)' if spec else 'decode'}"
    print(f"== {name}: step {wall:.3f} ms wall, GPU busy {busy:.3f} ms/step, {launches:.0f} kernels/step")
    for e in ks[:12]:
        print(f"   {dev(e)/n/1e3:8.3f} ms/step {e.count/n:5.1f}x  {e.key[:90]}")
    del eng; torch.cuda.empty_cache()

for model in sys.argv[1].split(","):
    run(model, None)
run("llama-8b", SpecConfig(topk=1, num_steps=3, num_draft_tokens=4))

"""`python -m specdec bench e2e`: plain vs speculative decoding of a trained target, end to end.

Through `Engine.generate` (admission, prefill, rounds, finishing: what a user runs), with
CUDA graphs and overlap scheduling on, at each batch size: tokens per second of plain greedy
decoding and of speculative decoding with the trained EAGLE head, on the fixture's held-out
prompts; the mean accept length (tokens committed per request-round, the bonus included) and
the speedup. Then a projection, labelled as such: the speedup that accept length would give
on llama-8b, from llama-8b's measured round cost in decode steps (`bench spec`): a round
commits `accept length` tokens for the time of `round_in_decode_steps` plain steps."""
from __future__ import annotations

import json
import time

from specdec import Engine, SpecConfig
from specdec.bench.common import free, sync
from specdec.validate import reserve_margin

DEFAULT_ROUND_COST = "bench/results/spec-h100-2026-11-23.json"


def fixture_paths() -> tuple[str, str, str]:
    """(target dir, EAGLE head dir, held-out JSON) of the committed trained pair."""
    from specdec.fixtures import trained_pair_paths
    target, eagle, _, heldout = trained_pair_paths()
    return str(target), str(eagle), str(heldout)


def heldout_prompts(path: str, n: int) -> list[list[int]]:
    """n held-out prompts (cycled when the set is smaller)."""
    with open(path) as f:
        prompts = json.load(f)["prompts"]
    if not prompts:
        raise ValueError(f"{path}: no held-out prompts")
    return [list(map(int, prompts[i % len(prompts)])) for i in range(n)]


def _timed_pair(plain: Engine, spec: Engine, prompts: list[list[int]], new_tokens: int,
                repeats: int) -> tuple[dict, dict]:
    """Plain and speculative generate() of the same batch, timed alternately (`repeats` calls
    each, after a warm-up call of each): at bs 1 both are bound by the host, whose speed
    drifts between calls, and alternating gives the drift to both. Per engine: the median
    wall time of its calls, tokens/s over it, the mean accept length and the outputs."""
    runs = {"plain": (plain, []), "spec": (spec, [])}
    for eng, _ in runs.values():
        eng.generate(prompts, max_new_tokens=min(16, new_tokens))  # warm-up: captures, caches
    s0 = (spec.stats.accepted, spec.stats.req_rounds)
    outs = {}
    for _ in range(repeats):
        for name, (eng, times) in runs.items():
            sync(eng.device)
            t0 = time.perf_counter()
            outs[name] = eng.generate(prompts, max_new_tokens=new_tokens)
            sync(eng.device)
            times.append(time.perf_counter() - t0)
    rounds = spec.stats.req_rounds - s0[1]
    accept = (spec.stats.accepted - s0[0] + rounds) / rounds if rounds else None
    result = {}
    for name, (_, times) in runs.items():
        secs = sorted(times)[len(times) // 2]
        toks = sum(map(len, outs[name]))
        result[name] = {"seconds": secs, "tokens": toks, "tokens_per_s": toks / secs,
                        "all_seconds": times, "outputs": outs[name],
                        "mean_accept_length": accept if name == "spec" else None}
    return result["plain"], result["spec"]


def round_costs(path: str, model: str = "llama-8b") -> dict:
    """(topk, num_steps, ndt, bs) -> a round's cost in decode steps, from a `bench spec`
    result."""
    with open(path) as f:
        doc = json.load(f)
    return {(r["topk"], r["num_steps"], r["ndt"], r["bs"]): r["round_in_decode_steps"]
            for r in doc["results"] if r["model"] == model}


def _row(bs: int, cfg: tuple, new_tokens: int, base: dict, r: dict, cost) -> dict:
    """One (config, bs) row from a timed plain/spec pair, printed as one line."""
    topk, steps, ndt = cfg
    same = r["outputs"] == base["outputs"]  # greedy: lossless, ties aside
    row = {"bs": bs, "topk": topk, "num_steps": steps, "ndt": ndt,
           "new_tokens": new_tokens, "plain_tokens_per_s": base["tokens_per_s"],
           "spec_tokens_per_s": r["tokens_per_s"],
           "speedup": r["tokens_per_s"] / base["tokens_per_s"],
           # The fastest call of each: what the speedup is with the host's drift
           # left out of both.
           "speedup_fastest": min(base["all_seconds"]) / min(r["all_seconds"]),
           "mean_accept_length": r["mean_accept_length"],
           "plain_seconds": base["all_seconds"], "spec_seconds": r["all_seconds"],
           "outputs_equal_plain": same,
           "llama8b_round_in_decode_steps": cost,
           "projected_llama8b_speedup": (r["mean_accept_length"] / cost
                                         if cost else None)}
    proj = (f"{row['projected_llama8b_speedup']:.2f}x" if cost else
            "n/a (no llama-8b round cost at this bs)")
    print(f"spec {topk},{steps},{ndt} bs={bs:<3} {r['tokens_per_s']:9.1f} tok/s, plain "
          f"{base['tokens_per_s']:9.1f} tok/s  accept {r['mean_accept_length']:.3f}  "
          f"speedup {row['speedup']:.2f}x (fastest calls {row['speedup_fastest']:.2f}x)  "
          f"projection llama-8b {proj}  "
          f"outputs==plain {same}", flush=True)
    return row


E2E_CONVENTION = ("tokens_per_s: output tokens of one generate() call over the "
                  "median wall time of `repeats` such calls, after a warm-up call of "
                  "the same batch; plain and speculative calls alternate, so each row's "
                  "plain figure was measured beside its speculative one; speedup: spec "
                  "over plain at the same bs (speedup_fastest: of the fastest call of "
                  "each). "
                  "projected_llama8b_speedup is a PROJECTION, not a measurement: "
                  "mean_accept_length (measured here) / llama-8b's round cost in "
                  "decode steps (measured by bench spec, round_cost_source).")


def run(device: str, dtype: str, batch_sizes: list[int], new_tokens: int, configs: list,
        target: str | None = None, draft: str | None = None, heldout: str | None = None,
        round_cost: str = DEFAULT_ROUND_COST, repeats: int = 5) -> tuple[list[dict], dict]:
    if target is None or draft is None or heldout is None:
        ft, fd, fh = fixture_paths()
        target, draft, heldout = target or ft, draft or fd, heldout or fh
    costs = round_costs(round_cost)
    prompts = {bs: heldout_prompts(heldout, bs) for bs in batch_sizes}
    longest = max(len(p) for ps in prompts.values() for p in ps)
    top = max(batch_sizes)
    rows = []

    def engine(spec):
        margin = reserve_margin(spec, 1, True)
        eng = Engine(model=target, spec=spec, draft=draft, device=device, dtype=dtype,
                     cuda_graph=True, overlap=True, cuda_graph_bs=sorted(set(batch_sizes)),
                     max_batch=top, max_context=longest + new_tokens + margin)
        eng.capture_graphs()  # none inside a timing
        return eng

    plain = engine(None)
    for topk, steps, ndt in configs:
        eng = engine(SpecConfig(topk, steps, ndt))
        for bs in batch_sizes:
            base, r = _timed_pair(plain, eng, prompts[bs], new_tokens, repeats)
            rows.append(_row(bs, (topk, steps, ndt), new_tokens, base, r,
                             costs.get((topk, steps, ndt, bs))))
        del eng
        free(device)
    extra = {"target": target, "draft": draft, "heldout": heldout, "dtype": dtype,
             "cuda_graph": True, "overlap": True, "round_cost_source": round_cost,
             "repeats": repeats, "convention": E2E_CONVENTION}
    return rows, extra

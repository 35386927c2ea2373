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


def _timed(engines: dict, prompts: list[list[int]], new_tokens: int, repeats: int) -> dict:
    """generate() of the same batch on each engine, timed alternately (`repeats` calls each,
    after a warm-up call of each): at bs 1 they are bound by the host, whose speed drifts
    between calls, and alternating gives the drift to all. Per engine: the median wall time
    of its calls, tokens/s over it, the mean accept length (speculative engines) and the
    outputs."""
    times = {name: [] for name in engines}
    for eng in engines.values():
        eng.generate(prompts, max_new_tokens=min(16, new_tokens))  # warm-up: captures, caches
    before = {name: (e.stats.accepted, e.stats.req_rounds) for name, e in engines.items()}
    outs = {}
    for _ in range(repeats):
        for name, eng in engines.items():
            sync(eng.device)
            t0 = time.perf_counter()
            outs[name] = eng.generate(prompts, max_new_tokens=new_tokens)
            sync(eng.device)
            times[name].append(time.perf_counter() - t0)
    result = {}
    for name, eng in engines.items():
        rounds = eng.stats.req_rounds - before[name][1]
        accepted = eng.stats.accepted - before[name][0]
        secs = sorted(times[name])[len(times[name]) // 2]
        toks = sum(map(len, outs[name]))
        result[name] = {"seconds": secs, "tokens": toks, "tokens_per_s": toks / secs,
                        "all_seconds": times[name], "outputs": outs[name],
                        "mean_accept_length": ((accepted + rounds) / rounds
                                               if eng.spec is not None and rounds else None)}
    return result


def round_costs(path: str, model: str = "llama-8b") -> dict:
    """(topk, num_steps, ndt, bs) -> a round's cost in decode steps, from a `bench spec`
    result."""
    with open(path) as f:
        doc = json.load(f)
    return {(r["topk"], r["num_steps"], r["ndt"], r["bs"]): r["round_in_decode_steps"]
            for r in doc["results"] if r["model"] == model}


def _row(bs: int, *, cfg: tuple, new_tokens: int, base: dict, r: dict, cost, tp: int = 1) -> dict:
    """One (tp, config, bs) row from a timed plain/spec pair, printed as one line."""
    topk, steps, ndt = cfg
    same = r["outputs"] == base["outputs"]  # greedy: lossless, ties aside
    row = {"tp": tp, "bs": bs, "topk": topk, "num_steps": steps, "ndt": ndt,
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
    print(f"tp={tp} spec {topk},{steps},{ndt} bs={bs:<3} {r['tokens_per_s']:9.1f} tok/s, plain "
          f"{base['tokens_per_s']:9.1f} tok/s  accept {r['mean_accept_length']:.3f}  "
          f"speedup {row['speedup']:.2f}x (fastest calls {row['speedup_fastest']:.2f}x)  "
          f"projection llama-8b {proj}  "
          f"outputs==plain {same}", flush=True)
    return row


def _against_tp1(rows: list[dict], tokens: dict) -> None:
    """Each tp > 1 row against the tp-1 row of its config and bs: plain and speculative
    tokens/s over tp 1's, and whether it generated tp 1's tokens (`tokens`: the speculative
    outputs by (tp, topk, num_steps, ndt, bs))."""
    key = ("bs", "topk", "num_steps", "ndt")
    for r in rows:
        if r["tp"] == 1:
            continue
        one = next(o for o in rows if o["tp"] == 1 and all(o[k] == r[k] for k in key))
        cell = (r["topk"], r["num_steps"], r["ndt"], r["bs"])
        r["plain_vs_tp1"] = r["plain_tokens_per_s"] / one["plain_tokens_per_s"]
        r["spec_vs_tp1"] = r["spec_tokens_per_s"] / one["spec_tokens_per_s"]
        r["outputs_equal_tp1"] = tokens[(r["tp"], *cell)] == tokens[(1, *cell)]
        print(f"tp={r['tp']} spec {r['topk']},{r['num_steps']},{r['ndt']} bs={r['bs']:<3} vs tp1: "
              f"plain x{r['plain_vs_tp1']:.2f}, spec x{r['spec_vs_tp1']:.2f}, outputs==tp1 "
              f"{r['outputs_equal_tp1']}", flush=True)


E2E_CONVENTION = ("tokens_per_s: output tokens of one generate() call over the "
                  "median wall time of `repeats` such calls, after a warm-up call of "
                  "the same batch; at tp 1 plain and speculative calls alternate, so each "
                  "row's plain figure was measured beside its speculative one (at tp > 1 "
                  "one after the other: one tensor-parallel engine per process); speedup: spec "
                  "over plain at the same bs (speedup_fastest: of the fastest call of "
                  "each). "
                  "projected_llama8b_speedup is a PROJECTION, not a measurement: "
                  "mean_accept_length (measured here) / llama-8b's round cost in "
                  "decode steps (measured by bench spec, round_cost_source).")


def run(device: str, *, dtype: str, batch_sizes: list[int], new_tokens: int, configs: list,
        target: str | None = None, draft: str | None = None, heldout: str | None = None,
        round_cost: str = DEFAULT_ROUND_COST, repeats: int = 5,
        tp: int = 1) -> tuple[list[dict], dict]:
    """Rows per (tp, config, bs); with tp > 1 the same rows at tp 1 first, in the same run
    (the peer), each tp's plain and speculative engines sharded alike."""
    if target is None or draft is None or heldout is None:
        ft, fd, fh = fixture_paths()
        target, draft, heldout = target or ft, draft or fd, heldout or fh
    costs = round_costs(round_cost)
    prompts = {bs: heldout_prompts(heldout, bs) for bs in batch_sizes}
    longest = max(len(p) for ps in prompts.values() for p in ps)
    top = max(batch_sizes)
    rows, tokens = [], {}

    def engine(spec, size):
        margin = reserve_margin(spec, 1, True)
        # tp_check off, as in the decode and spec benches: it exchanges every rank's graph
        # decision over the control group before each captured phase, a host round trip a
        # step that would be timed as tensor parallelism's cost (the TP laws check agreement).
        eng = Engine(model=target, spec=spec, draft=draft, device=device, dtype=dtype,
                     cuda_graph=True, overlap=True, cuda_graph_bs=sorted(set(batch_sizes)),
                     max_batch=top, max_context=longest + new_tokens + margin, tp_size=size,
                     tp_check=False)
        eng.capture_graphs()  # none inside a timing
        return eng

    def timed_alone(spec, size) -> dict:
        """bs -> one engine's timings, the engine built, timed and closed."""
        eng = engine(spec, size)
        try:
            return {bs: _timed({"e": eng}, prompts[bs], new_tokens, repeats)["e"]
                    for bs in batch_sizes}
        finally:
            eng.close()
            free(device)

    for size in sorted({1, tp}):
        # One tensor-parallel engine per process at a time: at tp > 1 plain and speculative
        # are timed one after the other; at tp 1 side by side, alternating.
        plain = engine(None, size) if size == 1 else None
        alone = None if size == 1 else timed_alone(None, size)
        for topk, steps, ndt in configs:
            cfg = SpecConfig(topk=topk, num_steps=steps, num_draft_tokens=ndt)
            if size == 1:
                eng = engine(cfg, size)
                pairs = {bs: _timed({"plain": plain, "spec": eng}, prompts[bs], new_tokens,
                                    repeats) for bs in batch_sizes}
                eng.close()
                free(device)
            else:
                spec_alone = timed_alone(cfg, size)
                pairs = {bs: {"plain": alone[bs], "spec": spec_alone[bs]} for bs in batch_sizes}
            for bs in batch_sizes:
                rows.append(_row(bs, cfg=(topk, steps, ndt), new_tokens=new_tokens,
                                 base=pairs[bs]["plain"],
                                 r=pairs[bs]["spec"], cost=costs.get((topk, steps, ndt, bs)),
                                 tp=size))
                tokens[(size, topk, steps, ndt, bs)] = pairs[bs]["spec"]["outputs"]
        if plain is not None:
            plain.close()
            free(device)
    _against_tp1(rows, tokens)
    extra = {"target": target, "draft": draft, "heldout": heldout, "dtype": dtype,
             "cuda_graph": True, "overlap": True, "tp_check": False, "round_cost_source": round_cost,
             "repeats": repeats, "tp": tp, "convention": E2E_CONVENTION}
    return rows, extra

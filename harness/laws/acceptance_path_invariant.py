"""Law acceptance_path_invariant: acceptance is a property of the configuration, not of the
path that computes it.

Observables: per request, its tokens and its per-round accept lengths (tokens committed per
resolved speculative round, the bonus included: `RequestOutput.accept_lens`); for the tie
excuse, one path's per-round trace (draft and verify logits, accept index: specdec/trace.py)
and the target (a dense forward for the prefill's token)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hypothesis import strategies as st

from harness.base.failure import OracleFailure
from harness.base.liveness import Progress
from harness.references.acceptance_ties import (accept_decision_gap, draft_choice_gap,
                                                 target_path_gap)
from harness.references.dense import top2_margins
from harness.references.ties import TIE_EPS
from harness.strategies.configs import RunConfig, run_configs
from harness.strategies.drawn_run import build_engine, prompts_for, run, sampling_for
from harness.strategies.prefix_workloads import serve_waves, waves_of
from harness.strategies.runs import default_device, new_token_counts
from specdec.trace import TraceRecorder
from harness.laws.declaration import Law, Slice
from specdec.defaults import PAGE_SIZE

NAME = "acceptance_path_invariant"  # the law whose checks this module raises (OracleFailure)

BATCHES = ("same", "reversed", "halves", "alone")  # how path B's batch differs from A's
LATE = 2  # "halves": steps after which the second half joins


@dataclass(frozen=True, kw_only=True)
class PathPair(RunConfig):
    """Path A is the drawn run, synchronous; path B the same requests with these axes."""

    b_cuda_graph: bool = False
    b_overlap: bool = False
    b_prefix_cache: bool = False   # B's cache switch (the workload is A's either way)
    b_page_size: int = PAGE_SIZE
    b_batch: str = "same"          # BATCHES: the batch each request shares on path B
    b_tp_size: int = 1

    def path_b(self) -> RunConfig:
        return RunConfig(**{**{k: v for k, v in self.to_dict().items() if not k.startswith("b_")},
                            "cuda_graph": self.b_cuda_graph, "overlap": self.b_overlap,
                            "page_size": self.b_page_size, "tp_size": self.b_tp_size})


def path_pairs(drafts=("eagle", "perturbed", "perturbed:0.1", "self"), *, page_sizes=(1, 4, 16),
               graphs=(False, True), tp_sizes=(1,), dtypes=("float32",), model: str = "tiny",
               max_batch: int = 6, max_prompt_len: int = 24, max_new_tokens: int = 16,
               max_ndt: int = 32, prefix=(False, True)):
    """Greedy runs (A) and a second path (B) differing in graphs, overlap, prefix cache, page
    size, batch and tensor parallelism, each drawn (Hypothesis shrinks towards A == B).
    max_ndt caps trees (a cheaper tier: any ndt in 2..its maximum is feasible)."""
    def pair(cfg: RunConfig, b):
        g, o, c, p, batch, tp = b
        ndt = cfg.ndt if cfg.topk == 1 else min(cfg.ndt, max_ndt)
        return PathPair(**{**cfg.to_dict(), "overlap": False, "model": model, "ndt": ndt},
                        b_cuda_graph=g, b_overlap=o, b_prefix_cache=c, b_page_size=p,
                        b_batch="same" if cfg.prefix_cache else batch, b_tp_size=tp)
    base = run_configs(drafts=drafts, page_sizes=page_sizes, max_batch=max_batch, dtypes=dtypes,
                       graphs=graphs, max_prompt_len=max_prompt_len,
                       max_new_tokens=max_new_tokens, prefix=prefix)
    return st.builds(pair, base, st.tuples(
        st.sampled_from(graphs), st.booleans(), st.booleans(), st.sampled_from(page_sizes),
        st.sampled_from(BATCHES), st.sampled_from(tp_sizes)))


def _serve_b(a_cfg: RunConfig, eng, batch: str) -> list:
    """A's requests (A's workload: prompts, lengths, waves) on path B's engine, in the batch
    `batch` names; outputs in A's prompt order."""
    prompts = prompts_for(a_cfg, eng.cfg.vocab_size, str(eng.device))
    counts = new_token_counts(a_cfg.seed, a_cfg.batch_size, a_cfg.max_new_tokens, a_cfg.ragged)
    params = sampling_for(a_cfg)
    if a_cfg.prefix_cache:
        return serve_waves(eng, prompts=prompts, max_new=counts, params=params,
                           waves=waves_of(a_cfg))
    n = len(prompts)
    order = list(range(n))[::-1] if batch == "reversed" else list(range(n))
    arrive = {i: LATE if batch == "halves" and k >= (n + 1) // 2 else 0
              for k, i in enumerate(order)}
    outs = {}
    for group in ([[i] for i in order] if batch == "alone" else [order]):
        rids, step, progress = {}, 0, Progress(eng)
        while len(rids) < len(group) or eng.has_unfinished():
            for i in group:
                if i not in rids.values() and arrive[i] <= step:
                    rids[progress.add(eng.add_request(prompts[i], counts[i], params[i]))] = i
            progress.step()
            step += 1
        outs.update({i: eng.output(r) for r, i in rids.items()})
    return [outs[i] for i in range(n)]


def _rounds_by_rid(trace) -> dict[int, list[tuple]]:
    """rid -> [(round index, position in its batch), ...] in round order (path A is
    synchronous: round k resolves every request it ran, in launch order)."""
    out, pos = {}, 0
    for k, rnd in enumerate(trace.rounds):
        n = len(rnd.req_pool_indices)
        for b, (rid, _, _) in enumerate(trace.resolved[pos:pos + n]):
            out.setdefault(rid, []).append((k, b))
        pos += n
    return out


def _round_tie_gap(trace, k: int, b: int, cfg: RunConfig) -> float:
    """Smallest gap of any choice that set request b's accept length in round k of `trace`:
    the cuts along the target's greedy continuation (accept_decision_gap), or every cut of the
    round's tree where the re-derivation cannot follow the recorded one. The round's committed
    tokens come from the trace, not the output: a request that hits its token cap mid-round
    shows fewer tokens than the round accepted, and the accept length was decided by all."""
    rnd = trace.rounds[k]
    width = cfg.num_steps + 1  # accepted_tokens' stride
    committed = rnd.accepted_tokens[b * width:b * width + int(rnd.accept_lens[b])].tolist()
    history = list(trace.prefill) + [f for r in trace.rounds[:k] for f in r.forwards]
    row = int(rnd.req_pool_indices[b])
    step0 = next(f.logits[list(f.req_pool_indices.tolist()).index(row)] for f in reversed(history)
                 if f.mode == "draft_extend" and row in f.req_pool_indices.tolist())
    forwards = [f for f in rnd.forwards if f.mode == "draft_decode"]
    decode = [f.logits[b * cfg.topk:(b + 1) * cfg.topk] for f in forwards]
    inputs = [f.input_ids[b * cfg.topk:(b + 1) * cfg.topk] for f in forwards]
    path = [int(n) for n in rnd.accept_index[b, :len(committed)].tolist()]  # flat b*ndt + node
    draft = accept_decision_gap(step0, decode_rows=decode, decode_inputs=inputs, topk=cfg.topk,
                                ndt=cfg.ndt, committed=committed)
    if draft is None:
        draft = draft_choice_gap(step0, decode, cfg.topk, cfg.ndt)
    return min(draft, target_path_gap(rnd.verify_logits, path))


def check_same_acceptance(cfg: RunConfig, eng_a, outs_a, outs_b, what: str) -> int:
    """Per request: path A's and path B's (tokens, accept length) agree round by round, up to
    the first round decided at a near-tie on A (TIE_EPS); a difference anywhere earlier is a
    failure. Returns the number of comparisons ended at a benign tie."""
    eps, ties = TIE_EPS[eng_a.dtype], 0
    rounds = _rounds_by_rid(eng_a.recorder)
    for i, (a, b) in enumerate(zip(outs_a, outs_b)):
        if a.tokens[:1] != b.tokens[:1]:  # the prefill's token: the target's alone
            prompt = prompts_for(cfg, eng_a.cfg.vocab_size, str(eng_a.device))[i]
            if top2_margins(eng_a.target, prompt, a.tokens, eng_a.device)[0] < eps:
                ties += 1
                continue
            raise OracleFailure(NAME, NAME, f"request {i}: first token "
                                f"{a.tokens[0]} on A, {b.tokens[0]} on B ({what})")
        done = 1
        for k, (la, lb) in enumerate(zip(a.accept_lens, b.accept_lens)):
            end_a, end_b = done + la, done + lb
            if la != lb or a.tokens[done:end_a] != b.tokens[done:end_b]:
                gap = _round_tie_gap(eng_a.recorder, *rounds[a.rid][k], cfg)
                if gap < eps:
                    ties += 1
                    break
                raise OracleFailure(NAME, NAME, (
                    f"request {i} round {k}: accept length {la} on A, {lb} on B ({what}); "
                    f"A's accept lengths {a.accept_lens}, B's {b.accept_lens}; no choice of "
                    f"that round is within {eps:.0e} of a tie (smallest gap {gap:.3e})"))
            done = end_a
        else:
            if len(a.accept_lens) != len(b.accept_lens):
                raise OracleFailure(NAME, NAME, (
                    f"request {i}: {len(a.accept_lens)} rounds on A, {len(b.accept_lens)} on B "
                    f"({what}): {a.accept_lens} vs {b.accept_lens}"))
    return ties


def prop_acceptance_path_invariant(cfg: PathPair, device: str | None = None) -> None:
    """Law (acceptance_path_invariant): for greedy requests, each request's per-round accept
    lengths (and the tokens each round commits) are identical between path A (the drawn run:
    synchronous, its own graphs, prefix cache, page size and batch) and path B (the same
    requests with graphs on or off, overlap or sync, the prefix cache on or off, another page
    size, another batch: reversed, half of it joining later, each request alone; tensor
    parallel where drawn). Tie-aware: a request's comparison ends at the first round whose
    accept length is decided, on A, by a choice within TIE_EPS of a tie: a cut that put a
    node of the target's greedy continuation in the draft tree or kept the first missing one
    out, or the target's argmax along the accepted path (accept_decision_gap in
    harness/references/acceptance_ties.py; near-ties between candidates off that path
    decide nothing and excuse nothing); a difference before it fails."""
    device = device or default_device()
    a_cfg = dataclasses.replace(RunConfig(**{k: v for k, v in cfg.to_dict().items()
                                             if not k.startswith("b_")}), overlap=False)
    eng_a = build_engine(a_cfg, device)
    eng_a.recorder = TraceRecorder(cfg.page_size, keep_kv_slots=False)
    outs_a = run(a_cfg, eng_a)
    b_cfg = cfg.path_b()
    eng_b = build_engine(b_cfg, device, cache=cfg.b_prefix_cache)
    try:
        outs_b = _serve_b(a_cfg, eng_b, cfg.b_batch)
    finally:
        eng_b.close()
    what = (f"B: graphs={cfg.b_cuda_graph} overlap={cfg.b_overlap} prefix_cache="
            f"{cfg.b_prefix_cache} page_size={cfg.b_page_size} batch={cfg.b_batch} "
            f"tp={cfg.b_tp_size}")
    check_same_acceptance(a_cfg, eng_a, outs_a, outs_b, what)



def path_space(on_gpu: bool, fixed: dict):
    """The tiny model with drafters of every acceptance, or (pair=trained) the trained target
    with its EAGLE head and a standalone drafter; path B on one rank or (b_tp_size=2) tensor
    parallel, each its own entry: the TP entries need two GPUs on CUDA (skipped with one),
    and run over gloo on a CPU."""
    import os
    kw = dict(tp_sizes=(fixed.get("b_tp_size", 1),))
    if fixed.get("pair") == "trained":
        from harness.strategies.trained_pair import trained_pair
        pair = trained_pair(os.environ.get("SPECDEC_TRAINED_PAIR"))
        kw.update(model=pair.target, drafts=(pair.eagle, pair.draft_arg("standalone")))
    if on_gpu:
        return path_pairs(dtypes=("float32", "bfloat16"), max_batch=8,
                          max_prompt_len=40, max_new_tokens=24, **kw)
    if fixed.get("pair") == "trained":  # the trained pair on a CPU: small runs, no
        # shared-prefix workloads (their prompts come from greedy references of the larger model)
        return path_pairs(max_batch=3, max_prompt_len=12, max_new_tokens=10, max_ndt=8,
                          prefix=(False,), **kw)
    return path_pairs(max_batch=4, max_prompt_len=16, max_new_tokens=12, max_ndt=8, **kw)


LAW = Law(
    name="acceptance_path_invariant", rank=200, prop=prop_acceptance_path_invariant,
    config=PathPair, strategy=path_space,
    summary="per-round accept lengths are the same on every path (batching, graphs, overlap, "
            "pages, prefix cache, TP), ties aside",
    # Each example runs two paths. Path B on one rank and on two are entries of their own:
    # the TP ones wait for the GPU locks (harness/gate/xdist_gpu.py), the others never.
    # Split, each draws as many examples as the whole did, and the TP ones half of that: as
    # many TP paths as when tp_size was drawn in (1, 2).
    slices=(Slice((("pair", "tiny"), ("b_tp_size", 1)), 2),
            Slice((("pair", "tiny"), ("b_tp_size", 2)), 4),
            Slice((("pair", "trained"), ("b_tp_size", 1)), 5),
            Slice((("pair", "trained"), ("b_tp_size", 2)), 10)),
    controls=("tests/test_acceptance_laws.py::"
              "test_path_invariant_rejects_a_path_that_drafts_differently",))

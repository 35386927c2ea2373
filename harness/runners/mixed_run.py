"""A long mixed run (`python -m harness mixed`): N requests with random arrival steps, prompt
lengths, max_new_tokens, stop tokens and abort times, all from one seed, through one engine
with a small KV pool (so requests are retracted and resumed). Checked: every completed
request's output equals an independent greedy run of that request alone (ties as oracle 6),
an aborted request's partial output is a prefix of it, the allocator accounting holds after
every step, and no page or request row is left at the end. Reports throughput. With the prefix
cache, prompts are a few shared system prompts plus a short user part; the hit rate is
reported, and after a final flush every page must be free. With `tp_size` > 1 the engine is
sharded (the references stay on one rank) and the accounting is checked on every rank after
every step (the engine's own cross-rank check compares every rank's state with rank 0's)."""
from __future__ import annotations

import random
import time
from dataclasses import dataclass

import torch

from harness.strategies.lifecycle_config import truncate_at_stop
from harness.base.failure import OracleFailure
from harness.references.dense import top2_margins
from harness.references.ties import compare_greedy
from specdec import Engine, SpecConfig
from specdec.sampling_params import SamplingParams
from specdec.validate import reserve_margin

NAME = "mixed_run"  # the law whose checks this module raises (OracleFailure)

# Pages of 4 tokens: requests end mid-page and share pages across rounds, which a page of one
# never shows (the engine's own default is one: specdec/defaults.py).
PAGE_SIZE = 4


@dataclass
class Planned:
    arrival: int                  # the step before which it is added
    prompt: list[int]
    max_new_tokens: int
    stop_at: int | None           # stop token = the reference's token at this index
    abort_at: int | None          # the step before which it is aborted (if still live)


@dataclass
class MixedReport:
    requests: int = 0
    completed: int = 0
    aborted: int = 0
    steps: int = 0
    retractions: int = 0
    generated: int = 0            # tokens returned to callers (completed and aborted)
    seconds: float = 0.0          # the engine loop only, not the references or checks
    ties: int = 0
    mean_acceptance_length: float = 0.0
    prefix_hit_tokens: int = -1   # -1: no prefix cache
    prefill_tokens: int = 0

    def __str__(self) -> str:
        rate = self.generated / self.seconds if self.seconds else 0.0
        return (f"{self.requests} requests ({self.completed} completed, {self.aborted} aborted) "
                f"in {self.steps} steps, {self.retractions} retractions, {self.generated} tokens "
                f"in {self.seconds:.2f}s = {rate:.1f} tokens/s, mean acceptance length "
                f"{self.mean_acceptance_length:.3f}, {self.ties} benign ties" + self._hits())

    def _hits(self) -> str:
        if self.prefix_hit_tokens < 0:
            return ""
        total = self.prefix_hit_tokens + self.prefill_tokens
        return (f", prefix cache hit rate {self.prefix_hit_tokens / max(total, 1):.1%} "
                f"({self.prefix_hit_tokens} of {total} prefill positions reused), no page leaked")


def plan(n: int, *, seed: int, vocab: int, max_prompt_len: int, max_new_tokens: int,
         system_prompts: int = 0) -> list[Planned]:
    """`system_prompts` > 0: each prompt is one of that many shared system prompts (3/4 of
    max_prompt_len, cut at a drawn length) followed by a short user part."""
    rng, step, out = random.Random(seed), 0, []
    sys_len = max(1, 3 * max_prompt_len // 4)
    systems = [[rng.randrange(vocab) for _ in range(sys_len)] for _ in range(system_prompts)]
    for _ in range(n):
        step += rng.choice((0, 0, 1, 1, 2, 4))  # bursts and gaps
        new = rng.randint(1, max_new_tokens)
        if systems:
            head = rng.choice(systems)[:rng.choice((sys_len, sys_len, rng.randint(1, sys_len)))]
            user = rng.randint(1, max(1, max_prompt_len - len(head)))
            prompt = head + [rng.randrange(vocab) for _ in range(user)]
        else:
            prompt = [rng.randrange(vocab) for _ in range(rng.randint(1, max_prompt_len))]
        out.append(Planned(step, prompt,
                           new, rng.randrange(new) if rng.random() < 0.3 else None,
                           step + rng.randint(0, 8) if rng.random() < 0.1 else None))
    return out


def _accounting(engine, live_none: bool = False) -> None:
    """On every rank (module level: pickled to the workers)."""
    engine.check_accounting([] if live_none else None)
    if live_none and len(engine.memory.req_pool._free_rows) != engine.max_batch:
        rank = engine.tp_group.rank if engine.tp_group is not None else 0
        raise OracleFailure(NAME, NAME, f"tp rank {rank}: a request row was not returned")


def references(model: str, engine: Engine, planned: list[Planned], dtype: str):
    """Each request alone, plain greedy (spec=None, same weights): (tokens, top-2 margins)."""
    ref = Engine(model=model, spec=None, device=str(engine.device), dtype=dtype,
                 seed=engine.seed, max_batch=1, max_context=engine.max_context)
    outs = []
    for p in planned:
        toks = ref.generate([p.prompt], max_new_tokens=p.max_new_tokens)[0]
        outs.append((toks, top2_margins(ref.target, p.prompt, toks, ref.device)))
    return outs


def mixed_run(n_requests: int = 200, *, seed: int = 0, device: str = "cpu", model: str = "tiny",
              spec: SpecConfig | None = None, draft: str = "eagle", page_size: int = PAGE_SIZE,
              max_batch: int = 16, pool_requests: float = 3.0, max_prompt_len: int = 32,
              max_new_tokens: int = 32, cuda_graph: bool = False,
              dtype: str = "float32", overlap: bool = False, prefix_cache: bool = False,
              system_prompts: int = 4, tp_size: int = 1) -> MixedReport:
    """The pool holds `pool_requests` largest requests' worst cases: fewer than max_batch.
    prefix_cache: the radix cache on, prompts from `system_prompts` shared system prompts.
    tp_size: ranks the engine is sharded over (specdec/tp/)."""
    spec = spec or SpecConfig(topk=2, num_steps=3, num_draft_tokens=6)
    context = max_prompt_len + max_new_tokens + reserve_margin(spec, page_size, overlap)
    worst = -(-context // page_size)  # pages of the largest request, worst case
    eng = Engine(model=model, spec=spec, draft=draft, page_size=page_size, device=device,
                 dtype=dtype, seed=seed % 1000, max_batch=max_batch, cuda_graph=cuda_graph,
                 max_context=context, num_pages=1 + int(pool_requests * worst), overlap=overlap,
                 prefix_cache=prefix_cache, tp_size=tp_size)
    with eng:  # a tensor-parallel engine frees its workers at the end, or on a failure
        return _run(eng, n_requests=n_requests, seed=seed, model=model, dtype=dtype,
                    max_prompt_len=max_prompt_len, max_new_tokens=max_new_tokens,
                    prefix_cache=prefix_cache, system_prompts=system_prompts)


def _run(eng: Engine, *, n_requests: int, seed: int, model: str, dtype: str, max_prompt_len: int,
         max_new_tokens: int, prefix_cache: bool, system_prompts: int) -> MixedReport:
    planned = plan(n_requests, seed=seed, vocab=eng.cfg.vocab_size, max_prompt_len=max_prompt_len,
                   max_new_tokens=max_new_tokens,
                   system_prompts=system_prompts if prefix_cache else 0)
    refs = references(model, eng, planned, dtype)
    stops = [() if p.stop_at is None else (refs[i][0][p.stop_at],) for i, p in enumerate(planned)]

    report, rid_of, outs = MixedReport(requests=n_requests), {}, {}
    pending = sorted(range(n_requests), key=lambda i: planned[i].arrival)
    step, busy = 0, 0.0
    while pending or eng.has_unfinished():
        t0 = time.perf_counter()
        while pending and planned[pending[0]].arrival <= step:
            i = pending.pop(0)
            p = planned[i]
            rid_of[eng.add_request(p.prompt, p.max_new_tokens,
                                   SamplingParams(stop_token_ids=stops[i]))] = i
        for rid, i in rid_of.items():
            if planned[i].abort_at == step and rid in eng.scheduler.live:
                outs[i] = eng.abort(rid)
        for o in eng.step():
            outs[rid_of[o.rid]] = o
        if eng.device.type == "cuda":
            torch.cuda.synchronize()
        busy += time.perf_counter() - t0
        eng.tp_each(_accounting)  # every rank's accounting (one rank: this engine's)
        step += 1
    report.steps, report.seconds = step, busy
    report.retractions = eng.scheduler.retractions
    report.mean_acceptance_length = eng.stats.mean_acceptance_length

    for i, o in sorted(outs.items()):
        toks, margins = refs[i]
        want = truncate_at_stop(toks, stops[i])
        if o.finish_reason == "abort":
            report.aborted += 1
            want = want[:len(o.tokens)]  # a prefix of the full output
        else:
            report.completed += 1
        ok, what = compare_greedy(o.tokens, want, margins, eng.dtype)
        if not ok:
            raise OracleFailure(NAME, NAME, f"request {i} (rid {o.rid}, {o.finish_reason}): {what}")
        report.ties += what != "identical"
        report.generated += len(o.tokens)
    if len(outs) != n_requests:
        raise OracleFailure(NAME, NAME, f"{n_requests - len(outs)} requests never finished")
    if prefix_cache:
        report.prefix_hit_tokens = eng.stats.prefix_hit_tokens
        report.prefill_tokens = eng.stats.prefill_tokens
        eng.flush_prefix_cache()  # the tree gives back everything: nothing may stay owned
        free = eng.memory.allocator
        if free.num_free != free.num_pages - 1:
            raise OracleFailure(NAME, NAME, f"{free.num_pages - 1 - free.num_free} pages "
                                "still held after the last request and a flush")
    eng.tp_each(_accounting, True)  # no page owned, no row held, on any rank, at the end
    return report

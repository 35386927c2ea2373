"""Shared-prefix workloads for the prefix cache (contract section 11): prompts drawn from a
seed that repeat, extend or continue earlier ones, or diverge from them at, one before or
one after a page boundary; served in waves, because a cached prefix is only reused once the
request that computed it has finished (or was retracted). Requests of one wave run
concurrently; a small pool (RunConfig.pool_slack) makes them evict and retract."""
from __future__ import annotations

import random
from dataclasses import dataclass

from harness.base.liveness import Progress
from harness.strategies.runs import greedy_baseline, new_token_counts

KINDS = ("identical", "extend", "at_page", "before_page", "after_page", "continue", "continue",
         "fresh")  # a multi-turn chat (continue) is the commonest reuse


@dataclass(frozen=True)
class Planned:
    wave: int
    kind: str
    src: int          # the earlier request it shares with (-1: none)
    cut: int          # shared length (at/before/after_page), tail length (extend/continue)
    seed: int         # its own tokens
    more: int = 0     # continue: output tokens past the source's visible output (a round
                      # may commit more than max_new_tokens; those positions are cached too)


def plan(seed: int, n: int, page_size: int) -> list[Planned]:
    rng = random.Random(seed ^ 0x9F1C)
    out, wave = [Planned(0, "fresh", -1, 0, rng.randrange(2**31))], 0
    for i in range(1, n):
        wave += rng.random() < 0.6  # mostly a new wave: the source has finished by then
        kind = rng.choice(KINDS)
        earlier = [j for j in range(i) if out[j].wave < wave]  # finished by now: cached
        src = rng.choice(earlier) if earlier and rng.random() < 0.8 else rng.randrange(i)
        pages = rng.randint(1, 3)
        cut = {"at_page": pages * page_size, "before_page": pages * page_size - 1,
               "after_page": pages * page_size + 1}.get(kind, rng.randint(1, 4))
        out.append(Planned(wave, kind, src, cut, rng.randrange(2**31), rng.randint(0, 3)))
    return out


def prompt_cap(max_prompt_len: int, max_new_tokens: int) -> int:
    """The longest prompt a shared-prefix workload draws: a continuation holds its source's
    prompt, its output and a few tokens more."""
    return 2 * max_prompt_len + max_new_tokens


def build_prompts(planned: list[Planned], *, vocab: int, base_max: int, min_len: int, cap: int,
                  outputs) -> list[list[int]]:
    """Prompts in order: fresh ones of min_len..base_max tokens, derived ones up to `cap`;
    `outputs(i, prompt, more)` gives request i's greedy output and `more` tokens past it
    (continuations extend their source's prompt and output: a multi-turn chat)."""
    prompts: list[list[int]] = []
    for i, p in enumerate(planned):
        rng = random.Random(p.seed)
        fresh = [rng.randrange(vocab) for _ in range(max(base_max, 4))]
        if p.kind == "fresh" or p.src < 0:
            prompt = fresh[:rng.randint(min_len, base_max)]
        else:
            src = prompts[p.src]
            if p.kind == "identical":
                prompt = list(src)
            elif p.kind == "extend":
                prompt = src + fresh[:p.cut]
            elif p.kind == "continue":
                prompt = src + list(outputs(p.src, src, p.more)) + fresh[:p.cut]
            else:  # diverge at a page boundary, one before or one after
                head = src[:p.cut]
                nxt = src[p.cut] if p.cut < len(src) else -1
                tail = [t for t in fresh if t != nxt][:rng.randint(1, 4)]
                prompt = head + tail
        prompts.append(prompt[:cap] or fresh[:1])
    return prompts


def shared_prompts(cfg, vocab: int, device: str) -> list[list[int]]:
    """The drawn RunConfig's prompts with shared prefixes; continuations use the plain greedy
    output of their source (what a correct engine returns, ties aside)."""
    counts = new_token_counts(cfg.seed, cfg.batch_size, cfg.max_new_tokens, cfg.ragged)

    def outputs(i, prompt, more):
        outs, _ = greedy_baseline(cfg.model, prompts=[prompt], max_new_tokens=cfg.max_new_tokens,
                                  device=device, dtype=cfg.dtype,
                                  seed=cfg.seed % 1000)
        return outs[0][:counts[i] + more]
    return build_prompts(plan(cfg.seed, cfg.batch_size, cfg.page_size), vocab=vocab,
                         base_max=cfg.max_prompt_len, min_len=cfg.min_prompt_len,
                         cap=prompt_cap(cfg.max_prompt_len, cfg.max_new_tokens), outputs=outputs)


def waves_of(cfg) -> list[int]:
    return [p.wave for p in plan(cfg.seed, cfg.batch_size, cfg.page_size)]


def serve_waves(engine, *, prompts, max_new, params, waves, on_step=None) -> list:
    """Each wave through add_request / step once the previous one has finished; returns the
    RequestOutputs in prompt order. `on_step(engine)` runs after every step."""
    outs = [None] * len(prompts)
    for w in sorted(set(waves)):
        idx = [i for i, x in enumerate(waves) if x == w]
        progress = Progress(engine)  # law liveness
        rids = {progress.add(engine.add_request(prompts[i], max_new[i], params[i])): i
                for i in idx}
        while engine.has_unfinished():
            progress.step()
            if on_step is not None:
                on_step(engine)
        for rid, i in rids.items():
            outs[i] = engine.output(rid)
    return outs

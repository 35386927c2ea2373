"""The ids where a vocabulary sharded over N ranks changes hands, and drawn inputs that hold
them: a vocab-parallel embedding or LM head that is off by one at a shard's edge is wrong
only there, and uniformly drawn prompts rarely touch those ids (4 of 320 for tp 2).

The shards are specdec/tp/comm.py's: ceil(V/N) rows each, the last one shorter when N does
not divide V (the tiny-odd model: 321 = 161 + 160). Written out here from that rule, not
imported: a reference that asks the code under test where its seams are checks nothing."""
from __future__ import annotations

import random

from hypothesis import strategies as st

from specdec.config import BIAS_SEP, model_config


def vocab_seams(vocab: int, ranks: int) -> list[int]:
    """0, V - 1, and the first and last id of every rank's shard."""
    per = -(-vocab // ranks)
    ids = {0, vocab - 1}
    for r in range(ranks):
        first, last = r * per, min(vocab, (r + 1) * per) - 1
        if first <= last:
            ids.update((first, last))
    return sorted(ids)


def with_seams(prompts: list[list[int]], seams: list[int], seed: int) -> list[list[int]]:
    """Prompt b starts with seam b mod len(seams), and about half of the other positions hold
    a seam id drawn from the seed: every seam is in a batch of len(seams) prompts."""
    rng = random.Random(seed ^ 0x5EA3)
    out = []
    for b, prompt in enumerate(prompts):
        p = [seams[b % len(seams)]] + list(prompt[1:])
        for j in range(1, len(p)):
            if rng.random() < 0.5:
                p[j] = rng.choice(seams)
        out.append(p)
    return out


def seam_stops(batch_size: int, seams: list[int]) -> list[tuple[int, ...]]:
    """Request i stops at seam i mod len(seams) and the next one, should it emit either."""
    return [(seams[i % len(seams)], seams[(i + 1) % len(seams)]) for i in range(batch_size)]


SEAM_RANKS = (2, 4)       # the seams of these shardings are the ids a bias may favour
BIAS_VALUES = (5.0, 8.0, 11.0)  # on the tiny models: from a tenth of the outputs to most


def biased_name(model: str, bias: dict[int, float]) -> str:
    """The engine's name for `model` with a logit bias (specdec.config.model_config)."""
    if not bias:
        return model
    return model + BIAS_SEP + ",".join(f"{t}={v:g}" for t, v in sorted(bias.items()))


def seam_corner(model: str) -> tuple:
    """("seam_ids",) for a model biased toward seams (a corner `harness check` counts)."""
    return ("seam_ids",) if BIAS_SEP in model else ()


def seam_models(model: str):
    """`model` as it is, or (about one draw in three) with a logit bias toward a drawn
    non-empty subset of its seams (vocab_seams over SEAM_RANKS), each at a drawn strength.
    The bias sits in the LM head, so the target and every drafter that shares or copies it
    (eagle, self, perturbed) emit seam ids: first tokens, drafts accepted and rejected, bonus
    tokens. An engine that gives an id a second meaning (a sentinel, 'no token', -1 padding
    compared with > 0, a shard's edge) fails only when that id is generated."""
    vocab = model_config(model).vocab_size
    seams = sorted({s for r in SEAM_RANKS for s in vocab_seams(vocab, r)})
    biased = st.dictionaries(st.sampled_from(seams), st.sampled_from(BIAS_VALUES),
                             min_size=1, max_size=len(seams)).map(
        lambda bias: biased_name(model, bias))
    return st.one_of(st.just(model), st.just(model), biased)

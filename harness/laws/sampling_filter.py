"""Law sampling_filter: the engine's sampling filter is the reference filter, cut boundaries
included.

specdec.sampler.filtered_probs turns logits into what the target's acceptance rule and the
probabilistic drafter sample from: softmax(logits / T), top-k (ties with the k-th logit
stay), then top-p (a token stays while the mass strictly before it, by descending
probability, is below top_p), renormalised. The reference is harness/laws/distribution.py's
float64 filter, written independently of specdec/sampler.py.

Two kinds of rows, each batched with per-row knobs as the engine batches requests:
- exact rows: n = 2^a live tokens at one logit (plus a random offset), the rest at a logit
  whose probability is exactly 0 in float32. Every probability is exactly 1/n, so top_p = j/n
  falls exactly on a boundary and top_k < n cuts inside a tie: the number of tokens kept, and
  their probabilities, must equal the reference's exactly (which of the tied tokens a cut
  keeps is the sort's choice: the law asks only that they are live tokens);
- random rows (normal logits): no token kept that the reference cuts, none cut that it keeps
  with probability above 1e-5 (below, float32 may underflow), every probability within 1e-5,
  except in a row whose cut is ambiguous in float32 (a top-p boundary or a k-th-logit tie
  within 1e-4), where only the kept tokens' liveness is checked.
Both with the cut flags a captured graph passes (both True) and those an eager batch
computes (a cut only where some row asks for it).

Observables: filtered_probs' output rows. Strategy: sampling_filter_cases, here.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from hypothesis import strategies as st

from harness.laws.common import OracleFailure
from harness.laws.distribution import filtered_probs as reference_filter
from harness.strategies.configs import TEMPERATURES
from specdec import sampler

DEAD = -1e4      # exp(DEAD / T) underflows to exactly 0 in float32 for every drawn T
TOL = 1e-5       # random rows: float32 softmax against the float64 reference
AMBIGUOUS = 1e-4  # random rows: a cut this close to a boundary may fall either way


@dataclass(frozen=True)
class SamplingFilterCase:
    kind: str      # "exact" or "random"
    vocab: int
    rows: int
    seed: int      # per-row live counts, offsets, knobs and logits come from it

    def to_dict(self) -> dict:
        return asdict(self)


def sampling_filter_cases():
    return st.builds(SamplingFilterCase, st.sampled_from(["exact", "random"]),
                     st.sampled_from([1, 2, 3, 8, 33, 100]), st.integers(1, 6),
                     st.integers(0, 2**31 - 1))


def _shift(gen: np.random.Generator) -> float:
    """A common offset of a row's logits: small, or as large as a real model's logits get,
    where exp(logit / T) overflows float32 (e^88) unless the filter subtracts the max."""
    if gen.random() < 0.5:
        return float(gen.integers(-8, 9))
    return float(gen.choice([-300.0, -40.0, 40.0, 300.0]))


def _row(case: SamplingFilterCase, gen: np.random.Generator):
    """(logits, temperature, top_k, top_p) of one row."""
    v = case.vocab
    t = float(gen.choice(TEMPERATURES))
    if case.kind == "exact":
        n = 2 ** int(gen.integers(0, int(np.log2(v)) + 1))  # live tokens, <= vocab
        logits = np.full(v, DEAD, dtype=np.float32)
        logits[gen.choice(v, n, replace=False)] = 0.0
        logits += np.float32(_shift(gen))  # the max subtraction must cancel it
        top_k = int(gen.choice([0, int(gen.integers(1, n + 1)), n + int(gen.integers(0, 3))]))
        top_p = float(gen.choice([1.0, int(gen.integers(1, n + 1)) / n]))
    else:
        logits = (gen.standard_normal(v) * gen.choice([0.5, 2.0, 6.0])
                  + _shift(gen)).astype(np.float32)
        top_k = int(gen.choice([0, 1, int(gen.integers(1, v + 1)), v + 1]))
        top_p = float(gen.choice([1.0, 0.3, 0.95, round(float(gen.uniform(0.05, 1.0)), 3)]))
    return logits, t, top_k, top_p


def _reference(logits: np.ndarray, t: float, top_k: int, top_p: float) -> np.ndarray:
    """The float64 reference; top_k past the vocabulary keeps everything, as 0 does."""
    return reference_filter(torch.from_numpy(logits), t, top_k if top_k <= len(logits) else 0,
                            top_p)


def _ambiguous(logits: np.ndarray, t: float, top_k: int, top_p: float) -> bool:
    """Whether a float32 filter may cut this row differently from float64."""
    x = np.sort(logits.astype(np.float64) / t)[::-1]
    if 0 < top_k < len(x) and x[top_k - 1] - x[top_k] < AMBIGUOUS:
        return True
    if top_p < 1.0:
        p = np.sort(_reference(logits, t, top_k, 1.0))[::-1]
        return bool(np.any(np.abs(np.cumsum(p) - p - top_p) < AMBIGUOUS))
    return False


def _check_row(case, b: int, got: np.ndarray, logits: np.ndarray, t: float, top_k: int,
               top_p: float, flags) -> None:
    what = f"row {b} (T={t}, top_k={top_k}, top_p={top_p}, cut flags {flags})"
    want = _reference(logits, t, top_k, top_p)
    live = logits > DEAD / 2 + 16  # the exact rows' dead tokens sit at DEAD + offset
    kept, ref_kept = np.flatnonzero(got > 0), np.flatnonzero(want > 0)
    if not np.all(live[kept]):
        raise OracleFailure("sampling_filter", f"{what}: kept tokens "
                                               f"{kept[~live[kept]].tolist()} of probability 0")
    if case.kind == "exact":
        if len(kept) != len(ref_kept) or not np.allclose(got[kept], 1.0 / len(ref_kept),
                                                          rtol=0, atol=1e-7):
            raise OracleFailure("sampling_filter", f"{what}: kept {len(kept)} tokens at "
                                f"{sorted(set(np.round(got[kept], 6).tolist()))}, the reference "
                                f"{len(ref_kept)} at {1.0 / len(ref_kept)}")
        return
    if _ambiguous(logits, t, top_k, top_p):
        return
    # Kept where the reference cuts, or cut where the reference keeps a probability beyond
    # float32 underflow: a wrong cut. Any probability off by more than TOL: a wrong value.
    wrong = np.flatnonzero((got > 0) & (want == 0) | (got == 0) & (want > TOL))
    if wrong.size or np.abs(got - want).max() > TOL:
        raise OracleFailure("sampling_filter", f"{what}: kept {kept.tolist()[:12]}, the "
                            f"reference {ref_kept.tolist()[:12]} (tokens cut differently: "
                            f"{wrong.tolist()[:8]}); max |diff| {np.abs(got - want).max():.2e}")


def prop_sampling_filter(case: SamplingFilterCase, device: str) -> None:
    """Law: for every row, the engine's filtered distribution equals the float64 reference:
    on exact rows (cuts on a boundary or inside a tie) the same number of tokens kept, all
    live, each with probability exactly 1/kept; on random rows, probabilities within 1e-5
    where the cut is unambiguous in float32. Both with the flags a graph passes and those
    an eager batch computes."""
    gen = np.random.default_rng(case.seed)
    rows = [_row(case, gen) for _ in range(case.rows)]
    logits = torch.from_numpy(np.stack([r[0] for r in rows]))[:, None, :].to(device)
    temp, top_k, top_p = (torch.tensor([r[i] for r in rows], dtype=dt, device=device)
                          for i, dt in ((1, torch.float32), (2, torch.int64), (3, torch.float32)))
    eager_flags = (any(r[2] > 0 for r in rows), any(r[3] < 1.0 for r in rows))
    for flags in sorted({(True, True), eager_flags}):
        got = sampler.filtered_probs(logits, temp, top_k, top_p, *flags)[:, 0].double().cpu()
        for b, (lg, t, k, p) in enumerate(rows):
            _check_row(case, b, got[b].numpy(), lg, t, k, p, flags)

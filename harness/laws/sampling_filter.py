"""Law sampling_filter: the engine's sampling filter is the reference filter, cut boundaries
included, and a filter that is off changes nothing.

specdec.sampler.filtered_probs turns logits into what the target's acceptance rule and the
probabilistic drafter sample from: softmax(logits / T), top-k (ties with the k-th logit
stay), then top-p (a token stays while the mass strictly before it, by descending
probability, is below top_p), renormalised. The reference is harness/laws/distribution.py's
float64 filter, written independently of specdec/sampler.py.

Three kinds of rows, each batched with per-row knobs as the engine batches requests:
- exact rows: n = 2^a live tokens at one logit (plus a random offset), the rest at a logit
  whose probability is exactly 0 in float32. Every probability is exactly 1/n, so top_p = j/n
  falls exactly on a boundary and top_k < n cuts inside a tie: the number of tokens kept, and
  their probabilities, must equal the reference's exactly (which of the tied tokens a cut
  keeps is the sort's choice: the law asks only that they are live tokens);
- random rows (normal logits): no token kept that the reference cuts, none cut that it keeps
  with probability above 1e-5 (below, float32 may underflow), every probability within 1e-5,
  except in a row whose cut is ambiguous in float32 (a top-p boundary within 1e-4 of some
  token's mass before it, or a k-th-logit near-tie: two distinct logits / T within 1e-4 at
  the k-th), where only the kept tokens' liveness and the support check below are checked;
- tail rows (V in TAIL_VOCABS, up to 50257; one to three rows): a few head tokens and a long
  flat tail of tiny probabilities (each tail x = logit / T sits ln V + 2..15 below the head's
  max, so the tail holds about e^-2..e^-15 of the mass and every tail token is above 1e-13,
  far above float32 underflow), in a few exactly tied levels or spread continuously; top_p in
  {1, 0.9999, 0.99999, 0.999999, ordinary cuts}, top_k in {0, V, V + 1, a cut}; checked as
  random rows are. Float rounding of a cumulative sum cuts such tails at top_p = 1 or just
  below by a probability error far under any tolerance, yet whole tokens become impossible:
  the two checks below catch it.
On random and tail rows the engine's row is compared as a distribution, divided by its own
float64 total (draw_from samples cdf / total): float32 softmax over a long flat tail misses up
to ~1e-4 of its own sum (torch.softmax itself: 1.4e-4 at V = 65536), a common factor beyond
1e-5 that the row's total, bounded by the float32 sum's error bound V * 2^-24, absorbs. Tied
tokens (equal logits) are interchangeable there too: each class's values are compared sorted.
Two checks on every row of every kind, on top of those above:
- support, exact, no tolerance: the tokens of positive filtered probability are the
  reference's, counted per class of tied tokens (equal logits; which members of a class a cut
  at a tie keeps is the sort's choice, as on exact rows). A token must be kept when the
  reference keeps it, its float64 probability after top-k (before top-p's renormalisation,
  which only raises it) exceeds UNDERFLOW = 1e-37 (8.5x float32's smallest normal 1.18e-38:
  exp(x - max) and the softmax quotient are then normal float32 numbers, never flushed or
  underflowed to 0; below it a kept token may legitimately be 0), and, when top_p < 1, the
  reference's mass before it is below top_p - CUT_SLACK. A token must be cut when the
  reference cuts it and, when top_p < 1, its mass before is at least top_p + CUT_SLACK or
  top-k cut it. Only tokens whose mass before is within CUT_SLACK = 1e-5 of top_p may go
  either way: more than the float32 filter's error in that mass (float32 rounding of
  x = (logit - max) / T costs ~1.8e-7 |x| relative per probability, and sum p |x| <= ln V
  < 12; a common factor, the float32 softmax's error in its own sum, cancels when the mass is
  compared with top_p times the row's total). Rows with a k-th-logit near-tie (above) are
  excused, the top-k set itself being ambiguous there; a row with every filter off never is.
- filters off, bit for bit: a row with top_k 0 or >= V and top_p 1 is exactly (torch.equal)
  torch.softmax((logits.float() - rowmax) / T), the engine's arithmetic, written here.
All with the cut flags a captured graph passes (both True) and those an eager batch
computes (a cut only where some row asks for it).

Observables: filtered_probs' output rows. Strategy: sampling_filter_cases, here.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from hypothesis import strategies as st

from harness.base.failure import OracleFailure
from harness.laws.distribution import filtered_probs as reference_filter
from harness.strategies.configs import TEMPERATURES
from specdec import sampler
from harness.laws.declaration import Law
from harness.strategies.tiers import fixed_strategy

NAME = "sampling_filter"  # the law whose checks this module raises (OracleFailure)

DEAD = -1e4      # exp(DEAD / T) underflows to exactly 0 in float32 for every drawn T
TOL = 1e-5       # random and tail rows: float32 softmax against the float64 reference
AMBIGUOUS = 1e-4  # random and tail rows: a cut this close to a boundary may fall either way
CUT_SLACK = 1e-5  # support: a token whose mass before is this close to top_p may go either way
UNDERFLOW = 1e-37  # support: a kept token above this (after top-k) is never 0 in float32
SMALL_VOCABS = (1, 2, 3, 8, 33, 100)     # exact and random rows
TAIL_VOCABS = (1000, 4096, 32000, 50257)  # tail rows
TAIL_TOP_PS = (1.0, 0.9999, 0.99999, 0.999999, 0.95)


@dataclass(frozen=True)
class SamplingFilterCase:
    kind: str      # "exact", "random" or "tail"
    vocab: int
    rows: int
    seed: int      # per-row live counts, offsets, knobs and logits come from it

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def corners(self) -> tuple:
        """Counted by `harness check`: rows with long flat tails."""
        return ("tail_rows",) if self.kind == "tail" else ()


def sampling_filter_cases():
    """Exact and random rows over small vocabularies, tail rows over large ones (fewer rows:
    each case stays well under 0.5 s on a CPU)."""
    seeds = st.integers(0, 2**31 - 1)
    return st.one_of(
        st.builds(SamplingFilterCase, st.sampled_from(["exact", "random"]),
                  st.sampled_from(SMALL_VOCABS), st.integers(1, 6), seeds),
        st.builds(SamplingFilterCase, st.just("tail"), st.sampled_from(TAIL_VOCABS),
                  st.integers(1, 3), seeds))


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
    elif case.kind == "random":
        logits = (gen.standard_normal(v) * gen.choice([0.5, 2.0, 6.0])
                  + _shift(gen)).astype(np.float32)
        top_k = int(gen.choice([0, 1, int(gen.integers(1, v + 1)), v + 1]))
        top_p = float(gen.choice([1.0, 0.3, 0.95, round(float(gen.uniform(0.05, 1.0)), 3)]))
    else:  # tail: drawn in x = logit / T, so that T does not move the tail's mass
        h = int(gen.integers(1, 9))
        head = gen.standard_normal(h) * gen.choice([0.5, 2.0])
        base = head.max() - np.log(v) - gen.uniform(2.0, 12.0)
        if gen.random() < 0.5:  # a few exactly tied levels
            levels = gen.uniform(0.1, 1.0) * gen.integers(0, int(gen.integers(1, 5)), v - h)
        else:  # spread: distinct, some nearly tied
            levels = gen.uniform(0.0, 1.0, v - h)
        x = gen.permutation(np.concatenate([head, base - levels]))
        logits = (x * t + _shift(gen)).astype(np.float32)
        top_k = int(gen.choice([0, v, v + 1, int(gen.integers(1, v + 1))]))
        top_p = float(gen.choice(TAIL_TOP_PS + (1.0, round(float(gen.uniform(0.5, 1.0)), 3))))
    return logits, t, top_k, top_p


def _reference(logits: np.ndarray, t: float, top_k: int, top_p: float) -> np.ndarray:
    """The float64 reference; top_k past the vocabulary keeps everything, as 0 does."""
    return reference_filter(torch.from_numpy(logits), t, top_k if top_k <= len(logits) else 0,
                            top_p)


@dataclass
class _Expected:
    """What the reference says of one row, computed once for both flag sets."""
    want: np.ndarray     # the reference filter's output
    q: np.ndarray        # after top-k, before top-p
    before: np.ndarray   # q's mass strictly before each token, by descending q (stable)
    cls: np.ndarray      # class of tied tokens (equal logits) of each token
    topk_ambiguous: bool
    ambiguous: bool      # the k-th logit's or the top-p boundary's cut may go either way


def _topk_ambiguous(logits: np.ndarray, t: float, top_k: int) -> bool:
    """Whether two distinct logits / T lie within AMBIGUOUS at the k-th (an exact tie is kept
    whole by both filters: equal float32 logits stay equal in either arithmetic)."""
    if not 0 < top_k < len(logits):
        return False
    x = np.partition(logits.astype(np.float64) / t, (-top_k - 1, -top_k))
    return bool(0 < x[-top_k] - x[-top_k - 1] < AMBIGUOUS)


def _expected(logits: np.ndarray, t: float, top_k: int, top_p: float) -> _Expected:
    """A float32 filter may cut a row differently from float64 where it is ambiguous: a
    near-tie at the k-th, or a top-p boundary within AMBIGUOUS of some token's mass before
    it (never when every filter is off)."""
    q = _reference(logits, t, top_k, 1.0)
    order = np.argsort(-q, kind="stable")
    before = np.empty_like(q)
    before[order] = np.cumsum(q[order]) - q[order]
    want = _reference(logits, t, top_k, top_p) if top_p < 1.0 else q
    topk_amb = _topk_ambiguous(logits, t, top_k)
    amb = topk_amb or (top_p < 1.0 and bool(np.any(np.abs(before - top_p) < AMBIGUOUS)))
    return _Expected(want, q, before, np.unique(logits, return_inverse=True)[1].reshape(-1),
                     topk_amb, amb)


def _ambiguous(logits: np.ndarray, t: float, top_k: int, top_p: float) -> bool:
    """Whether a float32 filter may cut this row differently from float64."""
    return _expected(logits, t, top_k, top_p).ambiguous


def _check_support(what: str, got: np.ndarray, e: _Expected, top_p: float) -> None:
    """The support check (module docstring): per class of tied tokens, the engine keeps at
    least the tokens that must be kept and at most those that may be."""
    must, may = e.q > UNDERFLOW, e.q > 0
    if top_p < 1.0:
        must &= e.before < top_p - CUT_SLACK
        may &= e.before < top_p + CUT_SLACK
    n_must, n_may, n_got = (np.bincount(e.cls, m.astype(np.int64), minlength=e.cls.max() + 1)
                            for m in (must, may, got > 0))
    bad = np.flatnonzero((n_got < n_must) | (n_got > n_may))
    if not bad.size:
        return
    lost = np.flatnonzero(np.isin(e.cls, bad[n_got[bad] < n_must[bad]]) & must & (got == 0))
    extra = np.flatnonzero(np.isin(e.cls, bad[n_got[bad] > n_may[bad]]) & ~may & (got > 0))

    def show(tokens):
        return ", ".join(f"{i} (p={e.q[i]:.2e}, mass before {e.before[i]:.7f})"
                         for i in tokens[:3]) or "none"
    raise OracleFailure(NAME, NAME, f"{what}: support differs from the reference's: "
                        f"kept {int((got > 0).sum())} tokens, the reference "
                        f"{int((e.want > 0).sum())}; {int(np.maximum(n_must - n_got, 0).sum())} "
                        f"cut that must stay: {show(lost)}; "
                        f"{int(np.maximum(n_got - n_may, 0).sum())} kept that must go: "
                        f"{show(extra)}")


def _plain_softmax(logits: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
    """softmax((logits.float() - rowmax) / T) in float32, the engine's arithmetic step for step
    (the same subtraction, the same float32 division by the same float32 T, torch.softmax
    over the same [n, R, V] batch on the same device), so that bit equality is meaningful."""
    x = logits.float()
    return torch.softmax((x - x.amax(-1, keepdim=True)) / temperature[:, None, None], dim=-1)


def _check_row(case, *, b: int, got: np.ndarray, logits: np.ndarray, t: float, top_k: int,
               top_p: float, flags, e: _Expected | None = None) -> None:
    what = f"row {b} (T={t}, top_k={top_k}, top_p={top_p}, cut flags {flags})"
    e = e or _expected(logits, t, top_k, top_p)
    want = e.want
    live = logits > DEAD / 2 + 16  # the exact rows' dead tokens sit at DEAD + offset
    kept, ref_kept = np.flatnonzero(got > 0), np.flatnonzero(want > 0)
    if not np.all(live[kept]):
        raise OracleFailure(NAME, NAME, f"{what}: kept tokens "
                                               f"{kept[~live[kept]].tolist()} of probability 0")
    if not e.topk_ambiguous:
        _check_support(what, got, e, top_p)
    if case.kind == "exact":
        if len(kept) != len(ref_kept) or not np.allclose(got[kept], 1.0 / len(ref_kept),
                                                          rtol=0, atol=1e-7):
            raise OracleFailure(NAME, NAME, f"{what}: kept {len(kept)} tokens at "
                                f"{sorted(set(np.round(got[kept], 6).tolist()))}, the reference "
                                f"{len(ref_kept)} at {1.0 / len(ref_kept)}")
        return
    if e.ambiguous:
        return
    # Kept where the reference cuts, or cut where the reference keeps a probability beyond
    # float32 underflow: a wrong cut. Any probability off by more than TOL: a wrong value.
    # As a distribution (divided by its float64 total), tied tokens' values compared sorted
    # per class: module docstring.
    total = got.sum()
    if abs(total - 1.0) > max(TOL, len(got) * 2.0**-24):
        raise OracleFailure(NAME, NAME, f"{what}: probabilities sum to {total!r}")
    at = np.lexsort((got, e.cls))
    g, w = got[at] / total, want[np.lexsort((want, e.cls))]
    wrong = at[(g > 0) & (w == 0) | (g == 0) & (w > TOL)]
    if wrong.size or np.abs(g - w).max() > TOL:
        raise OracleFailure(NAME, NAME, f"{what}: kept {kept.tolist()[:12]}, the "
                            f"reference {ref_kept.tolist()[:12]} (tokens cut differently: "
                            f"{wrong.tolist()[:8]}); max |diff| {np.abs(g - w).max():.2e}")


def _filters_off(top_k: int, top_p: float, vocab: int) -> bool:
    return (top_k == 0 or top_k >= vocab) and top_p == 1.0


def prop_sampling_filter(case: SamplingFilterCase, device: str) -> None:
    """Law: for every row, the engine's filtered distribution equals the float64 reference:
    its support exactly (up to float32 underflow and tokens within CUT_SLACK of the top-p
    boundary; per class of tied tokens), on exact rows (cuts on a boundary or inside a tie)
    each kept probability exactly 1/kept, elsewhere probabilities within 1e-5 where the cut is
    unambiguous in float32; and a row with every filter off is the plain float32 softmax bit
    for bit. Both with the flags a graph passes and those an eager batch computes."""
    gen = np.random.default_rng(case.seed)
    rows = [_row(case, gen) for _ in range(case.rows)]
    logits = torch.from_numpy(np.stack([r[0] for r in rows]))[:, None, :].to(device)
    temp, top_k, top_p = (torch.tensor([r[i] for r in rows], dtype=dt, device=device)
                          for i, dt in ((1, torch.float32), (2, torch.int64), (3, torch.float32)))
    eager_flags = (any(r[2] > 0 for r in rows), any(r[3] < 1.0 for r in rows))
    expected = [_expected(*r) for r in rows]
    plain = _plain_softmax(logits, temp)[:, 0]
    for flags in sorted({(True, True), eager_flags}):
        got32 = sampler.filtered_probs(logits, temperature=temp, top_k=top_k, top_p=top_p,
                                       cut_k=flags[0], cut_p=flags[1])[:, 0]
        got = got32.double().cpu()
        for b, (lg, t, k, p) in enumerate(rows):
            _check_row(case, b=b, got=got[b].numpy(), logits=lg, t=t, top_k=k, top_p=p,
                       flags=flags, e=expected[b])
            if _filters_off(k, p, case.vocab) and not torch.equal(got32[b], plain[b]):
                diff = (got32[b] != plain[b]).cpu()
                raise OracleFailure(NAME, 
                    "sampling_filter", f"row {b} (T={t}, top_k={k}, top_p={p}, cut flags "
                    f"{flags}): filters off, yet not the plain softmax bit for bit: "
                    f"{int(diff.sum())} of {case.vocab} probabilities differ (max |diff| "
                    f"{(got[b] - plain[b].double().cpu()).abs().max().item():.2e}, "
                    f"{int((got32[b] == 0).sum())} zeros against {int((plain[b] == 0).sum())})")


LAW = Law(
    name="sampling_filter", rank=160, prop=prop_sampling_filter, config=SamplingFilterCase,
    summary="the engine's temperature / top-k / top-p filter == the float64 reference, cuts on "
            "exact boundaries and inside ties included",
    strategy=fixed_strategy(sampling_filter_cases),
    controls=("tests/test_sampling_filter.py::test_planted_mistakes_fail",
              "tests/test_sampling_filter.py::test_planted_tail_mistakes_fail"))

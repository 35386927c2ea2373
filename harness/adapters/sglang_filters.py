"""Top-k and top-p per request through SGLang's entry (harness/adapters/sglang_entry.py),
handed over so that a right pipeline recovers the law's target distributions p exactly.

eagle_sample renormalises the softmax with `top_k_renorm_prob` then `top_p_renorm_prob`
(each request's value repeated over its verify rows). 0.5.23 resolves those names once per
platform (`sglang.kernels.ops.sampling.renorm`): FlashInfer's on CUDA (a pack leaves it out),
SGLang's own Triton kernels on ROCm (`renorm_triton`), None on a plain CPU. The adapter binds
the ROCm resolution, SGLang's Triton renorm, on a GPU (it refuses CPU tensors: on CPU no
top-k or top-p is drawn through the entry).

What is handed over, per request (its mode drawn from its seed):
- a greedy request: temperature 1 and top-k 1, as SGLang's sampling params normalise a
  request of temperature 0; its p as it is (its argmax unique at every position: the caller
  keeps a row with tied maxima out);
- top-k: k = the largest support among its rows; every row whose support is that large gets
  a tail, a little mass on each of its zero tokens (never the request's banned ones), each
  below the row's smallest kept probability, so that exactly the support survives;
- top-p: every row gets a tail of one total mass T (the support scaled by 1 - T), and
  top_p = (1 - T)(1 - m / 2), m the smallest kept probability over the rows: sorted
  ascending, the tail's cumulative mass stays below 1 - top_p and the first kept token's
  reaches it, so the pivot is each row's smallest kept probability (FlashInfer's threshold
  semantics, which renorm_triton matches); only for requests whose every row has a zero
  token outside its bans and no NaN;
- none: p as it is, top-k off (the vocabulary) and top-p 1.
A filter that reads another request's value, or is skipped, keeps a tail token or cuts a kept
one, and the rejection rules see it (kernel_chain_acceptance, kernel_chain_distribution)."""
from __future__ import annotations

import importlib

import torch

from harness.adapters.seed_draws import seed_uniform

MODE_SALT = 0x70F1
RENORM = "sglang.kernels.ops.sampling.renorm_triton"


def bind(utils, device: str) -> bool:
    """eagle_utils' module-level renorm names bound to SGLang's Triton renorm (the ROCm
    resolution); False where this release imports them inside eagle_sample instead (from
    sgl_kernel, 0.5.16-0.5.22), has no Triton renorm, or on a CPU (the renorm refuses a
    tensor that is not CUDA's or HIP's)."""
    if not hasattr(utils, "top_k_renorm_prob") or str(device).startswith("cpu"):
        return False
    try:
        renorm = importlib.import_module(RENORM)
    except ModuleNotFoundError:
        return False
    utils.top_k_renorm_prob = renorm.top_k_renorm_probs_triton
    utils.top_p_renorm_prob = renorm.top_p_renorm_probs_triton
    return True


def _tail(row: torch.Tensor, free: torch.Tensor, mass: float) -> torch.Tensor:
    """row scaled by 1 - mass, `mass` spread evenly over the tokens `free` marks."""
    return row * (1 - mass) + free * (mass / free.sum())


def _tail_mass(kept_min: float, free: int) -> float:
    """A total tail mass whose share per token stays below (1 - T) * kept_min / 2."""
    x = kept_min * free
    return x / (2 + x) / 2


def filters(p: torch.Tensor, greedy: torch.Tensor, seeds: torch.Tensor, banned: torch.Tensor):
    """(p handed over [bs, w, V] float64, top_ks [bs] int64, top_ps [bs] float32); p is each
    request's rows, greedy [bs], banned [bs, V] (tokens the request bans by logit bias)."""
    bs, width, vocab = p.shape
    out, top_ks = p.clone(), torch.full((bs,), vocab, dtype=torch.int64)
    top_ps = torch.ones(bs, dtype=torch.float32)
    mode = (seed_uniform(seeds, MODE_SALT) * 3).long()   # 0 none, 1 top-k, 2 top-p
    for b in range(bs):
        rows = p[b]
        if bool(greedy[b]):
            top_ks[b] = 1
            continue
        if bool(rows.isnan().any()):
            continue
        free = (rows == 0) & ~banned[b]                      # [w, V]: where a tail may go
        support = (rows > 0).sum(-1)
        if mode[b] == 1 and int(support.max()) < vocab:
            k = int(support.max())
            top_ks[b] = k
            for r in range(width):
                if int(support[r]) == k and bool(free[r].any()):
                    kept_min = float(rows[r][rows[r] > 0].min())
                    out[b, r] = _tail(rows[r], free[r].double(),
                                      _tail_mass(kept_min, int(free[r].sum())))
        elif mode[b] == 2 and bool(free.any(-1).all()):
            m = float(rows[rows > 0].min())
            mass = _tail_mass(m, int(free.sum(-1).min()))
            for r in range(width):
                out[b, r] = _tail(rows[r], free[r].double(), mass)
            top_ps[b] = (1 - mass) * (1 - m / 2)
    return out, top_ks, top_ps

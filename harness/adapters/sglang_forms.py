"""The in-place, SGLang-shaped calling convention that specdec's kernels share with SGLang's
(predicts / accept_index / accept_token_num written into caller buffers), mapped to and from
the harness-side forms of protocol.py. Imports torch only: it runs inside foreign workers."""
from __future__ import annotations

import torch


def chain_links(bs: int, ndt: int, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """retrieve_index / next_token / next_sibling of bs chains of ndt nodes (0 -> 1 -> ...)."""
    idx = torch.arange(bs * ndt, dtype=torch.int64, device=device).reshape(bs, ndt)
    nxt = torch.arange(1, ndt + 1, dtype=torch.int64, device=device).repeat(bs, 1)
    nxt[:, -1] = -1
    sib = torch.full((bs, ndt), -1, dtype=torch.int64, device=device)
    return idx, nxt, sib


def chain_candidates(draft_ids: torch.Tensor) -> torch.Tensor:
    """[bs, K] drafts -> [bs, K+1] candidates with a root of 0 (never read as a token)."""
    root = torch.zeros_like(draft_ids[:, :1])
    return torch.cat([root, draft_ids], 1)


def dense_draft_probs(draft_ids, draft_probs, vocab: int) -> torch.Tensor:
    """[bs, K+1, V] q rows as the SGLang kernels read them (row j scores candidate j+1; the
    last row is never read): one-hot for a deterministic draft (draft_probs=None)."""
    bs, k = draft_ids.shape
    q = torch.zeros(bs, k + 1, vocab, dtype=torch.float32, device=draft_ids.device)
    if draft_probs is None:
        q[:, :k].scatter_(2, draft_ids[:, :, None], 1.0)
    else:
        q[:, :k] = draft_probs.float()
    return q


def chain_tokens(predicts, accept_index, accept_num, draft_ids) -> torch.Tensor:
    """In-place outputs over chains -> [bs, K+1] emitted tokens, -1 padded: the n accepted
    drafts, then predicts at the last accepted node."""
    bs, k = draft_ids.shape
    out = torch.full((bs, k + 1), -1, dtype=torch.int64)
    n_acc = accept_num.cpu().long().tolist()
    pred = predicts.cpu().long().reshape(-1)
    acc = accept_index.cpu().long()
    for b, n in enumerate(n_acc):
        out[b, :n] = draft_ids[b, :n].cpu()
        out[b, n] = pred[acc[b, n]]
    return out


def chain_coins(bs: int, k: int, seed: int, coins=None, final_coins=None):
    """A chain sampler's coins as its caller draws them from `seed` (one per draft slot,
    [bs, k+1], and one final coin per row), or the law's own where it hands them over
    (accepts["coin_inputs"]: the edge_coins class)."""
    gen = torch.Generator().manual_seed(seed)
    drawn, final = torch.rand(bs, k + 1, generator=gen), torch.rand(bs, generator=gen)
    return (drawn if coins is None else coins.float(),
            final if final_coins is None else final_coins.float())


def verify_buffers(bs: int, ndt: int, width: int, device):
    """Fresh predicts / accept_index / accept_token_num, filled with sentinels."""
    return (torch.full((bs * ndt,), -1, dtype=torch.int32, device=device),
            torch.full((bs, width), -1, dtype=torch.int32, device=device),
            torch.zeros(bs, dtype=torch.int32, device=device))


def tree_tokens(predicts, accept_index, accept_num) -> torch.Tensor:
    """In-place outputs over trees -> [bs, width] emitted tokens, -1 padded: predicts at each
    accepted node (root first), which holds the next accepted candidate, and at the last one
    the bonus or recovered token."""
    acc = accept_index.cpu().long()
    pred = predicts.cpu().long().reshape(-1)
    out = torch.full(acc.shape, -1, dtype=torch.int64)
    for b, n in enumerate(accept_num.cpu().long().tolist()):
        out[b, :n + 1] = pred[acc[b, :n + 1]]
    return out

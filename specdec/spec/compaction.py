"""Moving the accepted tree path to the front (contract section 7; SGLang PR #26997)."""
from __future__ import annotations

import torch


def compact_accepted_to_front(x: torch.Tensor, accept_index: torch.Tensor, bs: int,
                              ndt: int) -> torch.Tensor:
    """x viewed [bs, ndt, ...]: entry j < num_steps+1 of request b becomes the flat row
    accept_index[b, j] (-1 clamps to the request's node 0; those lie past accept_lens and are
    never read); the rest is untouched. Returns a new tensor."""
    width = min(accept_index.shape[1], ndt)  # a path never has more nodes than the tree
    flat = accept_index[:, :width].long()
    node0 = (torch.arange(bs, device=x.device) * ndt)[:, None]
    src = torch.where(flat < 0, node0, flat).reshape(-1)
    out = x.clone().view(bs, ndt, *x.shape[1:])
    out[:, :width] = x[src].view(bs, width, *x.shape[1:])
    return out.view_as(x)


def accepted_kv_moves(req_to_token: torch.Tensor, *, req_pool_indices: torch.Tensor,
                      seq_lens: torch.Tensor, accept_index: torch.Tensor,
                      accept_lens: torch.Tensor, ndt: int):
    """(tgt_loc, src_loc) that move each accepted node's target KV to seq_len + j.

    Lanes past accept_lens move reserved slot 0 onto itself, so the shape stays static.
    """
    bs, width = accept_index.shape
    j = torch.arange(width, device=seq_lens.device)[None, :]
    local = accept_index.long() - (torch.arange(bs, device=seq_lens.device) * ndt)[:, None]
    valid = j < accept_lens[:, None]
    rows = req_to_token[req_pool_indices]
    tgt = torch.gather(rows, 1, (seq_lens[:, None] + j).clamp(max=rows.shape[1] - 1))
    src = torch.gather(rows, 1, (seq_lens[:, None] + local.clamp(min=0)).clamp(max=rows.shape[1] - 1))
    zero = torch.zeros_like(tgt)
    return torch.where(valid, tgt, zero).reshape(-1).long(), torch.where(valid, src, zero).reshape(-1).long()

"""The draft's positions (contract section 3) and slot layout (section 4), written down once.

Every consumer of the multi-step draft layout imports from here: the worker, the attention
metadata and the graph runners. The harness's reference re-derives it independently.
"""
from __future__ import annotations

import torch

from specdec import faults


def branch_positions(prefix_lens: torch.Tensor, topk: int) -> torch.Tensor:
    """`[bs]` draft prefixes -> `[bs*topk]`: where every branch's first draft forward runs
    (contract section 3), in that forward's row order b*topk + k."""
    return prefix_lens[:, None].expand(prefix_lens.shape[0], topk).reshape(-1)


def draft_step_positions(branch_pos: torch.Tensor, num_steps: int) -> torch.Tensor:
    """`[bs*topk]` branch positions -> `[num_steps-1, bs*topk]`: row i is where draft forward
    i runs, the branch position + i (contract section 3), padded lanes (branch position 0)
    at i (section 8). A new tensor: no positions buffer is advanced, none restored."""
    # The historical bug (SGLang #25015) ran forward i at the positions of forward i + 1.
    first = 1 if faults.on("draft_positions_early_increment") else 0
    steps = torch.arange(first, first + num_steps - 1, device=branch_pos.device)
    return branch_pos[None, :] + steps[:, None]


def per_step_draft_out_cache_loc(out_cache_loc: torch.Tensor, batch_size: int, topk: int,
                                 num_steps: int) -> torch.Tensor:
    """`[bs*topk*num_steps]` in layout `[bs, topk, num_steps]` -> `[num_steps, bs*topk]`.

    Row i holds the write targets of draft forward i in that forward's row order (b*topk + k).
    Contiguous, because the rows are handed to kernels that assume stride 1.
    """
    expected = batch_size * topk * num_steps
    assert out_cache_loc.shape[0] == expected, (
        f"out_cache_loc.shape[0]={out_cache_loc.shape[0]} != batch_size*topk*num_steps = "
        f"{batch_size}*{topk}*{num_steps}={expected}"
    )
    rows = out_cache_loc.view(batch_size, topk, num_steps).permute(2, 0, 1)
    if faults.on("draft_per_step_loc_strided"):
        return rows.reshape(num_steps, -1)  # the historical bug: a view with stride num_steps
    return rows.reshape(num_steps, -1).contiguous()


def branch_geometry(prefix_lens: torch.Tensor, page_size: int, num_steps: int):
    """(base, last, npb) per request: the prefix's last partial page starts at `base`, holds
    `last` tokens, and each branch owns `npb` pages starting at its own page boundary."""
    last = prefix_lens % page_size
    base = prefix_lens - last
    npb = (last + num_steps + page_size - 1) // page_size
    return base, last, npb


def draft_reserve_end(prefix_len: int, topk: int, num_steps: int, page_size: int) -> int:
    """Host-side: one past the last position that the draft decode layout can touch."""
    last = prefix_len % page_size
    npb = -(-(last + num_steps) // page_size)
    return prefix_len - last + topk * npb * page_size


def branch_page_table(req_page_table: torch.Tensor, prefix_lens: torch.Tensor, topk: int,
                      num_steps: int, page_size: int) -> torch.Tensor:
    """Page table of every draft branch `[bs*topk, max_pages]`.

    A branch sees the request's full prefix pages, then its own `npb` pages: virtual page p of
    branch k is the request's page p below `base`, and page `p + k*npb` from `base` on. Branch
    0's first own page is the request's partial last page; branches k >= 1 hold a copy of the
    prefix tail there.
    """
    bs, max_pages = req_page_table.shape
    base, _, npb = branch_geometry(prefix_lens, page_size, num_steps)
    base_page = (base // page_size).repeat_interleave(topk)[:, None]
    k = torch.arange(topk, device=prefix_lens.device).repeat(bs)[:, None]
    shift = k * npb.repeat_interleave(topk)[:, None]
    p = torch.arange(max_pages, device=prefix_lens.device)[None, :]
    src = torch.where(p >= base_page, p + shift, p).clamp_(max=max_pages - 1)
    return torch.gather(req_page_table.repeat_interleave(topk, dim=0), 1, src)

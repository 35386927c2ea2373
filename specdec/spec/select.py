"""Draft candidate selection (contract section 5), SGLang's algorithm."""
from __future__ import annotations

import torch


def fast_topk(values: torch.Tensor, topk: int, dim: int = -1):
    if topk == 1:  # max is cheaper than topk and picks the same (first) index on ties
        v, i = torch.max(values, dim=dim, keepdim=True)
        return v, i
    return torch.topk(values, topk, dim=dim)


def select_top_k_tokens(i: int, *, topk_p: torch.Tensor, topk_index: torch.Tensor,
                        hidden_states: torch.Tensor, scores: torch.Tensor | None, topk: int):
    """Inputs of draft forward i and the tree info of its candidates.

    Returns (input_ids [bs*topk], hidden_states [bs*topk, H], scores [bs, topk],
    tree_info = (scores of the candidates, their tokens, their parents' global indices)).
    """
    if i == 0:
        # The draft extend's topk candidates are depth 1; every branch starts from the root.
        input_ids = topk_index.flatten()
        hidden_states = hidden_states.repeat_interleave(topk, dim=0)
        scores = topk_p
        bs = topk_p.shape[0]
        parents = torch.arange(-1, topk, device=topk_p.device, dtype=torch.long).repeat(bs, 1)
        return input_ids, hidden_states, scores, (topk_p.unsqueeze(1), topk_index, parents)
    # Every branch proposed topk children: keep the topk best paths by cumulative score.
    expand_scores = scores.unsqueeze(2) * topk_p.reshape(-1, topk, topk)  # [bs, topk, topk]
    if topk == 1:
        # A chain: the only child is kept and continues its branch's hidden state. What the
        # general selection below computes, without its gathers (a captured draft step's
        # kernels are a round's cost at small batches).
        bs = scores.shape[0]
        parents = torch.full((bs, 1), i, dtype=torch.long, device=scores.device)
        return (topk_index.flatten(), hidden_states, expand_scores.view(bs, 1),
                (expand_scores, topk_index.view(bs, 1), parents))
    topk_cs_p, topk_cs_index = fast_topk(expand_scores.flatten(start_dim=1), topk, dim=-1)
    scores = topk_cs_p
    topk_index = topk_index.reshape(-1, topk * topk)
    input_ids = torch.gather(topk_index, 1, topk_cs_index).flatten()
    bs = topk_cs_index.shape[0]
    # A selected child continues its parent branch's hidden state.
    parent_row = topk_cs_index.flatten() // topk + torch.arange(
        0, bs * topk, step=topk, device=topk_cs_index.device).repeat_interleave(topk)
    hidden_states = hidden_states[parent_row]
    parents = topk_cs_index + (topk * topk * (i - 1) + topk)
    return input_ids, hidden_states, scores, (expand_scores, topk_index, parents)


def organize_draft_results(score_list: list[torch.Tensor], token_list: list[torch.Tensor],
                           parents_list: list[torch.Tensor], num_draft_token: int):
    """Global top-(ndt-1) candidates by cumulative score, sorted ascending (parents first)."""
    score_list = torch.cat(score_list, dim=1).flatten(1)
    ss_token_list = torch.cat(token_list, dim=1)
    top_scores = torch.topk(score_list, num_draft_token - 1, dim=-1)
    top_scores_index = torch.sort(top_scores.indices).values
    draft_tokens = torch.gather(ss_token_list, index=top_scores_index, dim=1)
    if len(parents_list) > 1:
        parent_list = torch.cat(parents_list[:-1], dim=1)
    else:
        bs = parents_list[0].shape[0]
        parent_list = torch.empty(bs, 0, device=parents_list[0].device, dtype=torch.long)
    return parent_list, top_scores_index, draft_tokens


def parent_branch(tree_parents: torch.Tensor, i: int, topk: int) -> torch.Tensor:
    """For step i >= 1: the branch (0..topk-1) of forward i-1 each new branch descends from."""
    return (tree_parents - (topk * topk * (i - 1) + topk)) // topk

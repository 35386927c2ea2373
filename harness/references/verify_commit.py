"""What a verify round commits, from the contract alone (kernel_protocol.py, VERIFY_COMMIT;
docs/contract.md section 7): plain lists, no engine's code.

Request b's verify window is ndt nodes, flat ids b*ndt + t, node t's KV in slot
window[b][t] = req_to_token[req_pool_indices[b], seq_lens[b] + t]. It accepted n_b =
accept_lens[b] nodes, accept_index[b, :n_b]: its root, then one node a depth down a
root-to-node path. predict[node] is the target's token after that node, so the tokens it
commits are predict at its accepted nodes, the last of them the token the next round starts
from (the bonus). Compaction itself is references/tree.py's (compact, accepted_kv_moves)."""
from __future__ import annotations


def commit(predict: list[int], accept_index: list[list[int]], accept_lens: list[int],
           seq_lens: list[int], ndt: int) -> dict:
    """new seq_lens, the bonus, and for each request the accepted nodes' local ids
    (what the front of its window must hold after compaction)."""
    paths = [row[:n] for row, n in zip(accept_index, accept_lens)]
    return {"new_seq_lens": [s + n for s, n in zip(seq_lens, accept_lens)],
            "bonus": [predict[p[-1]] for p in paths],
            "local_paths": [[node - b * ndt for node in p] for b, p in enumerate(paths)]}


def apply_moves(content: dict, calls: list[tuple[list[int], list[int]]]) -> dict:
    """KV content (slot -> label) after the engine's move calls, each (tgt, src) gathered then
    scattered at once, as a KV pool's move_kv_cache does (k[tgt] = k[src])."""
    content = dict(content)
    for tgt, src in calls:
        values = [content.get(s, ("untouched", s)) for s in src]
        for t, v in zip(tgt, values):
            content[t] = v
    return content

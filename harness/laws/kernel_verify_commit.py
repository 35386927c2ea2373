"""Law kernel_verify_commit, over any kernel adapter with VERIFY_COMMIT: what a verify round
commits is the accepted path, wherever the engine puts it (harness/references/verify_commit.py,
docs/contract.md section 7).

Request b accepted n_b = accept_lens[b] nodes of its verify window, accept_index[b, :n_b] (its
root, then a node a depth down a root-to-node path, flat ids b*ndt + t, -1 after), node t's KV
in slot window[b][t] = req_to_token[req_pool_indices[b], seq_lens[b] + t]. Then, for every
output the engine makes:
- its seq_len becomes seq_lens[b] + n_b, and the token the next round starts from (the bonus)
  is predict at its last accepted node;
- for a tree, after the engine's KV moves (each call gathered, then scattered at once), slot
  window[b][k] holds what slot window[b][local(accept_index[b, k])] held, for k < n_b, and no
  slot outside the batch's verify windows (the requests' prefixes, other rows of the pool)
  changed;
- the compacted predict and hidden rows hold the accepted nodes' at b*ndt + k, k < n_b, and
  rows at window positions past spec_steps untouched;
- a chain's prepared draft-extend inputs: select index b*ndt + n_b - 1, correct drafts n_b - 1.

Drawn (input classes, counted as corners): only the root accepted, the deepest path, a path
through a later sibling (so the path is not already the window's front), batch size one;
trees as the draft makes them (topk 1-4, depth 1-5), req_pool_indices a permutation into a
larger pool, ragged seq_lens."""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from harness.adapters.kernel_protocol import Component
from harness.base.failure import OracleFailure
from harness.base.known import drawn_around
from harness.laws.declaration import Law
from harness.references import tree as T
from harness.references.verify_commit import apply_moves, commit
from harness.strategies.kernel_inputs import (KernelCase, draft_tree, kernel_cases,
                                              request_pool, tree_knobs)

NAME = "kernel_verify_commit"
NEEDS = frozenset({Component.VERIFY_COMMIT})
CLASSES = ("plain", "none_accepted", "deepest_path", "later_sibling", "batch_one")


@st.composite
def _knobs(draw, kernels) -> dict:
    cls = draw(st.sampled_from(CLASSES))
    k = draw(tree_knobs(kernels.accepts, max_bs=1 if cls == "batch_one" else 4))
    if k["topk"] == 1:  # a chain: every step kept, as the topk-1 verify window is
        k["ndt"] = k["spec_steps"] + 1
    # A recorded finding of this release (accepts["known"]): a window shorter than the
    # accept index (ndt < spec_steps + 1), drawn around unless included.
    if drawn_around(kernels.accepts, law=NAME):
        k["ndt"] = max(k["ndt"], k["spec_steps"] + 1)
    return {"input_class": cls, "bs": k["bs"], "topk": k["topk"],
            "spec_steps": k["spec_steps"], "ndt": k["ndt"], "seq_lens": k["seq_lens"],
            "hidden": draw(st.booleans())}


def cases(kernels):
    return kernel_cases(NAME, kernels, _knobs(kernels))


def _path(parents: list, node: int) -> list[int]:
    out = [node]
    while out[-1] != 0:
        out.append(parents[out[-1]])
    return out[::-1]


def batch(case: KernelCase) -> dict:
    k, rng = case.knobs, case.rng()
    bs, ndt, steps = k["bs"], k["ndt"], k["spec_steps"]
    seq = k["seq_lens"][:bs]
    accept_index, accept_lens = [], []
    for b in range(bs):
        pl, sel = draft_tree(rng, k["topk"], steps, ndt, False)
        parents = T.build_tree(pl, sel, k["topk"], steps, ndt)["parents"]
        paths = [_path(parents, t) for t in range(ndt)]
        deepest = max(len(p) for p in paths)
        pick = {"none_accepted": [p for p in paths if len(p) == 1],
                "deepest_path": [p for p in paths if len(p) == deepest],
                "later_sibling": [p for p in paths if any(t > d for d, t in enumerate(p))]
                }.get(k["input_class"]) or paths
        path = rng.choice(pick)
        accept_index.append([b * ndt + t for t in path] + [-1] * (steps + 1 - len(path)))
        accept_lens.append(len(path))
    r2t, rpi = request_pool(rng, bs, max(seq) + ndt)
    return {"predict": [rng.randrange(32000) for _ in range(bs * ndt)],
            "accept_index": accept_index, "accept_lens": accept_lens, "seq_lens": seq,
            "req_to_token": r2t, "req_pool_indices": rpi,
            "window": [[r2t[rpi[b]][seq[b] + t] for t in range(ndt)] for b in range(bs)]}


def _ints(x) -> list[int]:
    return torch.as_tensor(x).to(torch.int64).reshape(-1).tolist()


def check(kernels, case: KernelCase) -> dict:
    k = case.knobs
    x = batch(case)
    bs, ndt, steps = k["bs"], k["ndt"], k["spec_steps"]
    i64 = lambda v: torch.tensor(v, dtype=torch.int64)  # noqa: E731
    hidden = (torch.arange(bs * ndt, dtype=torch.float32)[:, None] * torch.tensor([1.0, -1.0])
              if k["hidden"] else None)
    got = kernels.verify_commit(
        i64(x["predict"]), accept_index=torch.tensor(x["accept_index"], dtype=torch.int32),
        accept_lens=torch.tensor(x["accept_lens"], dtype=torch.int32), seq_lens=i64(x["seq_lens"]),
        out_cache_loc=i64([s for w in x["window"] for s in w]),
        req_to_token=torch.tensor(x["req_to_token"], dtype=torch.int32),
        req_pool_indices=i64(x["req_pool_indices"]), topk=k["topk"], ndt=ndt, hidden=hidden)
    want = commit(x["predict"], x["accept_index"], x["accept_lens"], x["seq_lens"], ndt)
    where = (f"accept_index {x['accept_index']}, accept_lens {x['accept_lens']}, seq_lens "
             f"{x['seq_lens']}, topk {k['topk']}, ndt {ndt}, req_pool_indices "
             f"{x['req_pool_indices']}")
    ref = {"new_seq_lens": want["new_seq_lens"],
           "select_index": [b * ndt + n - 1 for b, n in enumerate(x["accept_lens"])],
           "correct": [n - 1 for n in x["accept_lens"]]}
    ref.update({key: want["bonus"] for key in got if key.startswith("bonus")})
    for key, value in ref.items():
        if got.get(key) is not None and _ints(got[key]) != value:
            raise OracleFailure(NAME, key, f"{key} {_ints(got[key])}, reference {value}; {where}")
    if got.get("kv_moves") is not None:
        _check_moves(got["kv_moves"], x, want, where)
    for key, before in (("predict", x["predict"]),
                        ("hidden", None if hidden is None else hidden[:, 0].tolist())):
        if got.get(key) is None or before is None:
            continue
        after = torch.as_tensor(got[key]).reshape(bs * ndt, -1)[:, 0].to(torch.int64).tolist()
        for b, local in enumerate(want["local_paths"]):
            row = [int(v) for v in before[b * ndt:(b + 1) * ndt]]
            expect, have = T.compact(row, local, steps + 1), after[b * ndt:(b + 1) * ndt]
            # Entries between the path's end and spec_steps + 1 are never read: any value.
            read = [j for j in range(ndt) if j < len(local) or j >= steps + 1]
            if [have[j] for j in read] != [expect[j] for j in read]:
                raise OracleFailure(NAME, f"compacted_{key}", f"request {b}: {key} window "
                                    f"{have}, expected {expect} at entries {read} (its path "
                                    f"{local} in front, rows past {steps} untouched); {where}")
    return {"accepted": sum(x["accept_lens"])}


def _check_moves(calls, x: dict, want: dict, where: str) -> None:
    pool = [s for row in x["req_to_token"] for s in row]
    before = {s: ("slot", s) for s in pool}
    after = apply_moves(before, [(_ints(t), _ints(s)) for t, s in calls])
    for b, (win, local) in enumerate(zip(x["window"], want["local_paths"])):
        for k, t in T.accepted_kv_moves(0, local):  # window positions: (target, source)
            if after.get(win[k]) != ("slot", win[t]):
                raise OracleFailure(NAME, "kv_front", f"request {b}: window position {k} "
                                    f"(slot {win[k]}) holds {after.get(win[k])}, expected the "
                                    f"KV of node {t} (slot {win[t]}); {where}")
    windows = {s for w in x["window"] for s in w}
    moved = [s for s in pool if s not in windows and after[s] != before[s]]
    if moved:
        raise OracleFailure(NAME, "kv_outside", f"slots outside the verify windows changed: "
                            f"{moved[:6]} (a prefix or another request's KV); {where}")


LAW = Law(
    name=NAME, rank=655, check=check, cases=cases, needs=NEEDS, door="kernels",
    summary="a verify round commits its accepted path: seq_lens + accepted, the bonus at the "
            "last accepted node, the path's KV, predict and hidden rows moved to the front of "
            "the window and nothing outside the windows touched",
    controls=tuple(f"tests/test_kernel_controls_verify_commit.py::{t}" for t in (
        "test_window_of_the_batch_row_is_rejected",
        "test_bonus_of_the_previous_node_is_rejected",
        "test_seq_lens_without_the_bonus_are_rejected")))

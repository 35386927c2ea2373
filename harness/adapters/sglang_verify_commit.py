"""SGLang's verify commit (VERIFY_COMMIT), 0.5.16+: what `eagle_worker_common.run_eagle_verify`
does with eagle_sample's (predict, accept_lens, accept_index), called as it calls them:

- `prepare_verify_commit_outputs` (kernels/ops/speculative/eagle.py), its fused path (predict
  on CUDA): new seq_lens and the bonus; for topk 1 with `num_draft_tokens`, also the draft
  extend's select index and correct-draft counts;
- the unfused path (predict off CUDA): `fill_bonus_tokens` over `predict[accept_index]`
  with the accept stride `accept_index.shape[1]` (its Triton kernel launched as
  `fill_bonus_tokens_func` launches it: the function itself calls sgl_kernel's CPU op
  under SGLANG_USE_CPU_ENGINE), reported as "bonus_unfused";
- topk > 1: `_finalize_accept_tree_path` on a stub batch (seq_lens, out_cache_loc) and a KV
  pool that records its `move_kv_cache(tgt, src)` calls: `move_accept_tokens_to_target_kvcache`
  (`fill_front_out_cache_loc_func`, `fill_accept_out_cache_loc_func`) and
  `_compact_accept_to_front` over predict and the hidden states.

0.5.16-0.5.21 have the unfused bonus and the compaction (the parts a release lacks are not
called, their outputs absent). Earlier releases commit inside `EagleVerifyInput.verify`
(eagle_info.py), bound to the whole schedule batch: not mapped."""
from __future__ import annotations

import importlib
from types import SimpleNamespace

import torch

OPS = "sglang.kernels.ops.speculative.eagle"
WORKER = "sglang.srt.speculative.eagle_worker_common"
WHY_NOT = ("before 0.5.16 the verify commit is inline in EagleVerifyInput.verify "
           "(eagle_info.py), bound to the whole schedule batch: no commit function")


def find() -> dict | None:
    """This release's parts (prepare_verify_commit_outputs 0.5.23; fill_bonus_tokens and
    _finalize_accept_tree_path 0.5.16+), None for a part it lacks; None when it has none."""
    try:
        ops, worker = importlib.import_module(OPS), importlib.import_module(WORKER)
    except ModuleNotFoundError:
        return None
    parts = {"prepare": getattr(ops, "prepare_verify_commit_outputs", None),
             "fill_bonus": getattr(ops, "fill_bonus_tokens", None),
             "finalize": getattr(worker, "_finalize_accept_tree_path", None)}
    return parts if any(parts.values()) else None


class _Pool:
    def __init__(self, calls: list) -> None:
        self.calls = calls

    def get_kvcache(self):
        return self

    def move_kv_cache(self, tgt, src):
        self.calls.append((tgt.cpu().clone(), src.cpu().clone()))


def verify_commit(fns: dict, *, device: str, predict, accept_index, accept_lens, seq_lens,
                  out_cache_loc, req_to_token, req_pool_indices, topk, ndt, hidden) -> dict:
    dev = lambda t: None if t is None else t.to(device)  # noqa: E731
    predict32 = dev(predict.to(torch.int32))  # eagle_sample's predict is int32
    index, lens, seq = dev(accept_index), dev(accept_lens), dev(seq_lens)
    bs = seq.shape[0]
    out = {}
    if fns["prepare"] and topk == 1:
        new_seq, bonus, _steps, (correct, select, _ids) = fns["prepare"](
            predict32, index, lens, seq, num_draft_tokens=ndt)
        out.update(new_seq_lens=new_seq.cpu(), bonus=bonus.cpu(), correct=correct.cpu(),
                   select_index=select.cpu())
    elif fns["prepare"]:
        new_seq, bonus = fns["prepare"](predict32, index, lens, seq)
        out.update(new_seq_lens=new_seq.cpu(), bonus=bonus.cpu())
    if fns["fill_bonus"]:
        accept_tokens = predict32[index]  # -1 reads the last row: past accept_lens, unread
        unfused = torch.empty_like(lens, dtype=torch.int32)
        fns["fill_bonus"][(bs,)](accept_tokens, lens, unfused, index.shape[1])
        out["bonus_unfused"] = unfused.cpu()
    if fns["finalize"] and topk > 1:
        calls: list = []
        # 0.5.23 reads the targets out of the verify window (out_cache_loc); 0.5.16-0.5.22
        # out of req_to_token at seq_lens onward.
        batch = SimpleNamespace(seq_lens=seq, out_cache_loc=dev(out_cache_loc),
                                req_pool_indices=dev(req_pool_indices),
                                req_to_token_pool=SimpleNamespace(req_to_token=dev(req_to_token)))
        logits = SimpleNamespace(hidden_states=dev(hidden))
        compacted = fns["finalize"](batch, index, lens, predict32, logits, bs,
                                    token_to_kv_pool_allocator=_Pool(calls),
                                    num_draft_tokens=ndt)
        out.update(kv_moves=calls, predict=compacted.cpu(),
                   hidden=None if hidden is None else logits.hidden_states.cpu())
    return out

"""Standalone reproduction for the SGLang maintainers: the tree-path compaction after verify
raises when --speculative-num-draft-tokens < --speculative-num-steps + 1 with topk > 1.
Needs torch and SGLang's released package with its own dependencies (the function lives in
srt/speculative/eagle_worker_common.py, which imports the server's modules); no specdec:

    python sglang_tree_compaction_short_window.py

Exit 1 while the bug reproduces.

Report text:

  Title: [Spec v2] _compact_accept_to_front raises when num_draft_tokens <
  num_steps + 1 (topk > 1)

  With --speculative-eagle-topk 2 --speculative-num-steps 2
  --speculative-num-draft-tokens 2 (accepted by the arg hook: only topk 1 gets its draft
  count adjusted), every verify round ends in _finalize_accept_tree_path ->
  _compact_accept_to_front, which assigns x[accept_index] viewed [bs, num_steps + 1] into
  out.view(bs, num_draft_tokens)[:, :num_steps + 1], only num_draft_tokens wide:
  "RuntimeError: The expanded size of the tensor (2) must match the existing size (3)".
  An accepted path never has more nodes than the tree, so the columns past
  num_draft_tokens are -1 padding: gathering min(num_steps + 1, num_draft_tokens) columns
  fixes it (or reject the configuration in the arg hook). Found by specdec's
  kernel_verify_commit law."""
from __future__ import annotations

import sys

import torch

from sglang.srt.speculative.eagle_worker_common import _compact_accept_to_front


def main() -> int:
    num_draft_tokens, num_steps = 2, 2           # topk 2: the root and its first child
    predict = torch.tensor([11, 12], dtype=torch.int32)
    accept_index = torch.tensor([[0, 1, -1]], dtype=torch.int32)  # [bs, num_steps + 1]
    try:
        out = _compact_accept_to_front(predict, accept_index, 1,
                                       num_draft_tokens=num_draft_tokens)
    except RuntimeError as exc:
        print(f"num_draft_tokens {num_draft_tokens}, num_steps {num_steps}: raises {exc}")
        return 1
    print(f"compacted predict {out.tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

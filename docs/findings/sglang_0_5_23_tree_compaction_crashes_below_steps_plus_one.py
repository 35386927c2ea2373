"""Finding: SGLang's tree-path compaction after verify (`_compact_accept_to_front`,
srt/speculative/eagle_worker_common.py) raises on every round when the draft tree has fewer
nodes than the accept index is wide: --speculative-eagle-topk > 1 with
--speculative-num-draft-tokens < --speculative-num-steps + 1, a configuration the server
accepts (found by the kernel_verify_commit law; unfixed in 0.5.23).

Law broken: kernel_verify_commit (harness/laws/kernel_verify_commit.py), check crash:

  python docs/findings/sglang_0_5_23_tree_compaction_crashes_below_steps_plus_one.py 0.5.23

  [kernel_verify_commit/crash] ForeignCallError: RuntimeError: The expanded size of the
  tensor (2) must match the existing size (3) at non-singleton dimension 1. Target sizes:
  [1, 2]. Tensor sizes: [3]

The case: one request, topk 2, two draft steps, two draft tokens (the root and one child).

What happens: accept_index is [bs, spec_steps + 1] (eagle_sample); the compaction gathers
x[accept_index] into shape [bs, spec_steps + 1] and assigns it to
`out.view(bs, num_draft_tokens)[:, :spec_steps + 1]`, which has only num_draft_tokens
columns. A path never has more nodes than the tree, so the columns past num_draft_tokens
hold only -1 padding; the assignment fails before anything is moved. The KV moves just
before it (move_accept_tokens_to_target_kvcache) size their buffers by accept_index and
run. specdec's compaction (specdec/spec/compaction.py) gathers min(spec_steps + 1, ndt).

Where it reaches production: EAGLE / EAGLE-3 with the spec-v2 worker (eagle_worker_v2,
finalize_tree_path=True) or the UNO worker, --speculative-eagle-topk > 1 and
--speculative-num-draft-tokens <= --speculative-num-steps (the arg hook adjusts the count
only for topk 1; nothing rejects it for topk > 1): the first decode round raises.

Verdict: bug, unfixed in the newest release. The compaction's text is the same in 0.5.16 to
0.5.23 (the sweep's source cache of eagle_worker_common.py); reproduced on 0.5.16 and
0.5.23; before 0.5.16 there is no such function (the commit is inline in
EagleVerifyInput.verify; n/a). Standalone with the report text:
docs/findings/standalone/sglang_tree_compaction_short_window.py.

Run: `python docs/findings/sglang_0_5_23_tree_compaction_crashes_below_steps_plus_one.py
[RELEASE]` (default 0.5.23; exit 1 while it reproduces). Regression:
tests/test_findings_kernels.py.
"""
from __future__ import annotations

from harness.runners.kernel_findings import main

LAW, ENGINE, FOUND_ON = "kernel_verify_commit", "sglang-kernels", "0.5.23"
SEED = 0
KNOBS = {"bs": 1, "hidden": False, "input_class": "plain", "ndt": 2, "seq_lens": [1, 1, 1, 1],
         "spec_steps": 2, "topk": 2}
REPRODUCED_ON = ("0.5.16", "0.5.23")
DEVICE = "cpu"

if __name__ == "__main__":
    main(LAW, engine=ENGINE, found_on=FOUND_ON, seed=SEED, knobs=KNOBS, device=DEVICE)

"""Finding: SGLang 0.5.6 to 0.5.12 give every draft branch but the first the wrong KV slots
when all requests' lengths end exactly on a page boundary (page_size > 1, topk > 1).

Law broken: kernel_kv_slots (harness/laws/kernel_kv_slots.py), check draft_out_cache_loc.
Found by `python -m harness sweep --engine sglang-kernels` (release 0.5.8); the shrunk case:

  python -m harness repro kernel_kv_slots --device cpu --config '{"engine":
  "sglang-kernels@0.5.8", "knobs": {"bs": 1, "component": "draft_cache_locs", "lengths":
  "page_aligned", "max_len": 1, "num_steps": 1, "page_size": 2, "pool_rows": 1, "topk": 2},
  "law": "kernel_kv_slots", "seed": 0}'

  entry 1 (request 0, branch 1, step 0): [3], reference [1]; seq_lens [2], topk 2, steps 1,
  page 2

What happens (0.5.8, sglang/srt/speculative/spec_utils.py, assign_draft_cache_locs): with
pages per branch, out_cache_loc arrives holding, per branch, the partial prefix page's
duplicate then the new slots; Part 3 of the kernel compacts it to the [bs, topk, steps]
layout the draft steps read. Part 2 and Part 3 sit under one condition,
`if page_size != 1 and topk != 1 and duplicate_cache_len > 0`, and duplicate_cache_len (the
batch's total partial-page length) is 0 exactly when every length is a multiple of the page
size. The copies are then rightly skipped, but so is the compaction: out_cache_loc keeps the
allocator's page-padded layout, so entry [b, k, s] for k >= 1 names a slot of the previous
branch's page padding (with bs > 1, another request's), and draft step s writes its KV
there.

Verdict: bug, gone upstream. It affects the v1 EAGLEWorker path with topk > 1 and
page_size > 1 from 0.5.6 to 0.5.12 (the prefix-tail copy lists came with PR #7725); the v1
worker was removed in 0.5.13, and from 0.5.14 the paged per-branch layout is torch code in
prepare_for_draft (sglang/srt/speculative/eagle_worker_common.py): 0.5.14 to 0.5.23 pass
the law. SGLang 0.5.8's own reader (generate_draft_decode_kv_indices) reads branch k at the
contract's slots, so the drafter writes KV where it does not read it: acceptance drops,
outputs stay lossless (the target verifies). No upstream issue or PR names the symptom;
the rewrite removed its cause. Releases checked: every release, by the sweep
(bench/results/sweep-sglang-cpu-2026-11-28/, 8 examples a law): kernel_kv_slots fails on
0.5.6 to 0.5.12.post1, each in the same check (draft_out_cache_loc, request 0, branch 1),
and passes on 0.5.5.post3 before and 0.5.13 after. 0.5.3 passes (its kernel copies the
partial page in place and runs Part 3 whenever page_size > 1 and topk > 1; the
`duplicate_cache_len > 0` guard came with the copy lists of later releases).

Run: `python docs/findings/sglang_0_5_8_draft_slots_page_aligned.py [RELEASE]` (default
0.5.8; exit 1 while it reproduces; the release is installed first when missing).
Regression: tests/test_findings_kernels.py, a strict xfail on the releases it was reproduced
on, where they are installed.
"""
from __future__ import annotations

from harness.runners.kernel_findings import main

LAW, ENGINE, FOUND_ON, SEED = "kernel_kv_slots", "sglang-kernels", "0.5.8", 0
KNOBS = {"bs": 1, "component": "draft_cache_locs", "lengths": "page_aligned", "max_len": 1,
         "num_steps": 1, "page_size": 2, "pool_rows": 1, "topk": 2}
REPRODUCED_ON = ("0.5.8",)
DEVICE = None  # the GPU when there is one, else the interpreter

if __name__ == "__main__":
    main(LAW, engine=ENGINE, found_on=FOUND_ON, seed=SEED, knobs=KNOBS, device=DEVICE)

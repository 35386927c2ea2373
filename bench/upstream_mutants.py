"""Planted mistakes in SGLang's and vLLM's own released code, one at a time, each run through
the ordinary gate over a checkout (`pytest --engine NAME@PATH`, the kernel laws): does the
harness catch a realistic upstream bug it was never shown?

The checkout is a scratch tree beside the release's folder: every file a symlink to the
release's, except the one a mutant edits (a real copy with one textual change, applied and
asserted to occur exactly once). The unmutated tree must pass first.

    PYTHONPATH=. python bench/upstream_mutants.py [--only ID ...]

(on this machine's device: CPU, or a GPU where one is visible)
prints one line per mutant (caught by which law and check, or MISSED) and the total."""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.adapters.foreign.install import site_dir


@dataclass(frozen=True)
class Mutant:
    id: str
    adapter: str     # the kernel adapter's --engine name
    release: str
    file: str        # relative to the release's folder
    old: str
    new: str
    why: str         # the realistic mistake it stands for
    cuda: bool = False  # reached only where the adapter draws its input on a GPU


V = "vllm-kernels", "0.33.0"
G = "sglang-kernels", "0.5.23"
SPEC = "vllm/v1/worker/gpu/spec_decode"
SGK = "sglang/kernels/ops/speculative"
MUTANTS = (
    Mutant("vllm-allowed-ids-need-penalties", *V, "vllm/v1/sample/rejection_sampler.py",
           "need_repeat_indices = (\n            sampling_metadata.allowed_token_ids_mask is "
           "not None or has_penalties\n        )",
           "need_repeat_indices = has_penalties",
           "the entry applies a request's allowed ids to its draft rows only when some "
           "request also has penalties (the fast path without penalties skips them)"),
    Mutant("vllm-bad-words-last-draft", *V, "vllm/v1/sample/ops/bad_words.py",
           "for draft_idx in range(start_idx, start_idx + n):",
           "for draft_idx in range(start_idx, start_idx + n - 1):",
           "bad words applied to every draft position but the last"),
    Mutant("vllm-penalties-ignore-drafts", *V, "vllm/v1/sample/rejection_sampler.py",
           "result.append([*result[-1], spec[i]])", "result.append(list(out))",
           "penalties at draft position i forget the drafts before it"),
    Mutant("vllm-bonus-skips-allowed-ids", *V, "vllm/v1/sample/sampler.py",
           "if sampling_metadata.allowed_token_ids_mask is not None:\n"
           "            logits.masked_fill_(",
           "if sampling_metadata.allowed_token_ids_mask is not None and not "
           "predict_bonus_token:\n            logits.masked_fill_(",
           "the bonus token is sampled without the request's allowed ids"),
    Mutant("vllm-mrv2-state-is-batch-index", *V, f"{SPEC}/rejection_sampler_utils.py",
           "    seed = tl.load(seed_ptr + req_state_idx)\n"
           "    temp = tl.load(temp_ptr + req_state_idx).to(tl.float32)\n"
           "    is_greedy = temp == 0.0",
           "    seed = tl.load(seed_ptr + req_idx)\n"
           "    temp = tl.load(temp_ptr + req_idx).to(tl.float32)\n"
           "    is_greedy = temp == 0.0",
           "MRV2's rejection kernel reads seed and temperature by batch index, not through "
           "idx_mapping (the request-state indirection)"),
    Mutant("vllm-mrv2-draft-logits-by-logit", *V, f"{SPEC}/rejection_sampler_utils.py",
           "                    draft_logits_ptr\n"
           "                    + req_state_idx * draft_logits_stride_0\n"
           "                    + draft_step_idx * draft_logits_stride_1\n",
           "                    draft_logits_ptr\n"
           "                    + logit_idx * 0 * draft_logits_stride_0\n"
           "                    + draft_step_idx * draft_logits_stride_1\n",
           "the draft logits' statistics read request state 0's row whatever the request"),
    Mutant("vllm-mrv2-next-token-by-batch-index", *V,
           f"{SPEC}/target_dependent_ar/speculator.py",
           "next_token = tl.load(last_sampled_ptr + req_state_idx).to(tl.int32)",
           "next_token = tl.load(last_sampled_ptr + req_idx).to(tl.int32)",
           "the drafter's next token read by batch index, not through idx_mapping"),
    Mutant("vllm-padded-num-rejected-off-by-one", *V, "vllm/v1/spec_decode/utils.py",
           "num_rejected_tokens = num_draft_tokens + 1 - valid_count",
           "num_rejected_tokens = num_draft_tokens - valid_count",
           "num_rejected (an output the drafter's metadata reads) one short; the index to "
           "sample uses it too"),
    Mutant("vllm-mrv2-seq-lens-not-padded", *V, f"{SPEC}/target_dependent_ar/speculator.py",
           "tl.store(draft_seq_lens_ptr + block, 0, mask=mask)",
           "tl.store(draft_seq_lens_ptr + block, 1, mask=mask)",
           "the CUDA-graph padding of the drafter's seq_lens left non-zero"),
    Mutant("vllm-draft-step-padding-unwritten", *V, "vllm/v1/spec_decode/utils.py",
           "        tl.store(out_slot_mapping_ptr + req_idx, PAD_ID)\n",
           "        tl.store(out_slot_mapping_ptr + req_idx, 0)\n",
           "the draft step's CUDA-graph padding rows write slot 0 (a real KV slot) instead of "
           "the padding slot"),
    Mutant("sglang-logit-bias-tiled", *G, "sglang/srt/speculative/eagle_utils.py",
           "torch.repeat_interleave(\n                sampling_info.logit_bias, "
           "verify_input.draft_token_num, dim=0\n            )",
           "sampling_info.logit_bias.repeat(verify_input.draft_token_num, 1)",
           "the logit bias tiled over the verify rows (request order) instead of repeated per "
           "request"),
    Mutant("sglang-temperature-tiled", *G, "sglang/srt/speculative/eagle_utils.py",
           "torch.repeat_interleave(\n            sampling_info.temperatures, "
           "verify_input.draft_token_num, dim=0\n        )",
           "sampling_info.temperatures.repeat(verify_input.draft_token_num, 1)",
           "the verify rows' temperatures tiled instead of repeated per request"),
    Mutant("sglang-additive-penalties-tiled", *G, "sglang/srt/speculative/eagle_utils.py",
           "torch.repeat_interleave(\n                sampling_info.acc_additive_penalties,\n"
           "                verify_input.draft_token_num,\n                dim=0,\n"
           "            )",
           "sampling_info.acc_additive_penalties.repeat(verify_input.draft_token_num, 1)",
           "the relaxed presence and frequency penalties tiled over the verify rows instead of "
           "repeated per request"),
    Mutant("sglang-scaling-penalties-skipped", *G, "sglang/srt/speculative/eagle_utils.py",
           "    if sampling_info.acc_scaling_penalties is not None:\n        apply_scaling",
           "    if sampling_info.acc_scaling_penalties is None:\n        apply_scaling",
           "the repetition penalty never applied at the verify rows (a flipped None test)"),
    Mutant("sglang-top-k-tiled", *G, "sglang/srt/speculative/eagle_utils.py",
           "torch.repeat_interleave(\n                    sampling_info.top_ks, "
           "verify_input.draft_token_num, dim=0\n                )",
           "sampling_info.top_ks.repeat(verify_input.draft_token_num)",
           "the requests' top-k tiled over the verify rows instead of repeated per request "
           "(drawn through the entry on a GPU: SGLang's Triton renorm refuses CPU tensors)",
           cuda=True),
    Mutant("sglang-top-p-tiled", *G, "sglang/srt/speculative/eagle_utils.py",
           "torch.repeat_interleave(\n                    sampling_info.top_ps, "
           "verify_input.draft_token_num, dim=0\n                )",
           "sampling_info.top_ps.repeat(verify_input.draft_token_num)",
           "the requests' top-p tiled over the verify rows instead of repeated per request",
           cuda=True),
    Mutant("sglang-chain-tree-row-is-request", *G, f"{SGK}/eagle.py",
           "req = tl.load(req_indices + row * REQ_STRIDE, valid, other=0).to(tl.int64)",
           "req = row",
           "the chain verify batch's out_cache_loc read at req_to_token row b, not through "
           "req_pool_indices"),
    Mutant("sglang-compaction-without-bonus", *G, "sglang/srt/speculative/spec_utils.py",
           "        num_correct_drafts + 1,\n",
           "        num_correct_drafts,\n",
           "the tree-path compaction's targets stop one short: the last accepted node's KV "
           "is not moved"),
    Mutant("sglang-commit-bonus-at-root", *G, f"{SGK}/eagle.py",
           "    token = tl.load(predict + idx * PREDICT_STRIDE, valid, other=0)\n",
           "    token = tl.load(predict + row * 0 * PREDICT_STRIDE, valid, other=0)\n",
           "the fused commit reads every request's bonus from predict[0]"),
    Mutant("sglang-chain-coin-inclusive", *G, f"{SGK}/reject_sampling.py",
           "if q_is_prob & (coin * q < p):", "if q_is_prob & (coin * q <= p):",
           "the chain sampler accepts at coin * q == p: a zero coin accepts a draft of p = 0"),
    Mutant("sglang-draft-extend-select-off-by-one", *G, f"{SGK}/eagle.py",
           "tl.store(select + offset, offset * WIDTH + accepted - 1, offset < BS)",
           "tl.store(select + offset, offset * WIDTH + accepted, offset < BS)",
           "the drafter's next token sampled one past the last verified one"),
)


def scratch(release_dir: Path, root: Path) -> None:
    """root: a tree of symlinks to release_dir's files (directories made real)."""
    if root.exists():
        shutil.rmtree(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-as", str(release_dir.resolve()), str(root)], check=True)


def apply(root: Path, m: Mutant) -> Path:
    path = root / m.file
    text = path.resolve().read_text()
    if text.count(m.old) != 1:
        raise SystemExit(f"{m.id}: the text to change occurs {text.count(m.old)} times in "
                         f"{m.file} of {m.release}")
    path.unlink()
    path.write_text(text.replace(m.old, m.new))
    return path


def restore(root: Path, release_dir: Path, m: Mutant) -> None:
    path = root / m.file
    path.unlink()
    path.symlink_to((release_dir / m.file).resolve())


def apply_in_place(release_dir: Path, m: Mutant) -> str:
    """The mutant written into the release's own file; returns the original text."""
    path = release_dir / m.file
    text = path.read_text()
    if text.count(m.old) != 1:
        raise SystemExit(f"{m.id}: the text to change occurs {text.count(m.old)} times in "
                         f"{m.file} of {m.release}")
    path.write_text(text.replace(m.old, m.new))
    return text


def gate(adapter: str, root: Path | str) -> tuple[int, str, float]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-n", "2",
           "--pyargs", "harness.runners.test_kernel_laws", "--engine", f"{adapter}@{root}"]
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    out = proc.stdout + proc.stderr
    found = (re.search(r"\[kernel_\w+/\w+\][^\n]{0,200}", out)
             or re.search(r"\w+Error: [^\n]{0,200}", out))
    return proc.returncode, found.group(0) if found else out[-300:], time.time() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--scratch", default="/tmp/specdec-upstream-mutants")
    ap.add_argument("--in-place", action="store_true")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip the unmutated run (one that passed already on this machine)")
    args = ap.parse_args(argv)
    # A time limit's SIGTERM unwinds like an exception, so an in-place edit is restored.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    import torch
    chosen = [m for m in MUTANTS if (not args.only or m.id in args.only)
              and (torch.cuda.is_available() or not m.cuda)]
    caught = 0
    for (adapter, release) in dict.fromkeys((m.adapter, m.release) for m in chosen):
        dist = adapter.removesuffix("-kernels")
        release_dir = site_dir(dist, release)
        root = Path(args.scratch) / f"{dist}-{release}"
        if not args.in_place:
            scratch(release_dir, root)
        rc, why, took = ((0, "", 0.0) if args.no_baseline else
                         gate(adapter, release if args.in_place else root))
        where = "in place" if args.in_place else f"checkout {root}"
        print(f"baseline {adapter}@{release} ({where}): " + (
            "skipped (--no-baseline)" if args.no_baseline else f"rc {rc} in {took:.0f} s")
              + ("" if rc == 0 else f": {why}"), flush=True)
        if rc != 0:
            return 1
        for m in (m for m in chosen if (m.adapter, m.release) == (adapter, release)):
            if args.in_place:
                text = apply_in_place(release_dir, m)
                try:
                    rc, why, took = gate(adapter, release)
                finally:
                    (release_dir / m.file).write_text(text)
            else:
                apply(root, m)
                try:
                    rc, why, took = gate(adapter, root)
                finally:
                    restore(root, release_dir, m)
            caught += rc != 0
            print(f"{m.id}: {'caught' if rc else 'MISSED'} in {took:.0f} s"
                  + (f": {why}" if rc else f" ({m.why})"), flush=True)
    print(f"caught {caught} of {len(chosen)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

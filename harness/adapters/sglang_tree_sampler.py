"""SGLang's tree speculative sampler (tree_speculative_sampling_target_only), the default
sampled verify of its EAGLE tree: CUDA only. 0.5.23 JIT-compiles it from the wheel's own
sources (sglang/kernels/jit/csrc/speculative/sampling.cuh, which includes flashinfer's
sampling.cuh) with nvcc and ninja through tvm_ffi; older releases import it from sgl_kernel,
a compiled op a pack does not carry. On a GPU with nvcc, the adapter maps it as TREE_SAMPLING,
its inputs made as eagle_utils' verify makes them (coins as _verify_coins draws them: one per
node and one final coin per row; draft_probs zeros: the drafts are top-k, "target only").

What the JIT build needs beyond SGLang's import graph, carried by `harness foreign pack
--all-sources` into the release folder's `_jit_side/` (JIT_SIDE, JIT_DIRS), never as an
importable package (an importable flashinfer would turn on SGLang's flashinfer imports):
flashinfer's headers at the engine's pinned version (SGLang's dependency lookup,
jit/utils/deps.py, is pointed at them: its "flashinfer" entry of REGISTERED_DEPENDENCIES) and
the ninja binary (put on PATH). A machine with flashinfer and ninja installed needs neither."""
from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import torch

HOME = "sglang.kernels.ops.speculative.sampling:tree_speculative_sampling_target_only"
SIDE = "_jit_side"  # in the release folder: what the pack carries for the JIT build
JIT_SIDE = {"flashinfer-python": ("flashinfer/data/include/",),
            "ninja": ("bin/ninja",)}  # pip --target puts the binary in bin/
# Folders SGLang's flashinfer lookup requires to exist (only data/include is read here).
FLASHINFER_DIRS = ("include", "csrc", "cutlass/include", "cutlass/tools/util/include",
                   "spdlog/include")
JIT_DIRS = tuple(f"flashinfer/data/{d}" for d in FLASHINFER_DIRS[1:])


def _use_side_folder() -> None:
    """The carried side folder, where there is one: ninja on PATH, SGLang's flashinfer
    dependency pointed at the carried headers."""
    import sglang
    side = Path(sglang.__file__).resolve().parents[1] / SIDE
    if not side.is_dir():
        return
    os.environ["PATH"] = str(side / "bin") + os.pathsep + os.environ.get("PATH", "")
    if importlib.util.find_spec("flashinfer") is None:
        from sglang.kernels.jit.utils import deps
        data = side / "flashinfer" / "data"
        deps.REGISTERED_DEPENDENCIES["flashinfer"] = lambda: [str(data / d)
                                                              for d in FLASHINFER_DIRS]


def jit_missing() -> list[str]:
    """What the JIT build lacks here (empty when it can build)."""
    _use_side_folder()
    missing = [tool for tool in ("nvcc", "ninja") if shutil.which(tool) is None]
    try:
        from sglang.kernels.jit.utils import deps
        deps.REGISTERED_DEPENDENCIES["flashinfer"]()
    except (ImportError, KeyError, RuntimeError) as exc:
        missing.append(f"flashinfer's headers ({exc})")
    if importlib.util.find_spec("tvm_ffi") is None:
        missing.append("tvm_ffi (apache-tvm-ffi)")
    return missing


def why_absent(device: str, fn) -> str | None:
    """None where the sampler can run on `device`, else why not."""
    if device != "cuda":
        return (
            "SGLang's tree sampler (tree_speculative_sampling_target_only) is CUDA only: "
            "0.4.6-0.5.19 import it from sgl_kernel (a compiled CUDA op); 0.5.23 JIT-compiles "
            "kernels/jit/csrc/speculative/sampling.cuh; no Triton or CPU twin exists (SGLang "
            "verifies greedily on CPU). `--device cuda` maps the JIT one where nvcc is present")
    if fn is None:
        return ("this release's tree sampler is sgl_kernel's compiled op (before 0.5.23), "
                "which a pack does not carry; only the JIT-compiled one (0.5.23+) is mapped")
    missing = jit_missing()
    return (f"the JIT tree sampler cannot build here: {', '.join(missing)} missing"
            if missing else None)


def tree_sampling(fn, *, device: str, candidates, retrieve_index, next_token, next_sibling,
                  target_probs, seed, num_steps) -> dict:
    from harness.adapters import sglang_forms as F
    bs, ndt = candidates.shape
    gen = torch.Generator().manual_seed(seed)
    coins, final = torch.rand(bs, ndt, generator=gen), torch.rand(bs, generator=gen)
    p = target_probs.float().to(device)
    # As eagle_utils' verify allocates them (predict, accept_index, num_correct_drafts).
    pred = torch.zeros(bs * ndt, dtype=torch.int32, device=device)
    acc = torch.full((bs, num_steps + 1), -1, dtype=torch.int32, device=device)
    num = torch.zeros(bs, dtype=torch.int32, device=device)
    dev = lambda t: t.to(device)  # noqa: E731
    fn(predicts=pred, accept_index=acc, accept_token_num=num, candidates=dev(candidates),
       retrive_index=dev(retrieve_index), retrive_next_token=dev(next_token),
       retrive_next_sibling=dev(next_sibling), uniform_samples=dev(coins),
       uniform_samples_for_final_sampling=dev(final), target_probs=p,
       draft_probs=torch.zeros_like(p), threshold_single=1.0, threshold_acc=1.0,
       deterministic=True)
    return {"accept_index": acc.cpu(), "accept_len": num.cpu(),
            "tokens": F.tree_tokens(pred, acc, num)}

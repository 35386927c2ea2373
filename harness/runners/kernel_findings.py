"""What a kernel finding script (docs/findings/<engine>_*.py) runs: its law on its recorded
case, on the release named on its command line (default: the release it was found on),
installed first when missing. Exit 1 while the finding reproduces, 0 when the law holds:
`python docs/findings/vllm_0_9_zero_coin_accepts_zero_prob.py 0.11.0` tells whether a
release has it."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from harness.base.failure import OracleFailure
from harness.runners.kernel_suite import run_case
from harness.strategies.kernel_inputs import KernelCase


FINDINGS = Path(__file__).resolve().parents[2] / "docs" / "findings"


def finding_scripts(engine: str | None = None) -> dict:
    """name -> the finding script's module (LAW, ENGINE, SEED, KNOBS, REPRODUCED_ON,
    DEVICE), for every kernel finding in docs/findings (of `engine` when given); empty
    where this checkout has no docs/findings (an installed package)."""
    out = {}
    for path in sorted(FINDINGS.glob("*.py")) if FINDINGS.is_dir() else ():
        if not path.stem.startswith(("sglang_", "vllm_")):
            continue
        spec = importlib.util.spec_from_file_location(f"finding_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if engine is None or module.ENGINE == engine:
            out[path.stem] = module
    return out


def reproduces(law: str, engine: str, seed: int, knobs: dict,
               device: str | None = None) -> str | None:
    """The law's failure on the case (its message), or None when the law holds there; on
    the GPU when there is one (compiled Triton), else under the interpreter."""
    from harness.adapters.registry import get_kernels
    from harness.strategies.runs import default_device
    device = device or default_device()
    case = KernelCase(law=law, engine=engine, seed=seed, knobs=knobs)
    drawn_around = os.environ.get("SPECDEC_KNOWN_FINDINGS")
    os.environ["SPECDEC_KNOWN_FINDINGS"] = "include"  # the finding's own case is the point
    try:
        run_case(get_kernels(engine, device), case, device)
    except OracleFailure as exc:
        return str(exc)
    finally:
        if drawn_around is None:
            del os.environ["SPECDEC_KNOWN_FINDINGS"]
        else:
            os.environ["SPECDEC_KNOWN_FINDINGS"] = drawn_around
    return None


def main(law: str, *, engine: str, found_on: str, seed: int, knobs: dict,
         device: str | None = None) -> None:
    release = sys.argv[1] if len(sys.argv) > 1 else found_on
    failure = reproduces(law, f"{engine}@{release}", seed, knobs, device)
    print(f"{engine}@{release}: " + (f"REPRODUCED {failure}" if failure
                                     else f"{law} holds on the recorded case"))
    sys.exit(1 if failure else 0)

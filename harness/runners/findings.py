"""What every finding script under docs/findings/ shares: its law replayed on the recorded
case through a fresh adapter (no state from earlier calls), and the script's exit rule
(prints the verdict; exit 1 while the finding reproduces, 0 once the law holds)."""
from __future__ import annotations

import sys

from harness.adapters.registry import adapter_class
from harness.base.failure import OracleFailure
from harness.strategies.engine_cases import EngineCase


def replay(law, case: dict, device: str = "cpu") -> str | None:
    """None when `law` (a module with NAME and check) holds on the recorded case, else its
    failure message."""
    c = EngineCase.from_dict(case)
    try:
        law.check(adapter_class(c.engine).build(device, **c.settings), c)
    except OracleFailure as exc:
        return str(exc)
    return None


def law_holds(law, case: dict, demonstration: str) -> tuple[bool, str]:
    """(the law holds on the case, the verdict followed by the script's demonstration)."""
    failure = replay(law, case)
    verdict = failure or f"{law.NAME} passes on the recorded case"
    return failure is None, f"{verdict}\n  {demonstration}"


def main(law_holds_fn, changed: str = "law holds (fixed upstream?)") -> None:
    ok, what = law_holds_fn()
    print((f"{changed}: " if ok else "reproduced: ") + what)
    sys.exit(0 if ok else 1)

"""What every law shares: OracleFailure, the exception a failing check raises. It names the
law that defines the check and the check itself (docs/contract.md, Glossary), so the zoo and
`harness check` can say which comparison caught a fault, not only which property failed."""
from __future__ import annotations


class OracleFailure(AssertionError):
    """`law`: the law whose check failed (a law may run another's checks: prefix_transparent
    runs kv_content's); `check`: the comparison, the law's own name where the law makes one
    comparison; `detail`: the first violation, with where it happened."""

    def __init__(self, law: str, check: str, detail: str) -> None:
        super().__init__(f"[{law}/{check}] {detail}" if check != law else f"[{law}] {detail}")
        self.law, self.check, self.detail = law, check, detail

"""What every law shares: OracleFailure, the exception a law raises naming its first
violation (the zoo and `harness check` read `.oracle` to say which law caught a fault)."""
from __future__ import annotations


class OracleFailure(AssertionError):
    def __init__(self, oracle: str, detail: str) -> None:
        super().__init__(f"[{oracle}] {detail}")
        self.oracle, self.detail = oracle, detail

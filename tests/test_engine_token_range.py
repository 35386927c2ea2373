"""Negative control of engine_token_range: an adapter whose vocabulary gather adds the upper
shard's offset twice (the ids of the second half of the vocabulary come out shifted past V)
is rejected, on both built-in adapters, greedy and sampled; the adapter it wraps passes the
same case."""
from __future__ import annotations

from dataclasses import replace

import pytest

from harness.adapters.registry import get_adapter
from harness.base.failure import OracleFailure
from harness.laws.engine_token_range import check
from harness.strategies.engine_cases import EngineCase
from test_adapters_not_vacuous import SETTINGS, SPECS  # the same small adapters and specs


class ShardOffsetTwice:
    """Forwards to `inner`; its gather adds the upper half's offset a second time."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def generate(self, requests, spec):
        half = self.inner.vocab_size // 2
        return [replace(c, tokens=[t + half if t >= half else t for t in c.tokens])
                for c in self.inner.generate(requests, spec)]


@pytest.mark.parametrize("engine", ["transformers", "specdec"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_ids_past_the_vocabulary_are_rejected(engine, temperature):
    adapter = get_adapter(engine, "cpu", SETTINGS[engine])
    case = EngineCase(engine=engine, settings=SETTINGS[engine], spec=SPECS[engine].to_dict(),
                      seed=11, batch_size=min(3, adapter.max_batch), max_prompt_len=8,
                      max_new_tokens=12, temperature=temperature)
    assert check(adapter, case)["tokens"] > 0  # the engine itself passes
    with pytest.raises(OracleFailure) as info:
        check(ShardOffsetTwice(adapter), case)
    assert info.value.check == "engine_token_range", info.value

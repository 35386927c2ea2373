"""The sampled-distribution law's cells (harness/strategies/engine_cases.py _knobs): top-k and
top-p cuts in float32 settings only, every temperature in every dtype."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.strategies.configs import TOP_KS, TOP_PS
from harness.strategies.engine_cases import _knobs


@settings(max_examples=60, database=None, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(("float32", "bfloat16", "float16")))
def test_reduced_precision_draws_no_cut(data, dtype):
    t, k, p = data.draw(_knobs(True, {"dtype": dtype}, cuts_in_float32=True))
    assert t > 0
    if dtype != "float32":
        assert (k, p) == (0, 1.0)


def test_float32_draws_every_cut():
    """The control: the same strategy in float32 reaches every top-k and top-p."""
    seen = set()

    @settings(max_examples=300, database=None, deadline=None)
    @given(knob=_knobs(True, {"dtype": "float32"}, cuts_in_float32=True))
    def draw(knob):
        seen.add(knob[1:])
    draw()
    assert {k for k, _ in seen} == set(TOP_KS) and {p for _, p in seen} == set(TOP_PS)

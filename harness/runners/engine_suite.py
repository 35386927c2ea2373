"""The black-box laws over adapters, defined once: `python -m harness check --engine NAME`,
`python -m harness repro`, and pytest (harness/runners/test_engine_laws.py, `--engine NAME`)
run the same laws, case strategies and applicability rule.

A law serves an adapter when the adapter declares every observable in the law's NEEDS; the
others are reported as "not applicable: needs X" and never count as passed. specdec's
white-box laws (the RunConfig suite) need WHITE_BOX, which only specdec's adapter has."""
from __future__ import annotations

import json

from hypothesis import HealthCheck, Phase, given, settings

from harness.adapters.applicability import not_applicable as _not_applicable
from harness.adapters.protocol import Observable
from harness.adapters.registry import default_adapter
from harness.base import stop
from harness.laws.index import black_box
from harness.runners import parts
from harness.strategies.engine_cases import EngineCase

ENGINE_LAWS = black_box()  # name -> declaration (check, cases, needs; harness/laws/)
WHITE_BOX = frozenset({Observable.WHITE_BOX})
# Examples per law in plain `pytest` on CPU (the CI tier): a few seconds per law and engine.
CPU_EXAMPLES = {"specdec": 5, "transformers": 5}
# Laws that run N requests per example declare a fraction of the examples, and take fewer
# again on an adapter that cannot batch: its N requests are N generate() calls (8 examples
# of 400 such calls outran pytest's 300 s per test on a shared GPU).
FRACTION = {name: law.fraction for name, law in ENGINE_LAWS.items()}
UNBATCHED_FRACTION = 4


def phases(law: str) -> list[Phase]:
    """The Hypothesis phases a law's failing examples go through."""
    return ENGINE_LAWS[law].phases


def missing(needs: frozenset, adapter) -> list[str]:
    """The observables a law needs that the adapter does not offer, by name."""
    return sorted(o.value for o in needs - adapter.observables)


def not_applicable(needs: frozenset, adapter) -> str | None:
    return _not_applicable(needs, adapter.observables, getattr(adapter, "why_not", {}))


def repro_command(law: str, case: EngineCase, device: str) -> str:
    return (f"python -m harness repro {law} --device {device} "
            f"--config '{json.dumps(case.to_dict(), sort_keys=True)}'")


def run_case(law: str, case: EngineCase, device: str):
    """One case of one law, the replay line attached to any failure."""
    try:
        return ENGINE_LAWS[law].check(case.adapter(device), case)
    except Exception as exc:
        exc.add_note(f"replay: {repro_command(law, case, device)}")
        raise


def law_test(law: str, *, engine: str, device: str, max_examples: int | None = None,
             profile: settings | None = None, part: tuple[int, int] = (0, 1)):
    """The Hypothesis test of one law on one engine (test_engine_laws.py runs it); `part`
    (k, of): the k-th of `of` tests sharing the law's examples (the law's `parts`), each
    drawing its share from a seed of its own."""
    mod = ENGINE_LAWS[law]

    @given(case=mod.cases(engine, device))
    def test(case):
        stop.check()  # a red gate ends this test between examples
        run_case(law, case, device)
    base = profile or settings.default
    fraction = FRACTION[law]
    if fraction > 1 and Observable.BATCHING not in default_adapter(engine, device).observables:
        fraction *= UNBATCHED_FRACTION
    n = max_examples or max(2, base.max_examples // fraction)
    k, of = part
    n = parts.share(n, of)
    test = parts.seeded(test, f"{law}/{engine}", k, of, base)
    return settings(base, max_examples=n, deadline=None, phases=phases(law),
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.data_too_large])(test)


def applicability(engine: str, device: str) -> dict[str, str | None]:
    """law -> None (it runs) or the "not applicable: needs X" line."""
    adapter = default_adapter(engine, device)
    return {name: not_applicable(m.needs, adapter) for name, m in ENGINE_LAWS.items()}

"""A law's one declaration: `LAW = Law(...)` at the end of its module holds everything the
runners need (pytest, `python -m harness check`, the zoo, `repro`, the docs index read it and
nothing else; harness/laws/index.py finds them). docs/adding-a-law.md walks through one.

Two shapes, told apart by what the law runs on:
- white box: `prop(config, device)` over specdec's own configuration space (a RunConfig or
  the law's own config type): it may read the engine's internals (rounds, KV pools, graph
  buffers) through the trace. Use it for what only an engine's internals can show.
- black box: `check(adapter, case)` over any engine adapter (harness/adapters/), needing only
  the observables it names in `needs`. Use it for what every engine must do, seen from
  outside; it then runs on specdec, transformers and any adapter a user registers.
- kernel (`door="kernels"`): `check(kernels, case)` over a kernel adapter
  (harness/adapters/): one speculative component of an engine, called directly, its
  `needs` the Components it calls. It runs on specdec's, SGLang's and vLLM's own kernels."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

from hypothesis import Phase


@dataclass(frozen=True)
class Slice:
    """One entry's share of a white-box law's space: the coarse axes it fixes (so xdist
    spreads the slices over workers) and the fraction of the profile's examples it draws
    (laws that run the engine several times per example draw fewer)."""

    axes: tuple = ()  # ((axis, value), ...)
    fraction: int = 1


def grid(fraction: int = 1, **axes) -> tuple[Slice, ...]:
    """Every combination of the given axis values, the last axis varying fastest."""
    names = list(axes)
    return tuple(Slice(tuple(zip(names, values)), fraction)
                 for values in itertools.product(*axes.values()))


@dataclass(frozen=True)
class Law:
    name: str
    summary: str              # what must hold, one line (the docs index, docs/laws.md)
    # Negative controls: where a planted mistake is shown to fail this law, each
    # "tests/<file>.py::<test>" or "cases/<fault>" (a zoo case whose law this is).
    controls: tuple
    rank: int                 # runners go through laws in ascending rank: cheap, broad laws
    #                           first, so the zoo's first failure comes early
    # White box.
    prop: Callable | None = None          # (config, device) -> None, raises OracleFailure
    strategy: Callable | None = None      # (on_gpu, fixed axes) -> strategy of configs
    config: type | None = None            # the configuration type prop takes
    slices: tuple = (Slice(),)            # the pytest entries
    examples: tuple = ()                  # explicit examples of its own, besides the cases'
    # False: a failing example is reported as drawn. Shrinking reruns it hundreds of times,
    # and where each run builds and captures an engine that outlasts pytest's time-out.
    shrink: bool = True
    nested: bool = False                  # prop runs Hypothesis itself (a stateful machine)
    # Black box.
    check: Callable | None = None         # (adapter, case) -> stats, raises OracleFailure
    cases: Callable | None = None         # (engine name, device) -> strategy of EngineCases
    needs: frozenset = frozenset()        # the adapter observables it needs
    fraction: int = 1                     # a black-box law's share of the profile's examples
    # On a GPU, a black-box law's examples split over this many pytest tests that run side
    # by side (each draws its share, from a seed of its own): no single test outlasts the
    # gate's 60 s while the law draws as many examples as one test would.
    parts: int = 1
    door: str = "engine"                  # "kernels": a kernel law (needs are Components)

    def __post_init__(self) -> None:
        if (self.prop is None) == (self.check is None):
            raise ValueError(f"law {self.name}: declare either prop (white box) or check "
                             "(black box), not both or neither")
        if self.prop is not None and (self.strategy is None or self.config is None):
            raise ValueError(f"law {self.name}: a white-box law needs strategy and config")
        if self.check is not None and self.cases is None:
            raise ValueError(f"law {self.name}: a black-box law needs cases")
        if self.door not in ("engine", "kernels") or (self.door == "kernels" and self.prop):
            raise ValueError(f"law {self.name}: door={self.door!r}: expected 'engine', or "
                             "'kernels' with check and cases")
        if not isinstance(self.parts, int) or self.parts < 1:
            raise ValueError(f"law {self.name}: parts={self.parts!r}: expected an integer >= 1")
        if not self.controls:
            raise ValueError(f"law {self.name}: no negative control; a law that cannot be "
                             "shown to fail proves nothing")

    @property
    def black_box(self) -> bool:
        return self.check is not None and self.door == "engine"

    @property
    def kernel(self) -> bool:
        return self.door == "kernels"

    @property
    def phases(self) -> list[Phase]:
        """The Hypothesis phases its failing examples go through."""
        return [Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if self.shrink
                                                                else [])

"""The transformers adapter keeps its hands off the global random generators.

A seeded request's sampling stream is the one `torch.manual_seed(seed)` starts, on every
device. The adapter builds drafters lazily, possibly inside a seeded call; building one must
not reseed or advance any generator the request samples from. On a GPU, reseeding CUDA there
made engine_seeded_determinism fail on the first call of a case (the drafter was built after
the seed); the CUDA reseed is observable on the CPU through torch.cuda.manual_seed_all."""
from __future__ import annotations

import torch

from harness.adapters.protocol import Request, Spec
from harness.adapters.transformers_assisted import TransformersAdapter


def test_building_drafters_touches_no_global_generator(monkeypatch):
    reseeded = []
    monkeypatch.setattr(torch.cuda, "manual_seed_all", lambda s: reseeded.append(s))
    monkeypatch.setattr(torch.cuda, "manual_seed", lambda s: reseeded.append(s))
    adapter = TransformersAdapter("cpu")
    before = torch.get_rng_state()
    for name in ("other", "self", "perturbed:0.1"):
        adapter.drafter(name, "heuristic")
    assert torch.equal(torch.get_rng_state(), before), "the CPU generator moved"
    assert reseeded == [], f"the CUDA generators were reseeded with {reseeded}"


def test_first_call_samples_as_later_calls():
    """The same seeded request twice on a fresh adapter: the first call builds the drafter."""
    adapter = TransformersAdapter("cpu")
    req = Request((3, 1, 4), 12, temperature=1.5, seed=91)
    spec = Spec("other", 3, extra=(("schedule", "heuristic"), ("confidence", 0.0)))
    first = adapter.generate([req], spec)[0].tokens
    assert adapter.generate([req], spec)[0].tokens == first

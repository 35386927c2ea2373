"""Sampled generation in the engine: seeds reproduce, a request's tokens do not depend on what
shares its batch, greedy rows are untouched by sampled neighbours, the plain-decode baseline
and the graph stand-in sample the same tokens, ids stay inside odd-sized vocabularies.

Token equality across batch sizes holds on CPU eager torch (a row's logits do not depend on
other rows); on GPU, graphs pad shapes, so these are CPU assertions.
"""
from __future__ import annotations

import pytest

from harness.strategies.runs import default_device, make_prompts
from specdec import Engine, SpecConfig
from specdec.config import ModelConfig
from specdec.sampling_params import SamplingParams as SP

DEVICE = default_device()
SPECS = {"none": None, "chain": SpecConfig(topk=1, num_steps=3),
         "tree": SpecConfig(topk=2, num_steps=3, num_draft_tokens=6)}
PROMPTS = make_prompts(seed=11, batch_size=4, vocab_size=320, max_len=12)
N = 12


def engine(spec: str, **kw) -> Engine:
    return Engine(model="tiny", spec=SPECS[spec], device=DEVICE, max_batch=6, max_context=64, **kw)


@pytest.fixture(scope="module", params=list(SPECS))
def eng(request):
    return engine(request.param)


def test_seed_reproducible(eng):
    a = eng.generate(PROMPTS, max_new_tokens=N, temperature=1.0, seed=5)
    assert a == eng.generate(PROMPTS, max_new_tokens=N, temperature=1.0, seed=5)
    assert a != eng.generate(PROMPTS, max_new_tokens=N, temperature=1.0, seed=6)
    # seed=None derives per-request seeds from the engine seed and the request id (ids
    # advance across calls, so compare two fresh engines).
    fresh = [Engine(model="tiny", spec=eng.spec, device=DEVICE, max_batch=6, max_context=64)
             for _ in range(2)]
    outs = [f.generate(PROMPTS, max_new_tokens=N, temperature=1.0) for f in fresh]
    assert outs[0] == outs[1]
    assert all(0 <= t < 320 for o in a for t in o)
    eng.check_accounting()


def test_batch_composition_invariance(eng):
    """A request's sampled tokens are the same alone and beside others (greedy, other seeds,
    top-k / top-p neighbours), at any position in the batch."""
    me = SP(1.0, top_k=20, top_p=0.95, seed=123)
    alone = eng.generate([PROMPTS[0]], max_new_tokens=N, sampling=[me])[0]
    others = [SP(), SP(1.3, seed=7), SP(0.8, top_k=5, seed=9)]
    for where in (0, 3):
        sp = others[:where] + [me] + others[where:]
        prompts = PROMPTS[1:][:where] + [PROMPTS[0]] + PROMPTS[1:][where:]
        assert eng.generate(prompts, max_new_tokens=N, sampling=sp)[where] == alone


def test_greedy_unchanged_beside_sampled(eng):
    greedy = eng.generate(PROMPTS, max_new_tokens=N)
    mixed = eng.generate(PROMPTS, max_new_tokens=N, sampling=[SP(), SP(1.0, seed=1), SP(), SP(2.0, seed=2)])
    assert mixed[0] == greedy[0] and mixed[2] == greedy[2]
    assert mixed[1] != greedy[1] or mixed[3] != greedy[3]  # sampling did something


def test_first_token_same_with_and_without_spec():
    """The prefill token's coin is keyed by (seed, position) alone: the speculative engine and
    the plain-decode baseline draw the same first token from the same target."""
    firsts = [[o[0] for o in engine(s).generate(PROMPTS, max_new_tokens=1, temperature=1.0, seed=40)]
              for s in SPECS]
    assert firsts[0] == firsts[1] == firsts[2]


@pytest.mark.skipif(DEVICE == "cuda", reason="graphs pad shapes: not bitwise vs eager on GPU")
@pytest.mark.parametrize("spec", list(SPECS))
def test_graph_standin_samples_like_eager(spec):
    sp = [SP(1.0, seed=3), SP(), SP(1.5, top_k=10, seed=4), SP(0.7, top_p=0.8, seed=5)]
    eager = engine(spec).generate(PROMPTS, max_new_tokens=N, sampling=sp)
    graph = engine(spec, cuda_graph=True, cuda_graph_bs=[1, 2, 4])
    assert graph.generate(PROMPTS, max_new_tokens=N, sampling=sp) == eager
    assert graph.generate(PROMPTS[:3], max_new_tokens=N, sampling=sp[:3]) == eager[:3]  # padded replay


@pytest.mark.parametrize("vocab", [100, 8193])
def test_ids_below_odd_vocab(vocab):
    cfg = ModelConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_layers=1,
                      num_heads=2, num_kv_heads=1, head_dim=16)
    prompts = make_prompts(seed=vocab, batch_size=3, vocab_size=vocab, max_len=6)
    for spec in (None, SpecConfig(topk=2, num_steps=2, num_draft_tokens=4)):
        eng = Engine(model=cfg, spec=spec, device=DEVICE, max_batch=3, max_context=32)
        out = eng.generate(prompts, max_new_tokens=10, temperature=1.0, seed=vocab)
        assert all(0 <= t < vocab for o in out for t in o), out

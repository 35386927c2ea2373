"""Bad input gets a clear error naming the value and what is allowed."""
from __future__ import annotations

import numpy as np
import pytest

from specdec import Engine, SpecConfig
from specdec.sampling_params import SamplingParams


@pytest.mark.parametrize("kwargs,match", [
    (dict(topk=2, num_steps=3, num_draft_tokens=12), r"num_draft_tokens=12 is not in \[2, 11\]"),
    (dict(topk=1, num_steps=3, num_draft_tokens=3), r"must equal num_steps \+ 1 = 4"),
    (dict(topk=0, num_steps=3), r"topk=0 must be >= 1"),
    (dict(topk=1, num_steps=0), r"num_steps=0 must be >= 1"),
    (dict(topk=2, num_steps=3), r"num_draft_tokens must be given"),
])
def test_bad_spec_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SpecConfig(**kwargs)


def test_topk_larger_than_vocab():
    with pytest.raises(ValueError, match=r"topk=400 exceeds the vocabulary size 320"):
        Engine(spec=SpecConfig(topk=400, num_steps=1, num_draft_tokens=3))


@pytest.mark.parametrize("page_size", [0, 3, 12, 128])
def test_bad_page_size(page_size):
    with pytest.raises(ValueError, match=rf"page_size={page_size}: must be a power of two"):
        Engine(page_size=page_size)


@pytest.mark.parametrize("kwargs,match", [
    (dict(model="gpt-5"), r"unknown model shape 'gpt-5'"),
    (dict(dtype="int8"), r"dtype='int8'"),
    (dict(draft="nonsense", spec=SpecConfig()), r"draft='nonsense'"),
    (dict(attention="flash"), r"attention='flash'"),
])
def test_bad_engine_args(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Engine(**kwargs)


@pytest.fixture(scope="module")
def engine():
    return Engine(model="tiny", spec=SpecConfig(topk=2, num_steps=3, num_draft_tokens=5),
                  max_batch=4, max_context=64)


@pytest.mark.parametrize("prompts,kwargs,match", [
    ([], {}, r"empty batch"),
    ([[1, 2], []], {}, r"prompt 1 is empty"),
    ([[1, 320]], {}, r"prompt 0 token 1 = 320 is outside the vocabulary \[0, 320\)"),
    ([[1, -1]], {}, r"token 1 = -1 is outside"),
    ([[1.5, 2]], {}, r"prompt 0 token 0 = 1\.5 \(float\) is not a token id: "
                     r"token ids are integers in \[0, 320\)"),
    ([[1], [2, 3.0]], {}, r"prompt 1 token 1 = 3\.0 \(float\).*integers in \[0, 320\)"),
    ([[1, True]], {}, r"token 1 = True \(bool\).*integers in \[0, 320\)"),
    ([[np.float32(7)]], {}, r"token 0 = [^ ]*7\.0\)? \(float32\).*integers in \[0, 320\)"),
    ([["7"]], {}, r"token 0 = '7' \(str\).*integers in \[0, 320\)"),
    ([[1]] * 5, {}, r"5 prompts exceed the engine's max_batch=4"),
    ([[1] * 60], {}, r"prompt 0 has 60 tokens.*more than max_context=64"),
    ([[1]], dict(max_new_tokens=0), r"max_new_tokens=0"),
    ([[1]], dict(temperature=-1), r"temperature=-1"),
    ([[1]], dict(temperature=float("nan")), r"temperature=nan"),
    ([[1]], dict(temperature=1.0, top_p=0), r"top_p=0"),
    ([[1]], dict(temperature=1.0, top_p=1.5), r"top_p=1.5"),
    ([[1]], dict(temperature=1.0, top_k=-1), r"top_k=-1"),
    ([[1]], dict(temperature=1.0, top_k=321), r"top_k=321 exceeds the vocabulary size 320"),
    ([[1], [2]], dict(sampling=[SamplingParams(1.0)] * 3), r"3 SamplingParams for 2 prompts"),
])
def test_bad_prompts(engine, prompts, kwargs, match):
    with pytest.raises(ValueError, match=match):
        engine.generate(prompts, **kwargs)
    engine.check_accounting()  # a refused batch leaves nothing allocated


def test_float_token_refused_by_add_request(engine):
    with pytest.raises(ValueError, match=r"prompt token 1 = 2\.5 \(float\).*integers in \[0, 320\)"):
        engine.add_request([1, 2.5])
    engine.check_accounting()


def test_numpy_integer_tokens_are_token_ids(engine):
    """NumPy integers are integers: the same prompt as Python ints gives the same output."""
    assert (engine.generate([np.array([5, 9, 2], dtype=np.int64).tolist()], max_new_tokens=4)
            == engine.generate([[np.int32(5), np.int64(9), np.uint8(2)]], max_new_tokens=4))


def test_out_of_pages_refuses_cleanly():
    """A batch that cannot fit in the KV pool is refused, and nothing stays allocated."""
    from specdec.memory.allocator import OutOfSlots
    eng = Engine(model="tiny", spec=SpecConfig(topk=1, num_steps=3), num_pages=40, max_context=128)
    with pytest.raises(OutOfSlots, match=r"need \d+ pages in the worst case"):
        eng.generate([[1] * 30, [2] * 30], max_new_tokens=8)
    eng.check_accounting()
    assert eng.generate([[1, 2, 3]], max_new_tokens=4)  # still usable

"""Bad input to the adapter layer: a clear error naming the value and what is allowed."""
from __future__ import annotations

import pytest

from harness.adapters.protocol import Request, Spec
from harness.adapters.registry import adapter_class, get_adapter
from harness.adapters.transformers_assisted import TransformersAdapter
from harness.runners.cli import main


@pytest.mark.parametrize("kwargs, match", [
    (dict(prompt=(), max_new_tokens=4), r"prompt=\(\): a request needs at least one"),
    (dict(prompt=(1,), max_new_tokens=0), r"max_new_tokens=0: expected an integer >= 1"),
    (dict(prompt=(1,), max_new_tokens=4, top_p=0.0), r"top_p=0.0: need .*0 < top_p <= 1"),
    (dict(prompt=(1,), max_new_tokens=4, temperature=1.0), r"needs a seed"),
])
def test_bad_requests(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Request(**kwargs)


def test_unknown_engine_names_the_choices():
    with pytest.raises(ValueError, match=r"--engine 'nope': expected one of \['specdec', "
                                         r"'transformers'\].*module:Class"):
        adapter_class("nope")
    with pytest.raises(ValueError, match=r"cannot load no_such_module:X"):
        adapter_class("no_such_module:X")
    with pytest.raises(SystemExit):
        main(["check", "--engine", "nope", "--budget", "1"])


def test_transformers_adapter_refuses_what_it_cannot_run():
    with pytest.raises(ValueError, match=r"dtype='bfloat16' is drawn on CUDA only"):
        TransformersAdapter("cpu", "bfloat16")
    with pytest.raises(ValueError, match=r"pad_token_id=999: expected None or a token id"):
        TransformersAdapter("cpu", pad_token_id=999)
    adapter = get_adapter("transformers", "cpu", {})
    with pytest.raises(ValueError, match=r"topk=2: assisted generation drafts chains"):
        adapter.generate([Request((1, 2), 3)], Spec("other", 2, 2))
    with pytest.raises(ValueError, match=r"drafter='medusa': expected one of"):
        adapter.generate([Request((1, 2), 3)], Spec("medusa", 2))
    with pytest.raises(ValueError, match=r"2 requests: this adapter runs at most 1 at once"):
        adapter.generate([Request((1,), 2), Request((2,), 2)], None)

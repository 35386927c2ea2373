"""A logit bias carried by the model (`NAME+bias:ID=VALUE,...`, ModelConfig.logit_bias):
parsed with errors that name the bad entry, added to the LM head's logits of the target and
of every drafter that shares or copies it, split with the LM head's rows under TP."""
from __future__ import annotations

import pytest
import torch

from specdec import Engine, SpecConfig
from specdec.config import MODEL_SHAPES, model_config
from specdec.tp.comm import TPComm


def test_biased_name_parses():
    cfg = model_config("tiny+bias:0=9,319=-2.5")
    assert cfg.logit_bias == ((0, 9.0), (319, -2.5))
    assert cfg.vocab_size == MODEL_SHAPES["tiny"].vocab_size
    assert model_config("tiny").logit_bias == ()


@pytest.mark.parametrize("name,match", [
    ("tiny+bias:320=1", r"\(320, 1.0\).*\[0, 320\)"),
    ("tiny+bias:-1=1", r"\(-1, 1.0\)"),
    ("tiny+bias:0=inf", "finite"),
    ("tiny+bias:0", "not ID=VALUE"),
    ("tiny+bias:a=1", "not ID=VALUE"),
    ("tiny+bias:", "not ID=VALUE"),
    ("tiny+bias:3=1,3=2", "biased twice"),
    ("huge+bias:0=1", "unknown model shape 'huge"),
])
def test_bad_bias_is_named(name, match):
    with pytest.raises(ValueError, match=match):
        model_config(name)
    with pytest.raises(ValueError, match=match):
        Engine(model=name, spec=None)


def test_bias_moves_the_logits_it_names_and_no_other():
    plain = Engine(model="tiny", spec=None, seed=4)
    biased = Engine(model="tiny+bias:7=3.5,300=-1", spec=None, seed=4)
    h = torch.randn(5, plain.cfg.hidden_size)
    diff = biased.target.compute_logits(h) - plain.target.compute_logits(h)
    want = torch.zeros(plain.cfg.vocab_size)
    want[7], want[300] = 3.5, -1.0
    assert torch.equal(diff[:, want == 0], torch.zeros(5, plain.cfg.vocab_size - 2))
    torch.testing.assert_close(diff, want.expand(5, -1), rtol=0, atol=1e-5)


@pytest.mark.parametrize("draft", ["eagle", "self", "perturbed"])
def test_drafters_carry_the_targets_bias(draft):
    eng = Engine(model="tiny+bias:0=30", spec=SpecConfig(topk=1, num_steps=3, num_draft_tokens=4),
                 draft=draft, seed=2)
    out = eng.generate([[5, 6, 7]], max_new_tokens=8)[0]
    assert out == [0] * 8  # a bias of 30 outweighs every other logit of the tiny model
    assert eng.stats.accepted == eng.stats.drafted  # every draft was 0 as well


def test_bias_is_split_with_the_lm_head_rows():
    """shard_model keeps each rank's rows of the bias, as of the LM head (an odd vocabulary:
    161 + 160 rows), so the gathered logits carry the whole bias once."""
    from specdec.model.llama import LlamaModel
    from specdec.tp.shard import shard_model
    cfg = model_config("tiny-odd+bias:0=1,160=2,161=3,320=4")
    full = LlamaModel(cfg).logit_bias
    parts = []
    for rank in range(2):
        comm = TPComm.__new__(TPComm)  # the rows rule only: no process group is needed
        comm.rank, comm.world = rank, 2
        model = shard_model(LlamaModel(cfg), comm)
        assert model.logit_bias.shape[0] == model.lm_head.weight.shape[0]
        parts.append(model.logit_bias)
    assert torch.equal(torch.cat(parts), full)
    assert [float(p[0]) for p in parts] == [1.0, 3.0]

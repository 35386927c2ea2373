"""Bad checkpoints fail clearly: unsupported architectures and configs, missing, unexpected
and misshapen tensors, a draft that does not fit its target, paths that are not checkpoints."""
from __future__ import annotations

import json
import os
import shutil

import pytest
import torch

transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

from checkpoint_models import ckpts, engine, seeded_head  # noqa: E402,F401
from specdec import Engine, SpecConfig  # noqa: E402
from specdec.loading import save_eagle_head  # noqa: E402


def edited_copy(src: str, dst, config=None, tensors=None) -> str:
    """Copy checkpoint `src` (one safetensors file) to dst, editing config.json and tensors."""
    shutil.copytree(src, dst)
    if config is not None:
        with open(os.path.join(dst, "config.json")) as f:
            raw = json.load(f)
        config(raw)
        with open(os.path.join(dst, "config.json"), "w") as f:
            json.dump(raw, f)
    if tensors is not None:
        file = os.path.join(dst, "model.safetensors")
        sd = safetensors_torch.load_file(file)
        tensors(sd)
        safetensors_torch.save_file(sd, file, metadata={"format": "pt"})
    return str(dst)


def test_error_unsupported_architecture(ckpts, tmp_path):
    src, _ = ckpts["mha-untied-single"]
    bad = edited_copy(src, tmp_path / "m", config=lambda c: c.update(
        architectures=["MistralForCausalLM"], model_type="mistral"))
    with pytest.raises(ValueError, match=r"architecture 'MistralForCausalLM' is not supported; "
                                         r"expected one of \['LlamaForCausalLM'\]"):
        engine(bad)
    with pytest.raises(ValueError, match=r"architecture 'MistralForCausalLM'"):
        engine(src, SpecConfig(), draft=bad)


@pytest.mark.parametrize("edit,pattern", [
    (lambda c: c.update(rope_parameters={"rope_type": "yarn", "rope_theta": 1e4, "factor": 2.0}),
     r"rope_type='yarn' is not supported; expected one of \['default', 'linear', 'llama3'\]"),
    (lambda c: c.update(hidden_act="gelu"), r"hidden_act='gelu' is not supported"),
    (lambda c: c.update(attention_bias=True), r"attention_bias=true is not supported"),
    (lambda c: c.pop("intermediate_size"), r"lacks 'intermediate_size'"),
])
def test_error_unsupported_config(ckpts, tmp_path, edit, pattern):
    src, _ = ckpts["mha-untied-single"]
    with pytest.raises(ValueError, match=pattern):
        engine(edited_copy(src, tmp_path / "m", config=edit))


def test_error_missing_and_unexpected_tensors(ckpts, tmp_path):
    src, _ = ckpts["mha-untied-single"]
    missing = edited_copy(src, tmp_path / "a",
                          tensors=lambda sd: sd.pop("model.layers.1.mlp.up_proj.weight"))
    with pytest.raises(ValueError, match=r"missing tensors \['model.layers.1.mlp.up_proj.weight'\]"):
        engine(missing)
    extra = edited_copy(src, tmp_path / "b", tensors=lambda sd: sd.update(
        {"model.layers.0.self_attn.q_proj.bias": torch.zeros(64)}))
    with pytest.raises(ValueError, match=r"unexpected tensors \['model.layers.0.self_attn.q_proj.bias'\]"):
        engine(extra)
    untied_without_head = edited_copy(src, tmp_path / "c", tensors=lambda sd: sd.pop("lm_head.weight"))
    with pytest.raises(ValueError, match=r"missing tensors \['lm_head.weight'\]"):
        engine(untied_without_head)
    # A sharded checkpoint whose index names a shard that is gone.
    sharded, _ = ckpts["gqa-tied-headdim16of48-sharded"]
    gone = tmp_path / "d"
    shutil.copytree(sharded, gone)
    shard = sorted(p for p in os.listdir(gone) if p.endswith(".safetensors"))[0]
    os.remove(gone / shard)
    with pytest.raises(ValueError, match=rf"maps '.*' to '{shard}', which is missing"):
        engine(str(gone))


def test_error_shape_mismatch_checkpoint_vs_config(ckpts, tmp_path):
    src, _ = ckpts["mha-untied-single"]
    bad = edited_copy(src, tmp_path / "m", config=lambda c: c.update(intermediate_size=96))
    with pytest.raises(ValueError, match=r"shape mismatch between checkpoint and config: "
                                         r"'model.layers.0.mlp.down_proj.weight' has shape "
                                         r"\[64, 128\], config.json implies \[64, 96\]"):
        engine(bad)


def test_error_draft_target_mismatch(ckpts, tmp_path):
    target, _ = ckpts["gqa-tied-headdim16of48-sharded"]      # hidden 48, vocab 200
    other, _ = ckpts["mha-untied-single"]                    # hidden 64, vocab 256
    wide = tmp_path / "wide"
    save_eagle_head(seeded_head(engine(other)), wide)
    with pytest.raises(ValueError, match=r"EAGLE head hidden_size=64 but the target's "
                                         r"hidden_size=48: they must match"):
        engine(target, SpecConfig(), draft=str(wide))
    same_hidden = tmp_path / "vocab"
    save_eagle_head(seeded_head(engine(target)), same_hidden)
    edited = edited_copy(str(same_hidden), tmp_path / "vocab2",
                         config=lambda c: c.update(vocab_size=256))
    with pytest.raises(ValueError, match=r"draft vocab_size=256 but the target's vocab_size=200"):
        engine(target, SpecConfig(), draft=edited)
    with pytest.raises(ValueError, match=r"draft vocab_size=256 but the target's vocab_size=200"):
        engine(target, SpecConfig(), draft=other)  # a standalone Llama draft
    with pytest.raises(ValueError, match=r"is an EAGLE head, not a target model"):
        engine(str(same_hidden))
    three = edited_copy(str(same_hidden), tmp_path / "l3", tensors=lambda sd: sd.update(
        {"midlayer.self_attn.q_proj.weight": torch.zeros(1)}))
    with pytest.raises(ValueError, match=r"unexpected tensors \['midlayer.self_attn.q_proj.weight'\] "
                                         r"\(this looks like an EAGLE-3 head"):
        engine(target, SpecConfig(), draft=three)


def test_error_paths(tmp_path):
    with pytest.raises(ValueError, match=r"unknown model shape '/no/such/dir'.*or a checkpoint directory"):
        Engine(model="/no/such/dir")
    with pytest.raises(ValueError, match=r"has no config.json"):
        Engine(model=str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    with pytest.raises(ValueError, match=r"lacks 'hidden_size'"):
        Engine(model=str(tmp_path))

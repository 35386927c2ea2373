"""EAGLE heads and standalone drafts loaded from checkpoint directories: heads round-trip
and drive lossless speculative decoding (the published EAGLE-1/2 layout included); a Llama
directory serves as a standalone draft."""
from __future__ import annotations

import dataclasses
import json
import os

import pytest
import torch

transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

from checkpoint_models import (ckpts, eagle_dir, engine, hf_model,  # noqa: E402,F401
                               prompts_for, save, seeded_head)
from specdec import SpecConfig  # noqa: E402
from specdec.loading import load_eagle_head, save_eagle_head  # noqa: E402
from specdec.model.eagle import EagleHead  # noqa: E402
from specdec.model.llama import LlamaModel  # noqa: E402


@pytest.mark.parametrize("fc_bias,own_embedding", [(True, False), (False, True)])
def test_eagle_head_round_trip(ckpts, tmp_path, fc_bias, own_embedding):
    path, _ = ckpts["llama3rope-mqa-untied-sharded"]
    eng = engine(path)
    head = seeded_head(eng, fc_bias, own_embedding)
    save_eagle_head(head, tmp_path / "eagle")
    loaded = load_eagle_head(tmp_path / "eagle", eng.target, eng.device, eng.dtype)
    # The head's config is the target's with one layer (and no tied head of its own).
    assert loaded.cfg == dataclasses.replace(head.cfg, num_layers=1, tie_word_embeddings=False)
    a, b = dict(head.named_parameters()), dict(loaded.named_parameters())
    assert set(a) == set(b) and ("fc.bias" in a) == fc_bias
    assert ("embed_tokens.weight" in a) == own_embedding
    for n in a:
        assert torch.equal(a[n], b[n]), n
    assert torch.equal(head.rope.cos, loaded.rope.cos)


@pytest.mark.parametrize("topk,steps,ndt,page_size,graph", [
    (1, 3, 4, 1, False), (1, 2, 3, 4, False), (2, 3, 6, 1, False), (4, 2, 8, 4, False),
    (2, 3, 6, 4, True)])
def test_spec_with_loaded_eagle_is_lossless(ckpts, eagle_dir, topk, steps, ndt, page_size, graph):
    path, _ = ckpts["llama3rope-mqa-untied-sharded"]
    prompts = prompts_for(300, seed=5, n=4)
    plain = engine(path, max_batch=4, page_size=page_size).generate(prompts, max_new_tokens=16)
    eng = engine(path, SpecConfig(topk=topk, num_steps=steps, num_draft_tokens=ndt),
                 draft=eagle_dir, max_batch=4,
                 page_size=page_size, cuda_graph=graph, cuda_graph_bs=[1, 2, 4])
    assert isinstance(eng.drafter, EagleHead) and eng.drafter.fc.bias is not None
    saved = safetensors_torch.load_file(os.path.join(eagle_dir, "model.safetensors"))
    assert torch.equal(eng.drafter.fc.bias.cpu(), saved["fc.bias"])  # not re-initialised
    assert eng.generate(prompts, max_new_tokens=16) == plain
    eng.check_accounting()
    print(f"\n[eagle topk={topk} steps={steps} ndt={ndt} page={page_size} graph={graph}] "
          f"{eng.stats}")


def test_official_eagle_layout_detected_by_keys(ckpts, tmp_path):
    """An EAGLE-1/2 checkpoint as published: architectures LlamaForCausalLM, `fc.weight`,
    `fc.bias`, its own `embed_tokens.weight`, one layer without input_layernorm."""
    path, _ = ckpts["gqa-tied-headdim16of48-sharded"]
    eng = engine(path)
    out = tmp_path / "official"
    save_eagle_head(seeded_head(eng, own_embedding=True), out)
    with open(out / "config.json") as f:
        raw = json.load(f)
    raw["architectures"] = ["LlamaForCausalLM"]
    (out / "config.json").write_text(json.dumps(raw))
    prompts = prompts_for(200, seed=9)
    spec_eng = engine(path, SpecConfig(topk=2, num_steps=3, num_draft_tokens=6), draft=str(out),
                      max_batch=3)
    assert isinstance(spec_eng.drafter, EagleHead) and spec_eng.drafter.embed_tokens is not None
    assert spec_eng.generate(prompts, max_new_tokens=12) == engine(path, max_batch=3).generate(prompts, max_new_tokens=12)


def test_standalone_draft_from_llama_dir(ckpts, tmp_path):
    path, _ = ckpts["llama3rope-mqa-untied-sharded"]
    draft_hf = hf_model(99, vocab_size=300, hidden_size=32, intermediate_size=64,
                        num_attention_heads=2, num_key_value_heads=2)
    draft = save(draft_hf, tmp_path / "draft")
    prompts = prompts_for(300, seed=4)
    plain = engine(path, max_batch=3).generate(prompts, max_new_tokens=12)
    # A draft narrower than the target (hidden 32 vs 64), eager and through (stand-in) graphs.
    for topk, steps, ndt, graph in [(1, 3, 4, False), (2, 2, 5, False), (2, 2, 5, True)]:
        eng = engine(path, SpecConfig(topk=topk, num_steps=steps, num_draft_tokens=ndt),
                     draft=draft, max_batch=3,
                     cuda_graph=graph, cuda_graph_bs=[1, 2, 4])
        assert isinstance(eng.drafter, LlamaModel) and eng.drafter.cfg.hidden_size == 32
        assert torch.equal(eng.drafter.embed_tokens.weight.cpu(),
                           draft_hf.model.embed_tokens.weight.detach().cpu())
        assert eng.generate(prompts, max_new_tokens=12) == plain
    # The target's own directory as its draft: every draft accepted (no ties at fp32 here).
    eng = engine(path, SpecConfig(topk=1, num_steps=3), draft=path, max_batch=3)
    assert eng.generate(prompts, max_new_tokens=12) == plain
    assert eng.stats.mean_acceptance_length == 4.0

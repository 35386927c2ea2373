"""Shared by the tests/test_checkpoints_*.py files: tiny random Llama checkpoints written by
`transformers` (sharded and not, tied and untied, GQA/MQA, head_dim != hidden/heads, llama3
and linear RoPE scaling), a seeded EAGLE head for them, and the engine built on a directory.
The fixtures are module-scoped: each test file that imports them builds its own."""
from __future__ import annotations

import os
import random

import pytest
import torch

transformers = pytest.importorskip("transformers")

from specdec import Engine  # noqa: E402
from specdec.loading import save_eagle_head  # noqa: E402
from specdec.model.eagle import EagleHead  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 32}

# name -> (LlamaConfig kwargs, max_shard_size or None for one file)
CONFIGS = {
    "mha-untied-single": (dict(vocab_size=256, hidden_size=64, intermediate_size=128,
                               num_attention_heads=4, num_key_value_heads=4,
                               rms_norm_eps=1e-6), None),
    "gqa-tied-headdim16of48-sharded": (dict(vocab_size=200, hidden_size=48, intermediate_size=96,
                                            num_attention_heads=4, num_key_value_heads=2,
                                            head_dim=16, tie_word_embeddings=True,
                                            rms_norm_eps=1e-5), "20KB"),
    "llama3rope-mqa-untied-sharded": (dict(vocab_size=300, hidden_size=64, intermediate_size=128,
                                           num_attention_heads=4, num_key_value_heads=1,
                                           rope_theta=50000.0, rope_scaling=LLAMA3), "40KB"),
    "linearrope-tied-single": (dict(vocab_size=128, hidden_size=32, intermediate_size=64,
                                    num_attention_heads=2, num_key_value_heads=1,
                                    tie_word_embeddings=True,
                                    rope_scaling={"rope_type": "linear", "factor": 2.0}), None),
}


def hf_model(seed: int, dtype=torch.float32, **kw):
    """A random LlamaForCausalLM whose every weight (norms included) is seeded noise, scaled so
    that logits are well separated (no near-ties in greedy)."""
    base = dict(num_hidden_layers=2, max_position_embeddings=512, bos_token_id=None,
                eos_token_id=None, pad_token_id=None, tie_word_embeddings=False)
    cfg = transformers.LlamaConfig(**{**base, **kw})
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(cfg).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            p.copy_(1.0 + 0.1 * noise if "norm" in name else noise / p.shape[-1] ** 0.5)
    return model.to(dtype)


def save(model, path, shard=None):
    kw = {} if shard is None else {"max_shard_size": shard}
    model.save_pretrained(str(path), **kw)
    return str(path)


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    """name -> (directory, transformers model on DEVICE)."""
    out = {}
    for i, (name, (kw, shard)) in enumerate(CONFIGS.items()):
        model = hf_model(10 + i, **kw)
        path = save(model, tmp_path_factory.mktemp(name), shard)
        if shard is not None:
            assert os.path.isfile(os.path.join(path, "model.safetensors.index.json"))
        out[name] = (path, model.to(DEVICE))
    return out


def prompts_for(vocab: int, seed: int = 0, n: int = 3) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(rng.randint(3, 20))] for _ in range(n)]


def engine(path, spec=None, **kw):
    return Engine(model=path, spec=spec, device=DEVICE, dtype=kw.pop("dtype", "float32"), **kw)


def seeded_head(eng: Engine, fc_bias=True, own_embedding=False, seed=1) -> EagleHead:
    head = EagleHead(eng.cfg, eng.target, fc_bias=fc_bias, own_embedding=own_embedding)
    head.init_from_target(seed)
    return head.to(device=eng.device, dtype=eng.dtype)


@pytest.fixture(scope="module")
def eagle_dir(ckpts, tmp_path_factory):
    path, _ = ckpts["llama3rope-mqa-untied-sharded"]
    out = tmp_path_factory.mktemp("eagle")
    save_eagle_head(seeded_head(engine(path)), out)
    return str(out)

"""A trained LlamaModel as a Hugging Face LlamaForCausalLM directory (config.json +
model.safetensors), the layout specdec/loading/llama.py reads."""
from __future__ import annotations

import json
import os

import torch

from specdec.loading.tensors import save_safetensors
from specdec.model.llama import LlamaModel


def hf_config(model: LlamaModel, dtype: torch.dtype, eos_id: int | None) -> dict:
    cfg = model.cfg
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads,
        "head_dim": cfg.head_dim,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": cfg.rope_scaling,
        "max_position_embeddings": cfg.max_position,
        "tie_word_embeddings": cfg.tie_word_embeddings,
        "bos_token_id": None,
        "eos_token_id": eos_id,
        "torch_dtype": str(dtype).removeprefix("torch."),
    }


def save_llama(model: LlamaModel, path: str, dtype: torch.dtype = torch.bfloat16,
               eos_id: int | None = None) -> None:
    """Weights in `dtype` under HF names (`model.` prefix, `lm_head.weight`)."""
    os.makedirs(path, exist_ok=True)
    state = {("" if n == "lm_head.weight" else "model.") + n: t.to(dtype)
             for n, t in model.state_dict().items()}
    with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
        json.dump(hf_config(model, dtype, eos_id), f, indent=2)
    save_safetensors(state, os.path.join(path, "model.safetensors"))

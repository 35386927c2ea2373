"""A trained LlamaModel as a Hugging Face LlamaForCausalLM directory (config.json +
model.safetensors), the layout specdec/loading/llama.py reads."""
from __future__ import annotations

import json
import os

import torch

from specdec.loading.config import hf_llama_config
from specdec.loading.tensors import save_safetensors
from specdec.model.llama import LlamaModel


def hf_config(model: LlamaModel, dtype: torch.dtype, eos_id: int | None) -> dict:
    cfg = model.cfg
    return hf_llama_config(cfg, "LlamaForCausalLM", cfg.num_layers, cfg.tie_word_embeddings,
                           dtype, bos_token_id=None, eos_token_id=eos_id)


def save_llama(model: LlamaModel, path: str, dtype: torch.dtype = torch.bfloat16,
               eos_id: int | None = None) -> None:
    """Weights in `dtype` under HF names (`model.` prefix, `lm_head.weight`)."""
    os.makedirs(path, exist_ok=True)
    state = {("" if n == "lm_head.weight" else "model.") + n: t.to(dtype)
             for n, t in model.state_dict().items()}
    with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
        json.dump(hf_config(model, dtype, eos_id), f, indent=2)
    save_safetensors(state, os.path.join(path, "model.safetensors"))

"""Loading real checkpoints from local Hugging Face directories (no network).

- config.py: config.json -> ModelConfig (rope_theta, llama3/linear rope_scaling, GQA, head_dim)
- tensors.py: safetensors (single or sharded with an index) and the name/shape checks
- llama.py: LlamaForCausalLM -> LlamaModel (target or standalone draft)
- eagle.py: EAGLE-1/2 heads -> EagleHead, and save_eagle_head
- draft.py: a draft directory -> EagleHead or LlamaModel
- tokenizer.py: tokenizer.json -> encode/decode
"""
from __future__ import annotations

import os

from specdec.config import MODEL_SHAPES, ModelConfig, is_shape_name, model_config
from specdec.loading.config import read_config
from specdec.loading.draft import load_drafter
from specdec.loading.eagle import is_eagle_dir, load_eagle_head, save_eagle_head
from specdec.loading.llama import llama_config, load_llama
from specdec.loading.tokenizer import TextCodec, has_tokenizer, load_tokenizer

__all__ = ["is_checkpoint_dir", "resolve_model_config", "load_llama", "llama_config",
           "load_drafter", "load_eagle_head", "save_eagle_head", "is_eagle_dir",
           "TextCodec", "has_tokenizer", "load_tokenizer", "read_config"]


def is_checkpoint_dir(model) -> bool:
    """A path (not a shape name) naming an existing directory."""
    if not isinstance(model, (str, os.PathLike)):
        return False
    name = os.fspath(model)
    return not is_shape_name(name) and os.path.isdir(name)


def resolve_model_config(model) -> ModelConfig:
    """A ModelConfig, a shape name, or a LlamaForCausalLM checkpoint directory -> ModelConfig."""
    if isinstance(model, ModelConfig):
        return model
    if not isinstance(model, (str, os.PathLike)):
        raise ValueError(f"model={model!r}: expected a shape name, a checkpoint directory or "
                         "a ModelConfig")
    name = os.fspath(model)
    if is_shape_name(name):
        return model_config(name)
    if os.path.isdir(name):
        if is_eagle_dir(name):
            raise ValueError(f"model={name!r} is an EAGLE head, not a target model: pass it "
                             "as draft= and a LlamaForCausalLM directory as model=")
        return llama_config(name)
    raise ValueError(f"unknown model shape {name!r}; known shapes: {sorted(MODEL_SHAPES)}, "
                     "or a checkpoint directory holding config.json")

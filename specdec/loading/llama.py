"""A Llama-architecture target (or standalone draft) from a Hugging Face checkpoint directory."""
from __future__ import annotations

import os

import torch

from specdec.config import ModelConfig
from specdec.loading.config import check_llama_architecture, llama_model_config, read_config
from specdec.loading.tensors import CheckpointReader, match_tensors
from specdec.model.layers import RotaryEmbedding
from specdec.model.llama import LlamaModel


def llama_config(path: str | os.PathLike) -> ModelConfig:
    """ModelConfig of a LlamaForCausalLM directory (its config.json only; no weight is read)."""
    where = os.fspath(path)
    raw = read_config(where)
    check_llama_architecture(raw, where)
    return llama_model_config(raw, where)


def _engine_name(name: str) -> str:
    """HF `model.layers.0...` / `lm_head.weight` -> the engine's `layers.0...` / `lm_head.weight`."""
    return name[len("model."):] if name.startswith("model.") else name


def _checkpoint_name(name: str) -> str:
    return name if name == "lm_head.weight" else "model." + name


def _ignored(cfg: ModelConfig):
    def ignore(name: str) -> bool:
        # Old checkpoints store the RoPE table; tied ones may store the (tied) LM head too.
        return name.endswith("rotary_emb.inv_freq") or (
            cfg.tie_word_embeddings and name == "lm_head.weight")
    return ignore


def load_llama(path: str | os.PathLike, device, dtype: torch.dtype,
               cfg: ModelConfig | None = None) -> LlamaModel:
    """LlamaModel with the checkpoint's weights converted to `dtype` on `device`, in eval mode.
    The module is built on the meta device, so no random init runs and no fp32 copy is made."""
    where = os.fspath(path)
    cfg = cfg or llama_config(where)
    reader = CheckpointReader(where)
    with torch.device("meta"):
        model = LlamaModel(cfg)
    expected = {n: tuple(p.shape) for n, p in model.named_parameters()}
    mapping = match_tensors(reader, expected=expected, to_engine=_engine_name,
                            to_checkpoint=_checkpoint_name, where=where, ignore=_ignored(cfg))
    state = reader.load(mapping, device, dtype)
    model.load_state_dict(state, strict=True, assign=True)
    model.rope = RotaryEmbedding.for_config(cfg)
    return finish(model, device, dtype)


def finish(module: torch.nn.Module, device, dtype: torch.dtype) -> torch.nn.Module:
    """Move the (CPU-built) RoPE tables as the engine's _build does; refuse any meta leftover."""
    module = module.to(device=device, dtype=dtype).eval()
    left = [n for n, t in list(module.named_parameters()) + list(module.named_buffers()) if t.is_meta]
    if left:  # a bug here, not in the checkpoint
        raise RuntimeError(f"tensors left unloaded: {left}")
    return module

"""A draft from a directory: an EAGLE head, or a standalone Llama model."""
from __future__ import annotations

import dataclasses
import os

import torch

from specdec.loading.config import read_config
from specdec.loading.eagle import is_eagle_dir, load_eagle_head
from specdec.loading.llama import llama_config, load_llama
from specdec.model.llama import LlamaModel


def load_drafter(path: str | os.PathLike, target: LlamaModel, device, dtype: torch.dtype):
    """EagleHead when `path` holds an EAGLE head (see is_eagle_dir), else a LlamaModel draft
    (config.json architecture LlamaForCausalLM) with the target's vocabulary."""
    where = os.fspath(path)
    raw = read_config(where)
    if is_eagle_dir(where, raw):
        return load_eagle_head(where, target, device, dtype)
    cfg = llama_config(where)
    if cfg.vocab_size != target.cfg.vocab_size:
        raise ValueError(f"{where}: draft vocab_size={cfg.vocab_size} but the target's "
                         f"vocab_size={target.cfg.vocab_size}: they must match")
    cfg = dataclasses.replace(cfg, max_position=max(cfg.max_position, target.cfg.max_position))
    return load_llama(where, device, dtype, cfg)

"""EAGLE-1/EAGLE-2 heads: load from and save to a checkpoint directory.

Layout (as the official EAGLE checkpoints and SGLang's LlamaForCausalLMEagle): `fc.weight`
[H, 2H] over concat(token embedding, target hidden), optional `fc.bias` [H], one decoder layer
`layers.0.*` without input_layernorm, optional `embed_tokens.weight` [V, H] (else the
target's), and the target's LM head. A `model.` prefix on the names is accepted.
"""
from __future__ import annotations

import dataclasses
import json
import os

import torch

from specdec.loading.config import (EAGLE_ARCHITECTURES, LLAMA_ARCHITECTURES, architecture,
                                    check_llama_architecture, hf_llama_config,
                                    llama_model_config, read_config)
from specdec.loading.llama import finish
from specdec.loading.tensors import CheckpointReader, match_tensors, save_safetensors
from specdec.model.eagle import EagleHead
from specdec.model.layers import RotaryEmbedding
from specdec.model.llama import LlamaModel

EAGLE_MARKERS = ("fc.weight", "model.fc.weight")


def is_eagle_dir(path: str | os.PathLike, raw: dict | None = None) -> bool:
    """An EAGLE head: its config names an EAGLE architecture, or its weights hold fc.weight."""
    raw = read_config(path) if raw is None else raw
    if architecture(raw) in EAGLE_ARCHITECTURES:
        return True
    try:
        names = CheckpointReader(path).names()
    except ValueError:
        return False
    return any(m in names for m in EAGLE_MARKERS)


def _engine_name(name: str) -> str:
    return name[len("model."):] if name.startswith("model.") else name


def _hint(unexpected: list[str]) -> str:
    if any(_engine_name(n).startswith("midlayer.") for n in unexpected):
        return " (this looks like an EAGLE-3 head; only the EAGLE-1/EAGLE-2 layout is supported)"
    if any(_engine_name(n).startswith("layers.0.input_layernorm") for n in unexpected):
        return " (an EAGLE-1/2 head's layer has no input_layernorm)"
    return ""


def load_eagle_head(path: str | os.PathLike, target: LlamaModel, device,
                    dtype: torch.dtype) -> EagleHead:
    where = os.fspath(path)
    raw = read_config(where)
    check_llama_architecture(raw, where, LLAMA_ARCHITECTURES + EAGLE_ARCHITECTURES)
    cfg = llama_model_config(raw, where)
    tcfg = target.cfg
    if cfg.num_layers != 1:
        raise ValueError(f"{where}: EAGLE head num_hidden_layers={cfg.num_layers}; "
                         "expected 1 (EAGLE-1/EAGLE-2 layout)")
    if cfg.hidden_size != tcfg.hidden_size:
        raise ValueError(f"{where}: EAGLE head hidden_size={cfg.hidden_size} but the target's "
                         f"hidden_size={tcfg.hidden_size}: they must match")
    if cfg.vocab_size != tcfg.vocab_size:
        raise ValueError(f"{where}: draft vocab_size={cfg.vocab_size} but the target's "
                         f"vocab_size={tcfg.vocab_size}: they must match")
    # RoPE tables as long as the target's: the engine's max_context is checked against it.
    cfg = dataclasses.replace(cfg, max_position=max(cfg.max_position, tcfg.max_position),
                              tie_word_embeddings=False)
    reader = CheckpointReader(where)
    names = {_engine_name(n) for n in reader.names()}
    with torch.device("meta"):
        head = EagleHead(cfg, target, fc_bias="fc.bias" in names,
                         own_embedding="embed_tokens.weight" in names)
    expected = {n: tuple(p.shape) for n, p in head.named_parameters()}
    mapping = match_tensors(reader, expected=expected, to_engine=_engine_name,
                            to_checkpoint=lambda n: n, where=where,
                            ignore=lambda n: n.endswith("rotary_emb.inv_freq"), hint=_hint)
    head.load_state_dict(reader.load(mapping, device, dtype), strict=True, assign=True)
    head.rope = RotaryEmbedding.for_config(cfg)
    return finish(head, device, dtype)


def save_eagle_head(head: EagleHead, path: str | os.PathLike) -> None:
    """Write `head` as config.json + model.safetensors, in the layout load_eagle_head reads."""
    path = os.fspath(path)
    os.makedirs(path, exist_ok=True)
    cfg = head.cfg
    state = head.state_dict()
    dtype = next(iter(state.values())).dtype
    config = hf_llama_config(cfg, "LlamaForCausalLMEagle", 1, False, dtype)
    with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    save_safetensors(dict(state), os.path.join(path, "model.safetensors"))

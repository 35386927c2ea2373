"""config.json of a Hugging Face Llama checkpoint (or EAGLE head) -> ModelConfig.

Only the fields that change the math are read; anything that would change it in a way this
engine does not implement (biases, another activation, an unknown RoPE scaling) is refused.
Both config layouts are accepted: transformers 4 (`rope_theta` + `rope_scaling`) and
transformers 5 (`rope_parameters` holding `rope_theta` and the scaling keys).
"""
from __future__ import annotations

import json
import os

from specdec.config import ModelConfig

LLAMA_ARCHITECTURES = ("LlamaForCausalLM",)
EAGLE_ARCHITECTURES = ("LlamaForCausalLMEagle", "EagleLlamaForCausalLM", "EAGLEModel")
# Keys each supported rope_type needs, besides rope_type itself.
ROPE_KEYS = {
    "default": (),
    "linear": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
}


def read_config(path: str | os.PathLike) -> dict:
    """The parsed config.json of checkpoint directory `path`."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise ValueError(f"{path!r} is not a directory (expected a checkpoint directory "
                         "holding config.json and *.safetensors)")
    file = os.path.join(path, "config.json")
    if not os.path.isfile(file):
        raise ValueError(f"{path!r} has no config.json: expected a Hugging Face checkpoint "
                         "directory")
    with open(file, encoding="utf-8") as f:
        try:
            raw = json.load(f)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{file}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{file}: expected a JSON object")
    return raw


def architecture(raw: dict) -> str | None:
    archs = raw.get("architectures") or []
    return archs[0] if archs else None


def check_llama_architecture(raw: dict, where: str, allowed=LLAMA_ARCHITECTURES) -> None:
    arch, model_type = architecture(raw), raw.get("model_type")
    if arch is not None and arch not in allowed:
        raise ValueError(f"{where}: architecture {arch!r} is not supported; expected one of "
                         f"{list(allowed)}")
    if arch is None and model_type not in (None, "llama"):
        raise ValueError(f"{where}: model_type {model_type!r} is not supported; expected 'llama'")


def _get(raw: dict, key: str, where: str, default=None, required: bool = True):
    value = raw.get(key, default)
    if value is None:
        if required:
            raise ValueError(f"{where}: config.json lacks {key!r}, which a Llama model needs")
        return default
    return value


def rope_settings(raw: dict, where: str) -> tuple[float, dict | None]:
    """(rope_theta, rope_scaling or None) from either config layout."""
    params = raw.get("rope_parameters")
    scaling = raw.get("rope_scaling")
    if isinstance(params, dict) and params:
        theta = params.get("rope_theta", raw.get("rope_theta", 10000.0))
        scaling = params if scaling is None else scaling
    else:
        theta = raw.get("rope_theta", 10000.0)
    if scaling is None:
        return float(theta), None
    if not isinstance(scaling, dict):
        raise ValueError(f"{where}: rope_scaling={scaling!r} is not a JSON object")
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind not in ROPE_KEYS:
        raise ValueError(f"{where}: rope_scaling rope_type={kind!r} is not supported; expected "
                         f"one of {sorted(ROPE_KEYS)}")
    if kind == "default":
        return float(theta), None
    missing = [k for k in ROPE_KEYS[kind] if scaling.get(k) is None]
    if missing:
        raise ValueError(f"{where}: rope_scaling of rope_type {kind!r} lacks {missing}")
    out = {"rope_type": kind, **{k: float(scaling[k]) for k in ROPE_KEYS[kind]}}
    if kind == "llama3" and out["low_freq_factor"] == out["high_freq_factor"]:
        raise ValueError(f"{where}: llama3 rope_scaling needs low_freq_factor != high_freq_factor")
    return float(theta), out


def llama_model_config(raw: dict, where: str) -> ModelConfig:
    """ModelConfig of a Llama config.json (defaults as transformers' LlamaConfig)."""
    act = raw.get("hidden_act", "silu")
    if act != "silu":
        raise ValueError(f"{where}: hidden_act={act!r} is not supported; expected 'silu'")
    for key in ("attention_bias", "mlp_bias"):
        if raw.get(key):
            raise ValueError(f"{where}: {key}=true is not supported; expected false")
    hidden = int(_get(raw, "hidden_size", where))
    heads = int(_get(raw, "num_attention_heads", where))
    kv_heads = int(_get(raw, "num_key_value_heads", where, default=heads, required=False))
    head_dim = _get(raw, "head_dim", where, required=False)
    if head_dim is None:
        if hidden % heads:
            raise ValueError(f"{where}: hidden_size={hidden} is not a multiple of "
                             f"num_attention_heads={heads} and config.json gives no head_dim")
        head_dim = hidden // heads
    theta, scaling = rope_settings(raw, where)
    try:
        return ModelConfig(
            vocab_size=int(_get(raw, "vocab_size", where)),
            hidden_size=hidden,
            intermediate_size=int(_get(raw, "intermediate_size", where)),
            num_layers=int(_get(raw, "num_hidden_layers", where)),
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=int(head_dim),
            rope_theta=theta,
            rms_norm_eps=float(_get(raw, "rms_norm_eps", where, default=1e-6, required=False)),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            max_position=int(_get(raw, "max_position_embeddings", where, default=2048,
                                  required=False)),
            rope_scaling=scaling,
        )
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def eos_token_ids(path: str | os.PathLike) -> list[int]:
    """End-of-sequence ids from generation_config.json or config.json (may be empty)."""
    for name in ("generation_config.json", "config.json"):
        file = os.path.join(os.fspath(path), name)
        if os.path.isfile(file):
            with open(file, encoding="utf-8") as f:
                eos = json.load(f).get("eos_token_id")
            if eos is not None:
                return [int(e) for e in (eos if isinstance(eos, list) else [eos])]
    return []


def hf_llama_config(cfg: ModelConfig, architecture: str, num_layers: int, tie: bool,
                    dtype, **extra) -> dict:
    """`cfg` as a Hugging Face Llama config.json (what llama_model_config reads back): the
    one writer for the saved targets (specdec/train/save.py) and EAGLE heads (eagle.py)."""
    return {
        "architectures": [architecture], "model_type": "llama", "hidden_act": "silu",
        "attention_bias": False, "mlp_bias": False,
        "vocab_size": cfg.vocab_size, "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size, "num_hidden_layers": num_layers,
        "num_attention_heads": cfg.num_heads, "num_key_value_heads": cfg.num_kv_heads,
        "head_dim": cfg.head_dim, "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta, "rope_scaling": cfg.rope_scaling,
        "max_position_embeddings": cfg.max_position, "tie_word_embeddings": tie,
        **extra, "torch_dtype": str(dtype).removeprefix("torch."),
    }

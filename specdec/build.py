"""An engine's parts, built from its arguments: the argument checks, the target and the
drafter (seeded, loaded, perturbed or the target itself), and an attention backend over a
KV pool. specdec/engine.py assembles them."""
from __future__ import annotations

import dataclasses

import torch

from specdec.attention.backend import BACKENDS
from specdec.config import model_config
from specdec.loading import is_checkpoint_dir, load_drafter, load_llama
from specdec.memory.kv_pool import KVPool
from specdec.model.eagle import EagleHead
from specdec.model.llama import LlamaModel, init_weights
from specdec.model.perturbed import parse_perturbed, perturbed_copy
from specdec.tp.group import check_tp_args
from specdec.tp.shard import check_divisible

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def check_engine_args(tp_size: int, *, device: str, overlap, page_size: int, dtype: str,
                      max_batch: int) -> None:
    """The arguments checked before anything is built or any process started."""
    check_tp_args(tp_size, device)
    if not isinstance(overlap, bool):
        raise ValueError(f"overlap={overlap!r}: expected True or False")
    if page_size < 1 or page_size > 64 or page_size & (page_size - 1):
        raise ValueError(f"page_size={page_size}: must be a power of two from 1 to 64")
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r}: expected one of {sorted(DTYPES)}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but CUDA is not available here; use device='cpu'")
    if max_batch < 1:
        raise ValueError(f"max_batch={max_batch} must be >= 1")


def check_model_fits(cfg, spec, max_context: int, tp_size: int) -> None:
    """The model's shape against the speculative config, the context and the TP size."""
    if spec is not None:
        spec.check_vocab(cfg.vocab_size)
    if max_context > cfg.max_position:
        raise ValueError(f"max_context={max_context} exceeds the model's max_position "
                         f"{cfg.max_position}")
    check_divisible(cfg, tp_size)


def seeded(module, seed: int, device: torch.device, dtype: torch.dtype):
    init_weights(module, seed)
    return module.to(device=device, dtype=dtype).eval()


def build_target(model: str, cfg, device: torch.device, dtype: torch.dtype, seed: int):
    # A checkpoint directory's weights are loaded as they are (no seeded init).
    if is_checkpoint_dir(model):
        return load_llama(model, device, dtype, cfg)
    return seeded(LlamaModel(cfg), seed, device, dtype)


def check_draft_max_position(max_position) -> None:
    if max_position is not None and (not isinstance(max_position, int) or max_position < 1):
        raise ValueError(f"draft_max_position={max_position!r} must be an integer >= 1")


def build_drafter(draft: str, *, target, cfg, device: torch.device, dtype: torch.dtype, seed: int,
                  max_position: int | None):
    """draft: 'eagle', 'self', 'perturbed[:scale]', a model shape name or a checkpoint
    directory; max_position: the drafter's own configured max_position, if given."""
    own = None if max_position is None else dataclasses.replace(cfg, max_position=max_position)
    if draft == "eagle":
        head = EagleHead(own or cfg, target)
        head.init_from_target(seed + 1)
        return head.to(device=device, dtype=dtype).eval()
    if draft == "self":
        if max_position is not None:
            raise ValueError("draft='self' is the target itself: it has the target's "
                             "max_position; draft_max_position applies to other drafters")
        return target
    scale = parse_perturbed(draft)
    if scale is not None:
        return perturbed_copy(target, scale, seed + 3, max_position)
    if is_checkpoint_dir(draft):  # an EAGLE head or a standalone Llama, weights as loaded
        return load_drafter(draft, target, device, dtype)
    try:
        dcfg = model_config(draft)
    except ValueError:
        raise ValueError(f"draft={draft!r}: expected 'eagle', 'self', 'perturbed[:scale]', "
                         "a model shape name or a checkpoint directory") from None
    if max_position is not None:
        dcfg = dataclasses.replace(dcfg, max_position=max_position)
    if dcfg.vocab_size != cfg.vocab_size:
        raise ValueError(f"draft model {draft!r} has vocab {dcfg.vocab_size}, the target "
                         f"{cfg.vocab_size}: they must match")
    return seeded(LlamaModel(dcfg), seed + 2, device, dtype)


def attention_backend(impl: str, *, cfg, slots: int, req_to_token: torch.Tensor, page_size: int,
                      tp_size: int, dtype: torch.dtype, device: torch.device,
                      layers: int | None = None):
    """A KV pool of `slots` slots for a model of shape `cfg` (this rank's share of its KV
    heads), and the attention backend `impl` over it."""
    pool = KVPool(layers or cfg.num_layers, num_slots=slots,
                  num_kv_heads=cfg.num_kv_heads // tp_size, head_dim=cfg.head_dim,
                  dtype=dtype, device=device)
    return BACKENDS[impl](pool, req_to_token, page_size, cfg.head_dim ** -0.5)

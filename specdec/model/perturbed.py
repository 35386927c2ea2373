"""A drafter whose agreement with the target is tunable: a copy of the target with seeded
noise in its upper half of layers. Scale 0 drafts exactly as the target (every draft
accepted), a large scale like an unrelated model (almost none); in between, the requests of
one batch routinely accept none, some and all of their drafts, where per-request slicing
bugs live (SGLang #28496)."""
from __future__ import annotations

import dataclasses

import torch

from specdec.model.llama import LlamaModel

DEFAULT_SCALE = 0.2  # on the tiny model: 1 to all num_steps + 1 accepted, evenly


def parse_perturbed(draft: str) -> float | None:
    """'perturbed' -> DEFAULT_SCALE, 'perturbed:0.3' -> 0.3, anything else -> None."""
    if draft != "perturbed" and not draft.startswith("perturbed:"):
        return None
    text = draft.partition(":")[2] or str(DEFAULT_SCALE)
    try:
        scale = float(text)
    except ValueError:
        scale = -1.0
    if not scale >= 0 or scale != scale or scale == float("inf"):
        raise ValueError(f"draft={draft!r}: the perturbation scale must be a finite number >= 0, "
                         "as in 'perturbed:0.3'")
    return scale


@torch.no_grad()
def perturbed_copy(target: LlamaModel, scale: float, seed: int,
                   max_position: int | None = None) -> LlamaModel:
    """The target's weights; every weight of layers num_layers//2 .. plus the final norm gets
    scale * std(weight) * N(0, 1) noise from `seed`. `max_position`: the copy's own config
    value (a draft config may state less than the target's)."""
    cfg = target.cfg if max_position is None else dataclasses.replace(target.cfg,
                                                                      max_position=max_position)
    model = LlamaModel(cfg).to(device=target.embed_tokens.weight.device,
                               dtype=target.embed_tokens.weight.dtype)
    model.load_state_dict(target.state_dict(), strict=False)  # rope tables are not state
    gen = torch.Generator().manual_seed(seed)
    first = cfg.num_layers // 2
    for name, p in sorted(model.named_parameters()):
        upper = name.startswith("layers.") and int(name.split(".")[1]) >= first
        if upper or name.startswith("norm."):
            noise = torch.randn(p.shape, generator=gen).to(p.device, torch.float32)
            p.add_((scale * p.float().std() * noise).to(p.dtype))
    return model.eval()

"""Host integers to the device: one transfer for many lists."""
from __future__ import annotations

import torch


def to_device(device: torch.device, *lists: list[int]) -> tuple[torch.Tensor, ...]:
    """int64 tensors on `device`, one per host list, through a single host-to-device copy
    from pinned memory (it does not wait for the stream). Each copy costs a driver call, and
    a round's host inputs are many small lists."""
    device = torch.device(device)
    flat = torch.tensor([v for x in lists for v in x], dtype=torch.int64)
    if device.type == "cuda":
        flat = flat.pin_memory().to(device, non_blocking=True)
    return flat.split([len(x) for x in lists])


def tensor_to_device(device: torch.device, t: torch.Tensor) -> torch.Tensor:
    """A host tensor on `device` without waiting for the stream (pinned, non-blocking)."""
    device = torch.device(device)
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)

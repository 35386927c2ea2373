"""Host integers to the device: one transfer for many lists."""
from __future__ import annotations

import torch


def to_device(device: torch.device, *lists: list[int]) -> tuple[torch.Tensor, ...]:
    """int64 tensors on `device`, one per host list, through a single host-to-device copy
    from pinned memory (it does not wait for the stream). Each copy costs a driver call, and
    a round's host inputs are many small lists."""
    device = torch.device(device)
    values = [v for x in lists for v in x]
    if device.type == "cuda":
        # Written straight into pinned memory: `.pin_memory()` on a pageable tensor asks the
        # driver whether it is pinned and copies it again (about 60 us of host time a call on
        # an H100 host, twice a decode step, while the GPU waits for the step's launch).
        flat = torch.tensor(values, dtype=torch.int64, pin_memory=True)
        flat = flat.to(device, non_blocking=True)
    else:
        flat = torch.tensor(values, dtype=torch.int64)
    return flat.split([len(x) for x in lists])


def tensor_to_device(device: torch.device, t: torch.Tensor) -> torch.Tensor:
    """A host tensor on `device` without waiting for the stream (pinned, non-blocking)."""
    device = torch.device(device)
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)

"""Reading checkpoint tensors: `model.safetensors`, sharded `model-*-of-*.safetensors` with
`model.safetensors.index.json`, or (for official EAGLE heads) `pytorch_model.bin`.

Shapes are read from the headers, so a checkpoint is checked before any tensor is loaded, and
tensors are then read one at a time (converted and moved as the caller asks).
"""
from __future__ import annotations

import glob
import json
import os

import torch

SAFE_INDEX = "model.safetensors.index.json"
SAFE_SINGLE = "model.safetensors"
TORCH_SINGLE = "pytorch_model.bin"


class CheckpointReader:
    """name -> file for every tensor of a checkpoint directory; shapes and tensors on demand."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self._files: dict[str, str] = {}       # tensor name -> file path
        self._torch: dict[str, torch.Tensor] | None = None
        index = os.path.join(self.path, SAFE_INDEX)
        if os.path.isfile(index):
            with open(index, encoding="utf-8") as f:
                weight_map = json.load(f).get("weight_map")
            if not isinstance(weight_map, dict) or not weight_map:
                raise ValueError(f"{index}: no weight_map")
            for name, file in weight_map.items():
                full = os.path.join(self.path, file)
                if not os.path.isfile(full):
                    raise ValueError(f"{index} maps {name!r} to {file!r}, which is missing")
                self._files[name] = full
        else:
            files = sorted(glob.glob(os.path.join(self.path, "*.safetensors")))
            if files:
                for full in files:
                    for name in self._safe_keys(full):
                        self._files[name] = full
            elif os.path.isfile(os.path.join(self.path, TORCH_SINGLE)):
                full = os.path.join(self.path, TORCH_SINGLE)
                try:
                    self._torch = torch.load(full, map_location="cpu", weights_only=True, mmap=True)
                except RuntimeError:  # a legacy (non-zip) file cannot be memory-mapped
                    self._torch = torch.load(full, map_location="cpu", weights_only=True)
                self._files = {name: full for name in self._torch}
            else:
                raise ValueError(f"{self.path!r} holds no weights: expected {SAFE_SINGLE}, "
                                 f"sharded *.safetensors with {SAFE_INDEX}, or {TORCH_SINGLE}")

    @staticmethod
    def _safe_keys(file: str) -> list[str]:
        from safetensors import safe_open
        with safe_open(file, framework="pt") as f:
            return list(f.keys())

    def names(self) -> list[str]:
        return list(self._files)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        if self._torch is not None:
            return {n: tuple(t.shape) for n, t in self._torch.items()}
        from safetensors import safe_open
        out: dict[str, tuple[int, ...]] = {}
        by_file: dict[str, list[str]] = {}
        for name, file in self._files.items():
            by_file.setdefault(file, []).append(name)
        for file, names in by_file.items():
            with safe_open(file, framework="pt") as f:
                present = set(f.keys())
                for name in names:
                    if name not in present:
                        raise ValueError(f"{file}: the index lists {name!r}, the file lacks it")
                    out[name] = tuple(f.get_slice(name).get_shape())
        return out

    def load(self, names: dict[str, str], device, dtype) -> dict[str, torch.Tensor]:
        """{new name: tensor} for {checkpoint name: new name}, each converted to dtype on
        device as it is read (one tensor on the host at a time)."""
        if self._torch is not None:
            return {new: self._torch[old].to(device=device, dtype=dtype)
                    for old, new in names.items()}
        from safetensors import safe_open
        out: dict[str, torch.Tensor] = {}
        by_file: dict[str, list[str]] = {}
        for old in names:
            by_file.setdefault(self._files[old], []).append(old)
        for file, olds in by_file.items():
            with safe_open(file, framework="pt") as f:
                for old in olds:
                    out[names[old]] = f.get_tensor(old).to(device=device, dtype=dtype)
        return out


def match_tensors(reader: CheckpointReader, *, expected: dict[str, tuple[int, ...]], to_engine,
                  to_checkpoint, where: str, ignore=lambda name: False,
                  hint=lambda unexpected: "") -> dict[str, str]:
    """{checkpoint name: engine name} covering exactly the `expected` engine tensors, with the
    shapes `expected` gives. Raises ValueError naming missing, unexpected and misshapen tensors."""
    shapes = reader.shapes()
    mapping: dict[str, str] = {}
    unexpected = []
    for name in sorted(shapes):
        new = to_engine(name)
        if new in expected and new not in mapping.values():
            mapping[name] = new
        elif not ignore(name):
            unexpected.append(name)
    missing = sorted(to_checkpoint(n) for n in set(expected) - set(mapping.values()))
    if missing:
        raise ValueError(f"{where}: missing tensors {_some(missing)}")
    if unexpected:
        raise ValueError(f"{where}: unexpected tensors {_some(unexpected)}{hint(unexpected)}")
    bad = [f"{old!r} has shape {list(shapes[old])}, config.json implies {list(expected[new])}"
           for old, new in mapping.items() if tuple(shapes[old]) != tuple(expected[new])]
    if bad:
        raise ValueError(f"{where}: shape mismatch between checkpoint and config: "
                         + "; ".join(bad[:8]) + (f"; and {len(bad) - 8} more" if len(bad) > 8 else ""))
    return mapping


def _some(names: list[str], n: int = 12) -> str:
    shown = ", ".join(repr(x) for x in names[:n])
    return f"[{shown}" + (f", ... {len(names)} in all]" if len(names) > n else "]")


def save_safetensors(tensors: dict[str, torch.Tensor], path: str) -> None:
    from safetensors.torch import save_file
    save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, path,
              metadata={"format": "pt"})

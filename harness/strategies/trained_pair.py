"""The trained pair (specdec/fixtures: a target and its EAGLE head trained on held-out-split
text) and accept lengths measured on its held-out prompts: what the acceptance floor and
`python -m harness acceptance` run."""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache

from harness.base.liveness import Progress
from specdec import Engine, SpecConfig
from specdec.validate import reserve_margin
from specdec.defaults import PAGE_SIZE

# The standalone drafter of the floor: the trained target with seeded noise in its upper
# layers (specdec/model/perturbed.py); the target drafting for itself would accept every
# draft (the self-draft law's business, not a floor).
STANDALONE = "perturbed:0.3"
DRAFTERS = ("eagle", "standalone")


@dataclass(frozen=True)
class TrainedPair:
    target: str        # HF Llama directory
    eagle: str         # EAGLE head directory
    heldout: str       # heldout.json: {"prompts": [[ids], ...], "corpus_sha256": ...}

    @property
    def prompts(self) -> list[list[int]]:
        return _prompts(self.heldout)

    def identity(self) -> dict:
        """What a baseline was measured on: the weights' and the held-out set's digests."""
        return {"target": _digest(os.path.join(self.target, "model.safetensors")),
                "eagle": _digest_dir(self.eagle), "heldout": _digest(self.heldout)}

    def draft_arg(self, drafter: str) -> str:
        if drafter == "eagle":
            return self.eagle
        if drafter == "standalone":
            return STANDALONE
        raise ValueError(f"drafter={drafter!r}: expected one of {DRAFTERS}")


def trained_pair(root: str | None = None) -> TrainedPair:
    """The committed fixture (specdec.fixtures.trained_pair_paths), or a directory laid out
    like it: target/, eagle/, heldout.json."""
    if root is None:
        from specdec.fixtures import trained_pair_paths
        target, eagle, _, heldout = trained_pair_paths()
        return TrainedPair(str(target), str(eagle), str(heldout))
    pair = TrainedPair(os.path.join(root, "target"), os.path.join(root, "eagle"),
                       os.path.join(root, "heldout.json"))
    for p in (pair.target, pair.eagle, pair.heldout):
        if not os.path.exists(p):
            raise ValueError(f"fixture {root!r}: {p} is missing (expected target/, eagle/ and "
                             "heldout.json, as specdec/fixtures/pystdlib has)")
    return pair


@lru_cache(maxsize=8)
def _prompts(path: str) -> list[list[int]]:
    with open(path) as f:
        doc = json.load(f)
    prompts = doc.get("prompts")
    if not prompts or not all(isinstance(p, list) and p for p in prompts):
        raise ValueError(f"{path}: 'prompts' must be a non-empty list of token-id lists")
    return [list(map(int, p)) for p in prompts]


@lru_cache(maxsize=16)
def _digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def _digest_dir(path: str) -> str:
    h = hashlib.sha256()
    for name in sorted(os.listdir(path)):
        if name.endswith((".safetensors", ".bin", ".json")):
            h.update(name.encode() + _digest(os.path.join(path, name)).encode())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class Measured:
    """Per-round accept lengths over the held-out prompts of one configuration and path."""

    accept_lens: list          # every request-round, requests in prompt order
    tokens: list               # per prompt: its output

    @property
    def rounds(self) -> int:
        return len(self.accept_lens)

    @property
    def mean(self) -> float:
        return sum(self.accept_lens) / self.rounds

    @property
    def std(self) -> float:
        m, n = self.mean, self.rounds
        return (sum((a - m) ** 2 for a in self.accept_lens) / (n - 1)) ** 0.5 if n > 1 else 0.0


def measure(pair: TrainedPair, *, drafter: str, topk: int, num_steps: int, ndt: int,
            n_prompts: int, max_new_tokens: int, device: str, dtype: str,
            cuda_graph: bool = False, page_size: int = PAGE_SIZE, overlap: bool = False,
            graph_bs: tuple = (), batch: str = "together", prompt_len: int = 0) -> Measured:
    """The first n_prompts held-out prompts (prompt_len > 0: the last prompt_len tokens of
    each, where the text goes on: a cheaper prefill on a CPU), greedy, max_new_tokens each,
    through one engine (`batch`: "together", all queued at once, or "halves", the second
    half two steps later)."""
    prompts = pair.prompts
    if not 1 <= n_prompts <= len(prompts):
        raise ValueError(f"n_prompts={n_prompts}: the held-out set has {len(prompts)} prompts")
    if prompt_len < 0:
        raise ValueError(f"prompt_len={prompt_len}: expected 0 (whole prompts) or a length")
    prompts = [p[-prompt_len:] if prompt_len else p for p in prompts[:n_prompts]]
    spec = SpecConfig(topk=topk, num_steps=num_steps, num_draft_tokens=ndt)
    context = max(map(len, prompts)) + max_new_tokens + reserve_margin(spec, page_size, overlap)
    eng = Engine(model=pair.target, spec=spec, draft=pair.draft_arg(drafter), device=device,
                 dtype=dtype, page_size=page_size, cuda_graph=cuda_graph, overlap=overlap,
                 cuda_graph_bs=list(graph_bs) or None, max_batch=max(n_prompts, *graph_bs, 1),
                 max_context=context)
    late = 2 if batch == "halves" else 0
    first = (n_prompts + 1) // 2 if late else n_prompts
    progress = Progress(eng)  # law liveness
    rids = [progress.add(eng.add_request(p, max_new_tokens)) for p in prompts[:first]]
    step = 0
    while eng.has_unfinished() or len(rids) < n_prompts:
        if step == late and len(rids) < n_prompts:
            rids += [progress.add(eng.add_request(p, max_new_tokens)) for p in prompts[first:]]
        progress.step()
        step += 1
    outs = [eng.output(r) for r in rids]
    return Measured([a for o in outs for a in o.accept_lens], [o.tokens for o in outs])

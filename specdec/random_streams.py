"""Every random number the engine draws, written down in one place (contract section 12).

Three streams, never shared, each a CPU torch.Generator seeded from (request seed, stream,
position) and moved to the device afterwards:

| stream  | draws per request and step               | decides                                  |
| ------- | ---------------------------------------- | ---------------------------------------- |
| DRAFT   | num_steps (probabilistic drafting only)   | draft token i, from the draft's filtered q |
| ACCEPT  | ndt (one per tree node)                   | acceptance of node j's children          |
| FINAL   | 1                                         | the final draw: bonus, recovery, or the one token of a prefill / plain decode step |

The position in the key is that of the first token the step decides (seq_len + 1 in a round,
the prompt length in a prefill): it is unique per request and step, so no two steps share a
draw, and it depends on nothing but the request, so a draw never depends on the batch, the
round number or on retraction. The request seed is SamplingParams.seed, else one derived from
the engine seed and the request id.
"""
from __future__ import annotations

import torch

_MASK64 = (1 << 64) - 1
DRAFT, ACCEPT, FINAL = 0x6472616674, 0x616363657074, 0x66696E616C  # "draft", "accept", "final"


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def mix_seed(a: int, b: int) -> int:
    """A 63-bit seed from two integers; stable across processes (unlike a salted hash)."""
    return _splitmix64(_splitmix64(a & _MASK64) ^ (b & _MASK64)) >> 1


def request_seed(req, engine_seed: int) -> int:
    """SamplingParams.seed, else one derived from the engine seed and the request id."""
    s = req.sampling.seed
    return s if s is not None else mix_seed(engine_seed + (1 << 32), req.rid)


def stream_coins(stream: int, seed: int, position: int, n: int) -> torch.Tensor:
    """n coins in [0, 1) of one stream for one request and step (fp32, on the CPU)."""
    gen = torch.Generator().manual_seed(mix_seed(mix_seed(seed, stream), position))
    return torch.rand(n, generator=gen)

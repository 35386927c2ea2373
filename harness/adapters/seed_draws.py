"""Draws that follow a request wherever a batch places it: a function of its seed (and a salt
naming the draw) alone, vectorised over a batch's seeds. Imports torch only: it runs inside
foreign workers (the vLLM and SGLang entries hand their requests such draws)."""
from __future__ import annotations

import torch


def seed_uniform(seeds: torch.Tensor, salt: int) -> torch.Tensor:
    """A float64 uniform in [0, 1) per seed, a function of (seed, salt) alone (splitmix64,
    vectorised: int64 arithmetic wraps), so a request's draw follows it to any batch."""
    def lsr(z, shift):  # a logical shift of int64 (>> extends the sign)
        return (z >> shift) & ((1 << (64 - shift)) - 1)
    z = (seeds.long() ^ salt) * -7046029254386353131 + 0x5EED
    for shift, mult in ((30, -4658895280553007687), (27, -7723592293110705685)):
        z = (z ^ lsr(z, shift)) * mult
    return lsr(z ^ lsr(z, 31), 11).double() / 2.0 ** 53

"""SwiGLU's activation on a fused gate/up projection: `silu(gate) * up` in one launch.

`silu_mul(gate_up)`: `gate_up` `[N, 2I]` (gate in the first I columns, up in the last I),
returns `[N, I]` in its dtype, `silu(gate)` rounded to that dtype before the product (as
`F.silu(g) * u` in torch computes it).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

import kernels._triton_env  # noqa: F401  (must precede `import triton`)
import triton
import triton.language as tl

_BLOCK = 1024


@triton.jit
def _silu_mul_kernel(x_ptr, out_ptr, inter, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < inter
    g = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0)
    u = tl.load(x_ptr + row * stride_x + inter + cols, mask=ok, other=0.0)
    gf = g.to(tl.float32)
    s = (gf / (1.0 + tl.exp(-gf))).to(g.dtype)
    tl.store(out_ptr + row * stride_out + cols,
             (s.to(tl.float32) * u.to(tl.float32)).to(g.dtype), mask=ok)


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """Triton; see the module docstring."""
    n, two_i = gate_up.shape
    inter = two_i // 2
    x = gate_up if gate_up.stride(1) == 1 else gate_up.contiguous()
    out = torch.empty((n, inter), dtype=gate_up.dtype, device=gate_up.device)
    if n:
        _silu_mul_kernel[(n, triton.cdiv(inter, _BLOCK))](
            x, out, inter, x.stride(0), out.stride(0), BLOCK=_BLOCK, num_warps=4)
    return out


def silu_mul_ref(gate_up: torch.Tensor) -> torch.Tensor:
    """Plain torch, the same signature and results."""
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up

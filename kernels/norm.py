"""RMSNorm, optionally fused with the residual add before it: one launch instead of seven.

`rms_norm(x, weight, eps, residual=None)`: without `residual`, returns `norm(x)`; with it,
returns `(norm(x + residual), x + residual)`, the sum rounded to x's dtype first (the
residual stream of a Llama layer). `norm(h) = weight * (h_f32 * rsqrt(mean(h_f32^2) + eps))
.to(h.dtype)`: normalised in fp32, scaled in the input dtype (transformers' LlamaRMSNorm).
One Triton program per row; the grid depends on shapes only (CUDA-graph safe).
"""
from __future__ import annotations

import torch

import kernels._triton_env  # noqa: F401  (must precede `import triton`)
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, res_ptr, w_ptr, out_ptr, sum_ptr, n_cols, eps,
                     stride_x, stride_res, stride_out, stride_sum,
                     HAS_RES: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0)
    if HAS_RES:
        r = tl.load(res_ptr + row * stride_res + cols, mask=ok, other=0.0)
        x = (x.to(tl.float32) + r.to(tl.float32)).to(x.dtype)  # the stream, in its own dtype
        tl.store(sum_ptr + row * stride_sum + cols, x, mask=ok)
    xf = x.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(xf * xf, 0) / n_cols + eps)
    y = (xf * rstd).to(x.dtype)
    w = tl.load(w_ptr + cols, mask=ok, other=0.0)
    tl.store(out_ptr + row * stride_out + cols,
             (w.to(tl.float32) * y.to(tl.float32)).to(out_ptr.dtype.element_ty), mask=ok)


def _rows(x: torch.Tensor) -> torch.Tensor:
    x2 = x.reshape(-1, x.shape[-1])
    return x2 if x2.stride(-1) == 1 else x2.contiguous()


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float,
             residual: torch.Tensor | None = None):
    """Triton; see the module docstring. Output dtype: torch's promotion of weight and x."""
    x2 = _rows(x)
    n, h = x2.shape
    out = torch.empty((n, h), dtype=torch.promote_types(weight.dtype, x.dtype), device=x.device)
    res2 = _rows(residual) if residual is not None else x2
    total = torch.empty_like(x2) if residual is not None else x2
    if n:
        block = triton.next_power_of_2(h)
        _rms_norm_kernel[(n,)](
            x2, res2, weight, out, total, h, float(eps),
            x2.stride(0), res2.stride(0), out.stride(0), total.stride(0),
            HAS_RES=residual is not None, BLOCK=block, num_warps=min(16, max(1, block // 256)),
        )
    out = out.view(x.shape)
    return out if residual is None else (out, total.view(x.shape))


def rms_norm_ref(x: torch.Tensor, weight: torch.Tensor, eps: float,
                 residual: torch.Tensor | None = None):
    """Plain torch, the same signature and results."""
    if residual is not None:
        x = x + residual
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    out = weight * xf.to(x.dtype)
    return out if residual is None else (out, x)

"""PROVISIONAL (replaced by the kernels branch): torch reference of chain speculative sampling."""
from __future__ import annotations

import torch

from kernels.sampling import FIXED_SCALE


def chain_speculative_sampling_ref(predicts, accept_index, accept_token_num, candidates,
                                   uniform_samples, uniform_samples_for_final_sampling,
                                   target_probs, draft_probs, threshold_acc=1.0):
    bs, ndt = candidates.shape
    for b in range(bs):
        n = 0
        accept_index[b, 0] = b * ndt
        while n < ndt - 1:
            d = int(candidates[b, n + 1])
            p, q = float(target_probs[b, n, d]), float(draft_probs[b, n, d])
            if float(uniform_samples[b, n]) * q * threshold_acc < p:
                predicts[b * ndt + n] = d
                n += 1
                accept_index[b, n] = b * ndt + n
            else:
                break
        accept_token_num[b] = n
        qrow = target_probs[b, n].float()
        prow = draft_probs[b, n].float() if n < ndt - 1 else torch.zeros_like(qrow)
        r = (qrow - prow).clamp(min=0, max=1).nan_to_num(0.0)
        rf = (r * FIXED_SCALE).to(torch.int64)
        u = int(float(uniform_samples_for_final_sampling[b]) * float(int(rf.sum())))
        hits = torch.nonzero(torch.cumsum(rf, 0) > u)
        if hits.numel():
            tok = int(hits[0, 0])
        else:
            nz = torch.nonzero(rf > 0)
            tok = int(nz[-1, 0]) if nz.numel() else 0
        predicts[b * ndt + n] = tok


chain_speculative_sampling = chain_speculative_sampling_ref

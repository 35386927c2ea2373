"""The EAGLE draft head: fc over concat(token embedding, target hidden), one decoder layer,
the target's embedding and LM head (EAGLE-1/2 layout)."""
from __future__ import annotations

import torch
from torch import nn

from specdec.attention.forward_batch import ForwardBatch
from specdec.config import ModelConfig
from specdec.model.layers import RotaryEmbedding, reduced
from specdec.model.llama import DecoderLayer, LlamaModel


class EagleHead(nn.Module):
    shifted = True  # row at position p consumes (target hidden h_p, token t_{p+1})
    tp = None  # a TPComm once sharded; fc stays replicated (specdec/tp/shard.py)

    def __init__(self, cfg: ModelConfig, target: LlamaModel, fc_bias: bool = False,
                 own_embedding: bool = False) -> None:
        super().__init__()
        self.cfg = cfg
        # Official EAGLE-1/2 checkpoints carry fc.bias; some heads ship their own embedding.
        self.fc = nn.Linear(2 * cfg.hidden_size, cfg.hidden_size, bias=fc_bias)
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size) if own_embedding else None
        self.layers = nn.ModuleList([DecoderLayer(cfg, 0, input_norm=False)])
        self.rope = RotaryEmbedding.for_config(cfg)
        self._target = [target]  # shared weights, not a submodule (not saved twice)

    @property
    def target(self) -> LlamaModel:
        return self._target[0]

    def forward(self, fb: ForwardBatch, backend, logit_rows: torch.Tensor | None = None):
        target = self._target[0]
        if self.embed_tokens is None:
            emb = target.embed(fb.input_ids)
        elif self.tp is None:
            emb = self.embed_tokens(fb.input_ids)
        else:
            emb = self.tp.vocab_embed(self.embed_tokens.weight, fb.input_ids,
                                      self.cfg.vocab_size)
        x = self.fc(torch.cat([emb, fb.hidden_states.to(emb.dtype)], dim=-1))
        residual = None
        for layer in self.layers:
            x, residual = layer(x, residual=residual, positions=fb.positions, rope=self.rope,
                                fb=fb, backend=backend)
        x = reduced(self.tp, x) + residual  # the head's hidden state: its layer's output
        #                                     stream (the MLP output summed), no final norm
        return target.compute_logits(x if logit_rows is None else x[logit_rows]), x

    @torch.no_grad()
    def init_from_target(self, seed: int, noise: float = 0.05) -> None:
        """A stand-in for a trained head: fc passes the token embedding through (plus seeded
        noise, which also mixes in the target hidden state), and the layer starts as a copy
        of the target's first layer. Shifted by one position, its attention sees the same
        relative positions as the target's, so it drafts with some skill (acceptance > 1)."""
        gen = torch.Generator().manual_seed(seed)
        h = self.cfg.hidden_size
        w = noise * torch.randn(self.fc.weight.shape, generator=gen)
        w[:, :h] += torch.eye(h)
        self.fc.weight.copy_(w)
        source = dict(self._target[0].layers[0].named_parameters())
        for name, p in self.layers[0].named_parameters():
            p.copy_(source[name])
        if self.fc.bias is not None:  # drawn after the weights: the no-bias draw is unchanged
            self.fc.bias.copy_(noise * torch.randn(self.fc.bias.shape, generator=gen))
        if self.embed_tokens is not None:
            self.embed_tokens.weight.copy_(self._target[0].embed_tokens.weight)

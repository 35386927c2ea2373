"""Law eagle_draft (oracle 5 for the EAGLE head): the draft logits that proposed every tree
node equal a dense recomputation of the EAGLE head along that node's ancestry, within dtype
tolerance.

The self-draft law proves a standalone drafter's positions, slots and ancestry by comparing
it with the target; an EAGLE head has no such twin, and a wrong hidden-state input or a wrong
ancestor only lowers acceptance a little (tokens stay lossless). This law recomputes it.
For a request with n committed tokens t_0..t_{n-1} and pending bonus t_n, and a tree node P
reached by draft tokens c_0..c_{d-1} (depth d; the root is the bonus, d = 0):
- h = the target's hidden states of a dense prefill of t_0..t_{n-1};
- the head's rows 0..n-1 consume (h_p, t_{p+1}) at position p; row n + j (j < d) consumes
  (g_{n+j-1}, c_j) at position n + j, where g_r is the head's own output hidden state at
  row r (the carried state after the draft extend, then each branch's parent's output);
- the logits of row n - 1 + d, by dense causal attention over rows 0..n-1+d, are what the
  engine's draft extend (d = 0) or draft decode step d - 1 (the forward whose input is P)
  must have produced for P's children.
Any error in the head's hidden-state input (its re-parenting across branches included),
its token input, its positions, or the draft KV it attends to (ancestry copies, prefix tail,
stale rows) moves these logits.

Observables: the trace's draft-extend and draft-decode logits, top_scores_index,
parent_list, draft tokens, the round's request ids and committed lengths, each finished
request's tokens (specdec/trace.py). Reference: harness/references/dense.py. Strategy:
harness/strategies/configs.py run_configs (draft "eagle")."""
from __future__ import annotations

import torch

from harness.base.failure import OracleFailure
from harness.laws.self_draft import LOGIT_TOL, _draft_extends_by_row, producing_logits
from harness.references.dense import reference_prefill
from harness.strategies.configs import RunConfig
from harness.strategies.drawn_run import traced
from harness.strategies.runs import default_device
from harness.laws.declaration import Law, Slice, grid
from harness.strategies.configs import run_configs
from harness.strategies.tiers import graphs_of

NAME = "eagle_draft"  # the law whose checks this module raises (OracleFailure)


class DenseEagle:
    """The head's dense logits at the end of a draft path, for one request's committed
    tokens: memoised by path, since a tree's paths share prefixes."""

    def __init__(self, engine, tokens: list[int], n: int) -> None:
        self.e, self.tokens, self.n = engine, tokens, n
        _, h, _, _ = reference_prefill(engine.target, tokens[:n], engine.device)
        self.memo: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
        self.root_hidden = h

    def logits(self, path: tuple[int, ...]) -> torch.Tensor:
        return self._state(path)[0]

    def _state(self, path: tuple[int, ...]):
        """(logits of the path's last row, the head's input hidden states of rows 0..its
        last row and the next one)."""
        if path in self.memo:
            return self.memo[path]
        if path:
            _, hidden = self._state(path[:-1])
        else:
            hidden = self.root_hidden
        ids = self.tokens[1:self.n + 1] + list(path)
        logits, out, _, _ = reference_prefill(self.e.drafter, ids, self.e.device,
                                              hidden_states=hidden)
        state = (logits[-1].float().cpu(), torch.cat([hidden, out[-1:].to(hidden.dtype)]))
        self.memo[path] = state
        return state


def _paths(rnd, b: int, parents: dict[int, int]) -> dict[int, tuple[int, ...]]:
    """Tree node -> the draft tokens from the root down to it (the root: ())."""
    out = {0: ()}

    def path(node: int) -> tuple[int, ...]:
        if node not in out:
            out[node] = path(parents[node]) + (int(rnd.draft_tokens[b, node - 1]),)
        return out[node]
    for node in parents:
        path(node)
    return out


def check_eagle_draft_logits(engine, trace, topk: int) -> int:
    """Every reachable tree node's proposing logits == the dense head along its ancestry
    (module docstring), within LOGIT_TOL of the engine's dtype. Returns nodes checked."""
    tol, checked = LOGIT_TOL[engine.dtype], 0
    tokens = {f.rid: f.tokens for f in trace.finished}
    history = list(trace.prefill)
    for n_round, rnd in enumerate(trace.rounds):
        prev = _draft_extends_by_row(history)
        history.extend(rnd.forwards)
        nodes: dict[int, list] = {}
        for b, node, parent, logits in producing_logits(rnd, prev, topk):
            nodes.setdefault(b, []).append((node, parent, logits))
        for b, found in nodes.items():
            rid = rnd.rids[b]
            if rid not in tokens:  # aborted: no final tokens to recompute from
                continue
            n = int(rnd.seq_lens[b])
            dense = DenseEagle(engine, tokens[rid], n)
            paths = _paths(rnd, b, {node: parent for node, parent, _ in found})
            for node, parent, logits in found:
                diff = float((logits.float() - dense.logits(paths[parent])).abs().max())
                if diff > tol:
                    raise OracleFailure(NAME, NAME, (
                        f"round {n_round} request {rid} ({n} committed) node {node}, proposed "
                        f"from node {parent} (draft path {list(paths[parent])}): draft logits "
                        f"differ from the dense head's by {diff:.3e} > {tol:.0e}"))
                checked += 1
    return checked


def prop_eagle_draft(cfg: RunConfig, device: str | None = None) -> None:
    """Law: with an EAGLE head, the logits that proposed every tree node of every round equal
    the dense head's along the node's ancestry (the module docstring's recomputation), within
    dtype tolerance; chains and trees, paged or not, graphs or eager, overlap, prefix cache."""
    if cfg.draft != "eagle":
        raise ValueError(f"eagle_draft needs draft='eagle', not {cfg.draft!r}")
    eng, _ = traced(cfg, device or default_device())
    check_eagle_draft_logits(eng, eng.recorder, cfg.topk)



def eagle_runs(on_gpu: bool, fixed: dict):
    """EAGLE-head runs in float32 (the dense recomputation's tolerance is set for it), every
    other axis drawn as for the other engine laws."""
    size = dict(max_batch=10) if on_gpu else dict(max_batch=6, max_prompt_len=24,
                                                  max_new_tokens=16)
    return run_configs(drafts=("eagle",), graphs=graphs_of(fixed), sampled=True,
                       prefix=(False, True), **size)


LAW = Law(
    name="eagle_draft", rank=70, prop=prop_eagle_draft, config=RunConfig,
    summary="an EAGLE head's draft logits == the dense head along each node's ancestry "
            "(oracle 5 for the drafter that has no twin)",
    strategy=eagle_runs, slices=grid(2, draft=("eagle",), cuda_graph=(False, True)),
    controls=("tests/test_eagle_draft.py::test_planted_mistakes_fail",))

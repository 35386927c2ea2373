"""Long contexts (vLLM #48894): runs whose positions pass every table length the drafter and
the target carry (harness.strategies.configs.long_context_configs).

Observables and references as kv_content and lossless_greedy (harness/references/dense.py,
harness/references/ties.py)."""
from __future__ import annotations

from harness.laws.kv_content import check_kv_content
from harness.laws.lossless_greedy import check_lossless
from harness.strategies.drawn_run import traced, greedy_reference_outputs
from harness.strategies.runs import default_device
from harness.strategies.configs import RunConfig
from harness.laws.declaration import Law, Slice, grid
from harness.strategies.configs import long_context_configs
from harness.strategies.tiers import graphs_of


def prop_long_context(cfg: RunConfig, device: str | None = None) -> None:
    """Past the drafter's own max_position and the target's RoPE-scaling boundary, the
    committed target and draft KV still equal a dense reference prefill (oracle 3; the
    reference builds its RoPE tables from the config, for every position it runs), and the
    output still equals plain greedy decoding (oracle 4)."""
    device = device or default_device()
    eng, out = traced(cfg, device)
    check_kv_content(eng.recorder, eng)
    ref, margins = greedy_reference_outputs(cfg, device, eng)
    check_lossless(out, ref, margins, eng.dtype)



def long_runs(on_gpu: bool, fixed: dict):
    if on_gpu:  # contexts of thousands of tokens, a drafter configured for 2048 among them
        return long_context_configs(4, (1500, 4000), graphs_of(fixed), (64, 2048),
                                    ("float32", "bfloat16"))
    return long_context_configs(graphs=graphs_of(fixed))


LAW = Law(
    name="long_context", rank=110, prop=prop_long_context, config=RunConfig,
    summary="KV content and lossless greedy past every position-table boundary",
    strategy=long_runs, slices=grid(2, cuda_graph=(False, True)),
    controls=("tests/test_laws_not_vacuous.py::"
              "test_long_context_rejects_a_table_padded_past_its_length",
              "cases/draft_rope_table_short"))

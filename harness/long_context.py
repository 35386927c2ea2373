"""Long contexts (vLLM #48894): runs whose positions pass every table length the drafter and
the target carry (harness.strategies.long_context_configs)."""
from __future__ import annotations

from harness.kv_content import check_kv_content
from harness.oracles import check_lossless
from harness.properties import _traced, greedy_reference_outputs
from harness.runs import default_device
from harness.strategies import RunConfig


def prop_long_context(cfg: RunConfig, device: str | None = None) -> None:
    """Past the drafter's own max_position and the target's RoPE-scaling boundary, the
    committed target and draft KV still equal a dense reference prefill (oracle 3; the
    reference builds its RoPE tables from the config, for every position it runs), and the
    output still equals plain greedy decoding (oracle 4)."""
    device = device or default_device()
    eng, out = _traced(cfg, device)
    check_kv_content(eng.recorder, eng)
    ref, margins = greedy_reference_outputs(cfg, device, eng)
    check_lossless(out, ref, margins, eng.dtype)

from cases.case import Case
from harness.strategies.configs import RunConfig

CASE = Case(
    fault="prefix_hit_draft_kv_uninitialized",
    story="SGLang #19897 (issue #19796): on a radix-cache hit the target reused its cached KV "
          "but the draft KV at the same slots had never been written (separate pools behind "
          "shared slot mappings): NaN logits on the first request with cached tokens. In our "
          "shared-slot engine the same class is the draft trusting the tree's raw match while "
          "the target reuses only whole pages up to the last prompt token: the positions in "
          "between are recomputed by the target alone and the draft KV there is never written.",
    prop="kv_content", oracle="kv_content",
    example=RunConfig(2, 3, 5, 1, "self", 6, 12, 8, 3, prefix_cache=True),
)

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
    prop="kv_content", check="kv_content",
    example=RunConfig(topk=2, num_steps=3, ndt=5, page_size=1, draft="self", batch_size=6,
                      max_prompt_len=12, max_new_tokens=8, seed=3, prefix_cache=True),
)

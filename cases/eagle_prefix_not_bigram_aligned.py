from cases.case import Case
from harness.strategies.configs import RunConfig

CASE = Case(
    fault="eagle_prefix_not_bigram_aligned",
    story="SGLang #10846: an EAGLE head's draft KV row p pairs the target hidden at p with "
          "token p+1, so SGLang keys EAGLE's radix tree by token bigrams. Keyed by tokens "
          "alone, a request whose prompt leaves the cached path right after a page reuses the "
          "cached row at the boundary, computed for another next token; acceptance fell from "
          "2.39 to 2.26 on MT-bench with the radix cache on.",
    prop="prefix_transparent", check="kv_content",
    # shared-prefix waves: a prompt diverging from an earlier one exactly at a page boundary
    example=RunConfig(topk=2, num_steps=3, ndt=5, page_size=1, draft="eagle", batch_size=6,
                      max_prompt_len=12, max_new_tokens=8, seed=3, prefix_cache=True),
)

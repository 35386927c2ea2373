from cases.case import Case
from harness.strategies.configs import RunConfig

CASE = Case(
    fault="eagle_prefix_not_bigram_aligned",
    story="SGLang #10846: an EAGLE head's draft KV row p pairs the target hidden at p with "
          "token p+1, so SGLang keys EAGLE's radix tree by token bigrams. Keyed by tokens "
          "alone, a request whose prompt leaves the cached path right after a page reuses the "
          "cached row at the boundary, computed for another next token; acceptance fell from "
          "2.39 to 2.26 on MT-bench with the radix cache on.",
    prop="prefix_transparent", oracle="kv_content",
    # shared-prefix waves: a prompt diverging from an earlier one exactly at a page boundary
    example=RunConfig(2, 3, 5, 1, "eagle", 6, 12, 8, 3, prefix_cache=True),
)

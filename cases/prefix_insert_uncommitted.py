from cases.case import Case
from harness.strategies.configs import RunConfig

CASE = Case(
    fault="prefix_insert_uncommitted",
    story="A finished request gives the tree its pages up to seq_len + 1: the pending bonus "
          "token's position counted as committed. Its target KV there is a rejected draft's "
          "(or never written), so a multi-turn follow-up that continues the conversation "
          "reuses speculative KV: wrong KV at that position, and wrong tokens after it.",
    prop="prefix_transparent", oracle="kv_content",
    # a continuation prompt (source prompt + its output + more) in a later wave
    example=RunConfig(1, 3, 4, 1, "perturbed", 6, 12, 8, 4, prefix_cache=True, pool_slack=0),
)

from cases.case import Case
from harness.strategies.configs import RunConfig

CASE = Case(
    fault="prefix_insert_uncommitted",
    story="A finished request gives the tree its pages up to seq_len + 1: the pending bonus "
          "token's position counted as committed. Its target KV there is a rejected draft's "
          "(or never written), so a multi-turn follow-up that continues the conversation "
          "reuses speculative KV: wrong KV at that position, and wrong tokens after it.",
    prop="prefix_transparent", check="kv_content",
    # a continuation prompt (source prompt + its output + more) in a later wave
    example=RunConfig(topk=1, num_steps=3, ndt=4, page_size=1, draft="perturbed", batch_size=6,
                      max_prompt_len=12, max_new_tokens=8, seed=4, prefix_cache=True, pool_slack=0),
)

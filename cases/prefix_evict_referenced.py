from cases.case import Case
from harness.strategies.configs import RunConfig

CASE = Case(
    fault="prefix_evict_referenced",
    story="Eviction that ignores reference counts: under pool pressure the tree frees the "
          "pages of a prefix a running request still reads, a newcomer is given them and "
          "overwrites them; the running request continues from someone else's KV.",
    prop="lossless_greedy", check="lossless_greedy",
    # a pool of one worst-case request: waves that share prefixes evict while running
    example=RunConfig(topk=2, num_steps=3, ndt=5, page_size=1, draft="perturbed", batch_size=6,
                      max_prompt_len=12, max_new_tokens=8, seed=13, prefix_cache=True,
                      pool_slack=0),
)

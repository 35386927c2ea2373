from cases.case import Case
from harness.strategies.configs import RunConfig

CASE = Case(
    fault="prefix_evict_referenced",
    story="Eviction that ignores reference counts: under pool pressure the tree frees the "
          "pages of a prefix a running request still reads, a newcomer is given them and "
          "overwrites them; the running request continues from someone else's KV.",
    prop="lossless_greedy", oracle="lossless_greedy",
    # a pool of one worst-case request: waves that share prefixes evict while running
    example=RunConfig(2, 3, 5, 1, "perturbed", 6, 12, 8, 13, prefix_cache=True, pool_slack=0),
)

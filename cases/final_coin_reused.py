from cases.case import Case
from harness.laws.distribution import DistConfig

CASE = Case(
    fault="final_coin_reused",
    story="SGLang #7207 / #7231 ('use a different coin for the final sampling'): the bonus / "
          "recovery draw reused a coin already spent on an acceptance decision. After a "
          "rejection that coin is known to lie above the rejected token's probability, so the "
          "recovered token is drawn from part of the CDF only: a biased output distribution.",
    prop="sampled_distribution", check="sampled_distribution",
    example=DistConfig(draft="self", shape="tree", draft_sampling="greedy", temperature=1.0,
                       top_k=0, top_p=1.0, cuda_graph=False, seed=12),
)

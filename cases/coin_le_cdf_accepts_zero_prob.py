from cases.case import Case
from harness.laws.sampling_edges import EXAMPLES

CASE = Case(
    fault="coin_le_cdf_accepts_zero_prob",
    story="SGLang #35798: TreeSpeculativeSamplingTargetOnly drew coins in [0, 1) but chose "
          "with `coin <= cdf`: at coin 0 a draft whose target probability is exactly 0 (cut by "
          "top-k / top-p) was accepted, and exact interior CDF boundaries fell into the "
          "preceding bucket. First seen with unseeded torch.rand coins in DFlash decoding.",
    prop="sampling_edges", check="sampling_edges",
    example=EXAMPLES[0],
)

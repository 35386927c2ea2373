from cases.case import Case
from harness.laws.random_streams import StreamConfig

CASE = Case(
    fault="draft_noise_shares_accept_stream",
    story="vLLM #54282: with probabilistic drafting the draft token at position P was sampled "
          "with noise keyed by the same Philox offset as the verifier's acceptance uniform, so "
          "the acceptance coin was bit for bit the draw that chose the draft: the output "
          "marginal leaned toward draft-preferred tokens (chi2 1585 against 69.8).",
    prop="random_streams", check="random_streams",
    example=StreamConfig(3, 4, 5, 9),
)

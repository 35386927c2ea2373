from cases.case import Case
from harness.laws.sampling_bounds import SamplingBoundsCase

CASE = Case(
    fault="recovered_token_out_of_vocab",
    story="vLLM GHSA-8wr5-jm2h-8r4f (PR #21876): with NaN target probs the recovered-token "
          "kernel's argmax landed on the -inf padding of the last vocab block, returning an "
          "id >= vocab_size that crashed the engine downstream.",
    prop="sampling_vocab", check="token_in_vocab",
    example=SamplingBoundsCase(vocab=100, bs=2, steps=2, extra=1, kinds=("nan", "zeros"), coin=0.5,
                               seed=0),
)

from cases.case import Case
from harness.strategies.configs import RunConfig

CASE = Case(
    fault="tp_vocab_shard_argmax_local",
    story="Vocabulary-parallel LM heads (Megatron, SGLang, vLLM) give each rank the logits of "
          "its vocabulary shard; a greedy verify or a draft top-k taken before the all-gather "
          "picks each rank's local best index, a different token on every rank and not the "
          "global argmax.",
    prop="tp_equals_single", oracle="tp_equals_single",
    example=RunConfig(1, 3, 4, 1, "eagle", 2, 12, 8, 3, tp_size=2),
)

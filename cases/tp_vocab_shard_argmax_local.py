from cases.case import Case
from harness.strategies.configs import RunConfig

CASE = Case(
    fault="tp_vocab_shard_argmax_local",
    story="Vocabulary-parallel LM heads (Megatron, SGLang, vLLM) give each rank the logits of "
          "its vocabulary shard; a greedy verify or a draft top-k taken before the all-gather "
          "picks each rank's local best index, a different token on every rank and not the "
          "global argmax.",
    prop="tp_equals_single", check="tp_equals_single",
    example=RunConfig(topk=1, num_steps=3, ndt=4, page_size=1, draft="eagle", batch_size=2,
                      max_prompt_len=12, max_new_tokens=8, seed=3, tp_size=2),
)

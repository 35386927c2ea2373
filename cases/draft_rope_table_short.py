from cases.case import Case
from harness.strategies.configs import RunConfig

CASE = Case(
    fault="draft_rope_table_short",
    story="vLLM #48894: the EAGLE-3 drafter was built from its own config "
          "(max_position_embeddings 2048), so its RoPE cache had 2048 rows; prompts past that "
          "hit a device assert when compiled and read out of bounds silently in eager mode.",
    # A read past the table raises on a CPU and in a compiled kernel, and reads whatever lies
    # beyond it in eager CUDA, where the drafted KV then differs from the dense reference.
    prop="long_context", check=("crash", "kv_content"),
    example=RunConfig(topk=1, num_steps=3, ndt=4, page_size=4, draft="eagle", batch_size=2,
                      max_prompt_len=200, max_new_tokens=12, seed=7, model="tiny-long",
                      min_prompt_len=160,
                      draft_max_position=64),
)

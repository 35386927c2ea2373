from cases.case import Case
from harness.strategies.configs import RunConfig

CASE = Case(
    fault="draft_rope_table_short",
    story="vLLM #48894: the EAGLE-3 drafter was built from its own config "
          "(max_position_embeddings 2048), so its RoPE cache had 2048 rows; prompts past that "
          "hit a device assert when compiled and read out of bounds silently in eager mode.",
    prop="long_context", oracle="crash",
    example=RunConfig(1, 3, 4, 4, "eagle", 2, 200, 12, 7, model="tiny-long", min_prompt_len=160,
                      draft_max_position=64),
)

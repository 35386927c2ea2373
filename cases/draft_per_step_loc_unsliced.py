from cases.case import Case, run

CASE = Case(
    fault="draft_per_step_loc_unsliced",
    story="SGLang's eager multi-step draft baked out_cache_loc into each step's metadata "
          "without taking that step's row of the [num_steps, bs*topk] layout (a wrongly "
          "permuted view), so draft forwards wrote their KV into other steps' slots.",
    prop="structure", check="draft_write_slots",
    example=run(2, steps=3, ndt=4),
)

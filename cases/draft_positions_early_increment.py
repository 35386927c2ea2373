from cases.case import Case, run

CASE = Case(
    fault="draft_positions_early_increment",
    story="SGLang's draft_forward ran positions.add_(1) at the top of each draft step, so "
          "draft forward i ran at prefix + i + 1: RoPE one off against the KV slot it wrote "
          "and against the draft extend (found by debug logging: 8 where 7 was due).",
    prop="structure", check="draft_positions",
    example=run(1, steps=2, ndt=3, bs=1),
)

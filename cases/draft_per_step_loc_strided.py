from cases.case import Case, run

CASE = Case(
    fault="draft_per_step_loc_strided",
    story="A per-step row of the draft layout was handed to a stride-1 store kernel as a "
          "strided view (SGLang added a per-step contiguity test): the kernel wrote step i's "
          "K/V to the wrong slots, which later draft steps then read.",
    prop="self_draft", check="self_draft",
    example=run(1, steps=3, ndt=4, draft="self"),
)

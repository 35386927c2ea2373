from cases.case import Case, run

CASE = Case(
    fault="draft_capture_positions_not_restored",
    story="SGLang's draft graph capture (run_once) left forward_batch.positions advanced by "
          "num_steps - 1 after each warmup/capture run, so the static buffer no longer held "
          "what replay assumed. Here each draft forward's positions derive inside the graph "
          "from the static branch positions, and the same class is those positions computed "
          "once, from the capture's padding, and never refilled: every replay runs each "
          "forward i at position i, whatever the request.",
    prop="structure", check="draft_positions",
    example=run(2, steps=3, ndt=4, bs=5, graph=True),
)

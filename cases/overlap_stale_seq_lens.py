from cases.case import Case, run

CASE = Case(
    fault="overlap_stale_seq_lens",
    story="vLLM #52179: under async scheduling the next step was built from the scheduler's "
          "num_computed_tokens, which lag the step in flight, instead of the worker's. Here "
          "round i+1 takes the host's committed lengths (one round old): positions, write "
          "slots and the attention prefix are off by round i's accept length.",
    prop="overlap_equals_sync", check="overlap_equals_sync",
    example=run(1, steps=3, ndt=4, draft="self", bs=2, seed=5),
)

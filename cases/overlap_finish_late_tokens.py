import dataclasses

from cases.case import Case, run

CASE = Case(
    fault="overlap_finish_late_tokens",
    story="Overlap scheduling: a request that finished in round i has already been launched "
          "into round i+1. Applying that round's results to it appends tokens it never "
          "returns in sync mode and counts a request-round that should not exist (SGLang's "
          "overlap scheduler discards them via the finished flag).",
    prop="overlap_equals_sync", check="overlap_equals_sync",
    example=dataclasses.replace(run(1, steps=3, ndt=4, draft="self", bs=3, seed=5), ragged=True),
)

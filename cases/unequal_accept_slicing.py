import dataclasses

from cases.case import Case, run

CASE = Case(
    fault="unequal_accept_slicing",
    story="SGLang #28496: per-request results were sliced as if every request of the batch "
          "had the same layout (hidden_states[i] for request i, spec V2's rows are strided by "
          "the draft width): silently truncated and cross-request misattributed outputs, seen "
          "only when requests accept different numbers of drafts.",
    prop="lossless_greedy", check="lossless_greedy",
    # the perturbed draft accepts none, some or all drafts, request by request
    example=dataclasses.replace(run(1, steps=3, ndt=4, draft="perturbed", bs=4, seed=5),
                                ragged=True),
)

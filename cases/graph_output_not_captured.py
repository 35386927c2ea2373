import dataclasses

from cases.case import Case, run

CASE = Case(
    fault="graph_output_not_captured",
    story="vLLM #37639: draft_logits_out was handed to the EAGLE speculator but not to its "
          "CUDA-graph manager, so replays never wrote the draft logits of steps >= 1; "
          "probabilistic rejection sampling read a stale q and acceptance dropped. Eager ran "
          "correctly: only the graph path was wrong.",
    prop="eager_vs_graph", check="eager_vs_graph",
    example=dataclasses.replace(run(1, steps=3, ndt=4, draft="perturbed", bs=5, graph=True, seed=5),
                                temperature=1.0, draft_sampling="probabilistic"),
)

from cases.case import Case, run

CASE = Case(
    fault="draft_extend_reads_graph_buffers_on_fallback",
    story="SGLang #22832: when the draft-extend graph could not run (batch past the largest "
          "capture), the hidden-state pool was still updated from the graph runner's static "
          "output buffers rather than the eager outputs. Here the static buffers hold fewer "
          "rows than the batch, so the update dies on the shape.",
    prop="structure", check="crash",
    example=run(1, steps=3, ndt=4, bs=9, graph=True),
)

from cases.case import Case
from harness.strategies.configs import RunConfig

CASE = Case(
    fault="tp_rank_divergent_padding",
    story="SGLang DP attention / TP with CUDA graphs: ranks decided their padded batch size "
          "(and graph or eager) each from their own view, so one rank replayed a padded "
          "graph while another ran the batch eagerly: the collectives met tensors of "
          "different shapes and the job hung or aborted.",
    prop="tp_equals_single", check="tp_equals_single",
    # 3 requests pad to the bucket 4 on rank 0; the worker runs them eagerly, unpadded.
    example=RunConfig(topk=1, num_steps=3, ndt=4, page_size=1, draft="eagle", batch_size=3,
                      max_prompt_len=12, max_new_tokens=8, seed=3, cuda_graph=True, graph_bs=(2, 4),
                      tp_size=2),
)

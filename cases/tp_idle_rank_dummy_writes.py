from cases.case import Case
from harness.strategies.configs import RunConfig

CASE = Case(
    fault="tp_idle_rank_dummy_writes",
    story="vLLM #56734, tensor-parallel form: the idle lanes every rank runs so that its "
          "collectives match rank 0's padded batch were built on a worker from its own last "
          "live request row instead of reserved row 0, so the dummy lanes wrote KV and draft "
          "state through that request's row on that rank's shard only.",
    prop="tp_equals_single", check="tp_equals_single",
    # 3 requests pad to the bucket 4: one idle lane per phase.
    example=RunConfig(topk=1, num_steps=3, ndt=4, page_size=1, draft="eagle", batch_size=3,
                      max_prompt_len=12, max_new_tokens=8, seed=5, cuda_graph=True, graph_bs=(2, 4),
                      tp_size=2),
)

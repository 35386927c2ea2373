"""Tensor parallelism over torch.distributed (gloo on CPU, NCCL on CUDA).

- comm.py: the data collectives a sharded forward runs (all-reduce, vocabulary gather,
  vocab-parallel embedding), as functional collectives a graph can capture
- shard.py: Megatron sharding of a full, seeded or loaded model, in place
- group.py: the process group, its spawned workers and the worker loop
- replicate.py: how rank 0's engine calls run on every rank, and the cross-rank checks
"""

"""Tensor parallelism over torch.distributed (gloo on CPU, NCCL on CUDA).

- comm.py: the data collectives a sharded forward runs (all-reduce, vocabulary gather,
  vocab-parallel embedding), as functional collectives a graph can capture, and on CUDA the
  peer-memory all-reduce fused with the norm after it
- peer_memory.py: the peer buffers of that all-reduce (symmetric memory), their abort word
- shard.py: Megatron sharding of a full, seeded or loaded model, in place
- group.py: the TP group: rank 0's workers (spawned, or prestarted, or torchrun's),
  commands, shutdown
- workers.py: rank 0's watch over its spawned workers; TPWorkerError
- worker.py: a worker's command loop, heartbeat, and death with rank 0
- process_groups.py: the torch.distributed groups, made and ended (destroy or abort)
- gpu_lock.py: one TP engine at a time per GPU across processes (opt-in)
- replicate.py: how rank 0's engine calls run on every rank, and the cross-rank checks
"""

"""The trainer as a torch.distributed program: one process per rank (gloo or NCCL).

env.py reads torchrun's environment and starts the process group, exchange.py runs the
collectives behind trainer.variants.exchange's Messages, launch.py is the one-machine `--nproc N`
launcher. The training loop itself is trainer.loop.run's, the same for every backend.
"""

"""A Gloo data-parallel job on CPU in which chosen ranks go non-finite, for ovf's tests.

    python3 -m torch.distributed.run --nproc_per_node 2 ranks.py \\
        [--inf-at RANK:BATCH[:DELAY] ...] [--steps N] [--rank-dirs DIR] [--sum-in-forward]

Every rank trains diverge.py's model on its own data and averages its gradients
with an all-reduce, as DistributedDataParallel does; the ranks start each batch
together (a barrier). ``--inf-at 1:2`` makes rank 1's ``blocks.1.amp`` output inf
from batch 2 on; ``--inf-at 0:2:1.5`` does the same on rank 0 after waiting 1.5 s
into that batch, so the ranks go non-finite in a known order. ``--rank-dirs DIR``
runs rank N in DIR/rankN, so kernel cores written as ``core`` (core_pattern) do not
overwrite each other. ``--sum-in-forward`` makes ``blocks.0`` a tensor-parallel
layer: its output is averaged over the ranks in the forward, by a functional collective
(DTensor's and tensor parallelism's route).
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
from diverge import Net  # the same directory
from torch import nn
from torch.distributed._functional_collectives import all_reduce as functional_all_reduce


class MeanOverRanks(nn.Module):
    """`inner`'s output averaged over the ranks, as a row-parallel layer sums its shards."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        summed = functional_all_reduce(self.inner(x), "sum", dist.group.WORLD)
        return summed / dist.get_world_size()


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--inf-at", action="append", default=[], metavar="RANK:BATCH[:DELAY]")
    p.add_argument("--rank-dirs", default=None, metavar="DIR")
    p.add_argument("--sum-in-forward", action="store_true")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.rank_dirs:
        os.makedirs(os.path.join(args.rank_dirs, f"rank{rank}"), exist_ok=True)
        os.chdir(os.path.join(args.rank_dirs, f"rank{rank}"))
    inf_at, delay = None, 0.0
    for spec in args.inf_at:
        r, batch, *wait = spec.split(":")
        if int(r) == rank:
            inf_at, delay = int(batch), float(wait[0]) if wait else 0.0
    torch.manual_seed(0)
    model = Net()
    if args.sum_in_forward:
        model.blocks[0] = MeanOverRanks(model.blocks[0])
    amp = model.get_submodule("blocks.1.amp")
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = torch.randn(4, 8, generator=torch.Generator().manual_seed(rank))
    for step in range(args.steps):
        dist.barrier()
        if step == inf_at:
            time.sleep(delay)
        amp.gain = 1e39 if inf_at is not None and step >= inf_at else 1.0
        optimizer.zero_grad()
        loss = model(data).pow(2).mean()
        loss.backward()
        for p in model.parameters():
            if p.grad is None:  # torch 2.6's functional all-reduce passes no gradient back
                continue
            dist.all_reduce(p.grad)
            p.grad /= world
        optimizer.step()
        print(f"rank {rank} step {step} loss {loss.item():.4e}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

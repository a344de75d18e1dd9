"""Real data parallelism on Gloo CPU ranks: DistributedDataParallel or FSDP2
(`fully_shard`, DTensor parameters), a shuffled DistributedSampler, and one dataset
sample (--bad I) whose square overflows float32: only the rank whose shard holds it
makes the inf; the other receives it through the gradients' all-reduce (DDP) or
reduce-scatter (FSDP2) and the optimizer's step. --wrap accelerate: Hugging Face
Accelerate's `Accelerator(cpu=True)` starts the process group and prepares the model
(DDP), the optimizer and a shuffled DataLoader (sharded its own way), as its users do.

    python3 -m torch.distributed.run --nproc_per_node 2 [-m ovf ...] sharded_loader.py \\
        --wrap ddp|fsdp2 [--bad I] [--steps N] [--overflowing-step] [--hold FILE]
    accelerate launch --multi_gpu --num_processes 2 [-m ovf ...] sharded_loader.py \\
        --wrap accelerate [--bad I] [--steps N]
    python3 sharded_loader.py --oracle-rank R [--bad I] [--steps N]
    python3 sharded_loader.py --oracle-batches JSON [--bad I]

Each rank prints the dataset indices of each batch. --hold FILE: after training,
each rank prints "rank R holds pid P" and waits (at most 120 s) until FILE exists,
so that its ring can be read live. --oracle-rank R is the oracle for rank R of a 2-rank
job, in one process without torch.distributed (the dispatch oracle aborts under FSDP2 on
torch 2.14): R's shard of the same shuffled sampler, the same unwrapped model, under
dispatch_oracle.py; it prints the first op whose output is non-finite while its inputs
were finite, or None where R's own computation makes none. --oracle-batches JSON (a
rank's batches of dataset indices, as the job printed them) is the same oracle over
those batches.
"""

import argparse
import contextlib
import json
import os
import time

import torch
import torch.distributed as dist
from dispatch_oracle import FirstNonFinite  # the same directory
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Squares(Dataset):
    """64 samples of 4 values; sample `bad` holds 1e30, whose square overflows float32."""

    def __init__(self, bad):
        self.bad = bad

    def __len__(self):
        return 64

    def __getitem__(self, i):
        x = torch.full((4,), (i + 1) / 64.0)
        if i == self.bad:
            x[0] = 1e30
        return x, i


class Square(torch.nn.Module):
    def forward(self, x):
        return x * x


def new_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 4), Square(), torch.nn.Linear(4, 2))


def accelerate_main(args):
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)  # Gloo ranks: the process group is Accelerate's
    rank = accelerator.process_index
    model = new_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loader = DataLoader(
        Squares(args.bad), batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(1)
    )
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for batch, (x, index) in zip(range(args.steps), loader, strict=False):
        print(f"rank {rank} batch {batch} indices {index.tolist()}", flush=True)
        optimizer.zero_grad()
        accelerator.backward(model(x).pow(2).mean())
        optimizer.step()
    # (no end_training(): its destroy_process_group aborted a rank at exit, with and
    # without ovf, "terminate called without an active exception", 1 run in 3)
    accelerator.wait_for_everyone()


def oracle_over(batches, bad):
    """The dispatch oracle over one rank's batches (the unwrapped model, steps of its own)."""
    model = new_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    dataset = Squares(bad)
    watch = FirstNonFinite(__file__)
    with watch:
        # `batch`: the step the oracle names (it reads the local variable)
        for batch, indices in enumerate(batches):  # noqa: B007
            x = torch.stack([dataset[i][0] for i in indices])
            optimizer.zero_grad()
            model(x).pow(2).mean().backward()
            optimizer.step()
    print(f"oracle: {watch.verdict()}", flush=True)


def wrapped(model, how):
    if how == "ddp":
        return torch.nn.parallel.DistributedDataParallel(model)
    from torch.distributed.device_mesh import init_device_mesh

    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:  # torch < 2.6
        from torch.distributed._composable.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--wrap", choices=("ddp", "fsdp2", "accelerate"), default="ddp")
    p.add_argument("--bad", type=int, default=-1)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--overflowing-step", action="store_true")
    p.add_argument("--oracle-rank", type=int, default=None, metavar="R")
    p.add_argument("--hold", default=None, metavar="FILE")
    p.add_argument("--oracle-batches", default=None, metavar="JSON")
    args = p.parse_args()
    if args.wrap == "accelerate":
        return accelerate_main(args)
    if args.oracle_batches is not None:
        return oracle_over(json.loads(args.oracle_batches), args.bad)
    oracle = args.oracle_rank is not None
    if oracle:
        rank, world = args.oracle_rank, 2
    else:
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    model = new_model()
    if not oracle:
        model = wrapped(model, args.wrap)
    # --overflowing-step: finite gradients, but weight decay 1e38 and lr 10 make the first
    # step write about 5e38 into every parameter: the optimizer's own overflow
    optimizer = (
        torch.optim.SGD(model.parameters(), lr=10.0, weight_decay=1e38)
        if args.overflowing_step
        else torch.optim.SGD(model.parameters(), lr=1e-3)
    )
    dataset = Squares(args.bad)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=1)
    loader = DataLoader(dataset, batch_size=4, sampler=sampler)
    watch = FirstNonFinite(__file__) if oracle else contextlib.nullcontext()
    with watch:
        for batch, (x, index) in zip(range(args.steps), loader, strict=False):
            print(f"rank {rank} batch {batch} indices {index.tolist()}", flush=True)
            optimizer.zero_grad()
            model(x).pow(2).mean().backward()
            optimizer.step()
    if oracle:
        print(f"oracle rank {rank}: {watch.verdict()}", flush=True)
        return
    if args.hold:
        print(f"rank {rank} holds pid {os.getpid()}", flush=True)
        deadline = time.monotonic() + 120
        while not os.path.exists(args.hold) and time.monotonic() < deadline:
            time.sleep(0.05)
    dist.destroy_process_group()
    print(f"rank {rank} done", flush=True)


if __name__ == "__main__":
    main()

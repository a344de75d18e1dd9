"""Two Gloo ranks under torch's launcher: rank 0's own multiplication overflows, both
all-reduce the result (or reduce-scatter it: --reduce-scatter; or all-gather it:
--all-gather), and each adds one to what came back -- on rank 1 the first non-finite value
arrives through the collective.
--healthy: no overflow anywhere.

    python3 -m torch.distributed.run --nproc_per_node 2 -m ovf --ops ... collective_carry.py
"""

import sys

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    scale = 1e30 if rank == 0 and "--healthy" not in sys.argv else 2.0
    x = (torch.rand(4) + 1) * scale  # data: not made from constants alone (a mask's way)
    y = x * x  # rank 0: 1e60 overflows float32
    if "--reduce-scatter" in sys.argv:
        # each rank gets half of the sum; rank 1's half holds rank 0's infs
        got = torch.empty(2)
        dist.reduce_scatter_tensor(got, y)  # Gloo copies its result into `got` as it waits
    elif "--all-gather" in sys.argv:
        # every rank gets both ranks' values: rank 0's infs among them
        got = torch.empty(8)
        dist.all_gather_into_tensor(got, y)
    else:
        dist.all_reduce(y)
        got = y
    z = got + 1  # rank 1: the inf came from rank 0
    print(f"rank {rank} finite {bool(z.isfinite().all())}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

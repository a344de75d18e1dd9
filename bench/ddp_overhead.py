"""Training-step time of a two-rank DistributedDataParallel job (Gloo, CPU, one thread a
rank) with ovf at module level against the plain step: the real-model benchmark's
resnet18 and GPT-style decoder (real_models_overhead.build), each rank on its own batch.

Modes, interleaved round-robin in the same job (the order rotating; both ranks switch
together, since every step's all-reduce keeps them in step), medians of rank 0's times:

  plain   DistributedDataParallel(model)
  ovf     the same, watched as python3 -m ovf watches it: DebugUnderflowOverflow on the
          DDP wrapper (every module's forward, parameters by their full path)

A step is zero_grad, forward, cross-entropy loss, backward (with the gradients'
all-reduce) and an AdamW step. Target (issue 25): ovf <= 1.05x plain.

    python3 bench/ddp_overhead.py [--quick] [--models resnet18,gpt]
"""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (pins threads before torch loads)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from real_models_overhead import build, loss_of  # noqa: E402

TARGET = 1.05
MODES = ["plain", "ovf"]
RANKS = 2


def bench(name, ovf, quick, rank):
    model, inputs, targets = build(name, quick)
    torch.manual_seed(rank)  # each rank its own batch, as a DistributedSampler gives it
    inputs = (
        torch.randn_like(inputs)
        if inputs.dtype.is_floating_point
        else torch.randint_like(inputs, int(inputs.max()) + 1)
    )
    model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

    def step():
        optimizer.zero_grad()
        loss_of(model, inputs, targets).backward()
        optimizer.step()

    for _ in range(2):  # warm-up: allocator, optimizer state, DDP's buckets
        step()
    rounds, steps = (2, 1) if quick else (7, 3)
    times = {mode: [] for mode in MODES}
    for r in range(rounds):
        for mode in MODES[r % 2 :] + MODES[: r % 2]:
            watcher = ovf.DebugUnderflowOverflow(model) if mode == "ovf" else None
            step()  # a first step per mode: hooks and caches warm
            dist.barrier()
            started = time.perf_counter()
            for _ in range(steps):
                step()
            times[mode].append((time.perf_counter() - started) / steps)
            if watcher is not None:
                watcher.remove()
    return {mode: _common.median(values) for mode, values in times.items()}


def rank_main(rank, port, args, results):
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(RANKS),
        GLOO_SOCKET_IFNAME="lo",
        USE_LIBUV="0",  # Debian's torch 2.6 is built without libuv, which its TCPStore asks for
    )
    ovf = _common.import_ovf()
    dist.init_process_group("gloo", rank=rank, world_size=RANKS)
    for name in args.models.split(","):
        t = bench(name, ovf, args.quick, rank)
        if rank == 0:
            results[name] = t
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None):
    args = _common.model_bench_arguments(__doc__, "resnet18,gpt", argv)
    _common.print_machine(
        "two-rank DDP step overhead (bench/ddp_overhead.py)", _common.import_ovf()
    )
    print(f"\n{RANKS} Gloo ranks on this host, {_common.THREADS} thread each")
    print("median seconds per step (rank 0), and ovf's ratio to the plain step")
    header = f"{'model':<10}" + "".join(f"{m:>12}" for m in MODES) + f"{'ovf/plain':>12}"
    print(header)
    print("-" * len(header))
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(rank_main, args=(free_port(), args, results), nprocs=RANKS)
        results = dict(results)
    missed = []
    for name in args.models.split(","):
        t = results[name]
        ratio = t["ovf"] / t["plain"]
        print(f"{name:<10}" + "".join(f"{t[m]:>12.4f}" for m in MODES) + f"{ratio:>12.3f}")
        if ratio > TARGET:
            missed.append(f"{name}: ovf {ratio:.3f}x plain > {TARGET}x")
    print()
    _common.print_targets(missed, f"target met: ovf <= {TARGET}x plain")
    print(_common.load_line("end"))
    return _common.exit_status(missed, args.quick)


if __name__ == "__main__":
    sys.exit(main())

"""What keeps a replay on this rank (ovf._replay_collectives.CollectivesRefused), in a
one-rank Gloo group: inside, every route to the other ranks raises TalksToRanks naming
what was called -- torch.distributed's function, a functional collective imported by
name, the dispatcher's op called directly, and inference-mode tensors, which skip the
Autograd key; after, the same calls run again (the ops' own kernels are back); outside a
distributed run nothing is registered."""

import subprocess
import textwrap

from build_paths import PACKAGE_PARENT, PYTHON

CHECK = textwrap.dedent(
    """
    import sys
    import torch
    import torch.distributed as dist
    from torch.distributed._functional_collectives import all_reduce as functional_all_reduce
    from ovf._replay_collectives import CollectivesRefused, TalksToRanks

    with CollectivesRefused() as outside:
        print("outside a group:", len(outside.libraries), len(outside.saved))
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    group = dist.group.WORLD
    calls = {
        "dist.all_reduce": lambda x: dist.all_reduce(x),
        "functional": lambda x: functional_all_reduce(x, "sum", group).wait(),
        "torch.ops": lambda x: torch.ops._c10d_functional.all_reduce(x, "sum", "0"),
    }

    def each(label):
        for mode, context in (("grad", torch.enable_grad), ("inference", torch.inference_mode)):
            for name, call in calls.items():
                with context():
                    x = torch.ones(2)
                    try:
                        call(x)
                        print(label, mode, name, "ran")
                    except TalksToRanks as e:
                        print(label, mode, name, "refused:", e)

    with CollectivesRefused():
        each("inside")
    each("after")
    """
)


def test_every_route_to_the_other_ranks_is_refused_inside_and_runs_after():
    out = subprocess.run(
        [PYTHON, "-c", CHECK],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": PACKAGE_PARENT, "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )
    assert out.returncode == 0, out.stderr
    refused = {
        "dist.all_reduce": "torch.distributed.all_reduce",
        "functional": "torch.ops._c10d_functional.all_reduce",
        "torch.ops": "torch.ops._c10d_functional.all_reduce",
    }
    expected = ["outside a group: 0 0"]
    for label in ("inside", "after"):
        for mode in ("grad", "inference"):
            for name, said in refused.items():
                what = f"refused: {said}" if label == "inside" else "ran"
                expected.append(f"{label} {mode} {name} {what}")
    assert out.stdout.splitlines() == expected, out.stdout

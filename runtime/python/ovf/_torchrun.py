"""python3 -m ovf._torchrun ARGS...: torch's launcher (torch.distributed.run, the same
arguments) whose TCPStores follow USE_LIBUV, as torch.distributed's documentation says.

torch 2.4 made libuv the TCPStore's default backend and reads USE_LIBUV=0 to use the old
one, but only in some places (create_c10d_store, env:// without an agent store). The
launcher's static rendezvous (--master_addr/--master_port), its c10d rendezvous backend
and the ranks' env:// rendezvous under the launcher (a client of the agent's store) make
their stores with the default, so a torch built without libuv (Debian's 2.6) can neither
start a job nor join one: "use_libuv was requested but PyTorch was build without libuv
support". follow_use_libuv() makes those stores take USE_LIBUV's value (libuv unless it
is "0"); nothing else changes. `python3 -m ovf.netcheck --nproc-per-node N` starts its
ranks through this module, with USE_LIBUV=0, and each rank calls it before joining.
"""

import importlib
import os
import sys


def follow_use_libuv():
    """Makes the launcher's TCPStores default to USE_LIBUV; True if anything changed
    (torch before the libuv backend has no such option, and needs nothing)."""
    import torch.distributed as dist

    original = dist.TCPStore
    if "use_libuv" not in (original.__init__.__doc__ or ""):
        return False

    class TCPStore(original):
        """torch's TCPStore, its backend chosen by USE_LIBUV unless a caller chose."""

        def __init__(self, *args, **kwargs):
            kwargs.setdefault("use_libuv", os.environ.get("USE_LIBUV", "1") == "1")
            super().__init__(*args, **kwargs)

    from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend, static_tcp_rendezvous

    # (`import torch.distributed.rendezvous as x` gives the function of that name)
    rendezvous = importlib.import_module("torch.distributed.rendezvous")

    dist.TCPStore = TCPStore  # dynamic_rendezvous and elastic.utils look it up there
    for module in (rendezvous, c10d_rendezvous_backend, static_tcp_rendezvous):  # by name
        if getattr(module, "TCPStore", None) is original:
            module.TCPStore = TCPStore
    return True


def main(argv=None):
    follow_use_libuv()
    from torch.distributed import run

    run.main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()

"""What keeps a replay on this rank: the other ranks are not replaying, so a collective
the replayed forward calls would wait for them forever (gloo's and NCCL's timeouts are
half an hour and more). A model whose forward talks to them by design is not replayed
(talks_to_other_ranks); a collective called anyway ends the replay where it is called
(CollectivesRefused), before it is sent.

A forward reaches the other ranks two ways, and both are refused:
- torch.distributed's functions, looked up by module attribute (Megatron-style layers,
  all_to_all in mixture-of-experts): replaced while the replay runs, so that the refusal
  names the function the model called rather than the op it reaches;
- the dispatcher's collective ops, whoever calls them: functional collectives
  (torch.distributed._functional_collectives, DTensor's redistribution, code that
  imported a function by name), torch.ops.c10d.* directly. A kernel that refuses is
  registered for them at the Autograd key, which comes before every backend's kernel,
  and at the CPU and CUDA keys (inference-mode tensors skip Autograd), and removed after
  the replay. (Not a TorchDispatchMode: its redispatch runs each op twice through the
  dispatcher, and ovf's op observer would see every op twice.)
"""

import warnings

import torch


class TalksToRanks(BaseException):
    """A collective the replay called (its name): the other ranks, not replaying, would
    never join it. Not an Exception: the model must not catch it."""

    def said(self):
        """How a replay's line says where it stopped (before "before any op made ...")."""
        return f"stopped at {self}, which the other ranks would not join,"


_FUNCTIONS = (
    "all_reduce all_gather all_gather_into_tensor all_gather_object all_to_all"
    " all_to_all_single broadcast broadcast_object_list reduce reduce_scatter"
    " reduce_scatter_tensor gather scatter barrier send recv isend irecv"
).split()

# The dispatcher's namespaces of ops that talk to other ranks; c10d::check_for_nan is
# c10d's but local.
_OP_NAMESPACES = ("c10d", "_c10d_functional", "_c10d_functional_autograd", "c10d_functional")
_LOCAL_OPS = {"c10d::check_for_nan"}
# Where the refusing kernel goes: Autograd comes before every backend's kernel; tensors
# made in inference mode carry no Autograd key and reach the backends' own directly.
_KEYS = ("Autograd", "CPU", "CUDA")


def distributed():
    dist = torch.distributed
    return dist.is_available() and dist.is_initialized()


def talks_to_other_ranks(module):
    """What in `module` runs collectives in its forward, in a distributed run: SyncBatchNorm's
    statistics, FSDP's all-gathers, DTensor parameters (tensor parallelism); "" for none.
    (DDP's own collectives are its wrapper's, which the replay does not call.)"""
    if not distributed():
        return ""
    for sub in module.modules():
        kind = type(sub).__name__
        if kind == "SyncBatchNorm" or "FullyShardedDataParallel" in kind or kind.startswith("FSDP"):
            return kind
        if any(type(p).__name__ == "DTensor" for p in sub.parameters(recurse=False)):
            return f"{kind} with DTensor parameters"
    return ""


def collective_ops():
    """The dispatcher's ops that talk to other ranks, as "namespace::name[.overload]"."""
    return sorted(
        name
        for name in torch._C._dispatch_get_all_op_names()
        if name.split("::", 1)[0] in _OP_NAMESPACES and name not in _LOCAL_OPS
    )


def _refuse(name):
    def refused(*args, **kwargs):
        raise TalksToRanks(name)

    return refused


class CollectivesRefused:
    """Inside, every collective raises TalksToRanks instead of being sent (in a
    distributed run only; outside one there is nobody to wait for)."""

    def __enter__(self):
        self.saved, self.libraries = {}, {}
        if not distributed():
            return self
        dist = torch.distributed
        for name in _FUNCTIONS:
            if hasattr(dist, name):
                self.saved[name] = getattr(dist, name)
                setattr(dist, name, _refuse(f"torch.distributed.{name}"))
        with warnings.catch_warnings():
            # an op with an Autograd kernel of its own is overridden until __exit__
            warnings.simplefilter("ignore")
            for op in collective_ops():
                namespace, name = op.split("::", 1)
                try:
                    if namespace not in self.libraries:
                        self.libraries[namespace] = torch.library.Library(namespace, "IMPL")
                    for key in _KEYS:
                        self.libraries[namespace].impl(
                            name, _refuse(f"torch.ops.{namespace}.{name}"), key
                        )
                except (RuntimeError, ValueError):
                    # a torch that takes no Python kernel for it: the replay runs without
                    # this one refusal rather than fail before it began (__enter__ never
                    # raises: __exit__ would not run to take back what it registered)
                    continue
        return self

    def __exit__(self, *_):
        for library in self.libraries.values():
            library._destroy()  # the ops' own kernels are the ones dispatched again
        for name, function in self.saved.items():
            setattr(torch.distributed, name, function)

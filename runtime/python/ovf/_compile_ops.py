"""--ops inside torch.compile'd graphs (issue 27, part 1): the op and line that made a
NaN/Inf in compiled code, without a graph break and without a host synchronisation
per kernel beyond the statistics of what is checked.

Inductor lowers the post-grad ATen graph into its kernels; the ATen ops there run in
fused code that no RecordFunction sees. With ops observed when a graph is compiled,
a post-grad pass (Inductor's post_grad_custom_post_pass) puts a call of
ovf::node_check after the nodes it checks, with the node's label (its ATen op, the
module it runs in -- Dynamo's nn_module_stack, named as ovf names it through the
graph's own ovf::module_enter calls -- and the user's line from the node's recorded
stack trace) and the tensors its values were computed from. At run time the check
reads its outputs' one-pass statistics; where they hold NaN/Inf and what they were
computed from does not, it runs those nodes again eagerly, each named by its own
module and line
(_ovf.set_op_site), with the op observer on: the first that makes the value is judged
as an eager --ops run judges it (producer or carrier, why, float64 verdict), and the
stop, the report and the raise come from there.

Two granularities (OVF_COMPILED_OPS):
- "kept" (the default): the outputs Inductor writes to memory anyway -- the graph's
  outputs (returned or saved for the backward), module inputs and outputs (ovf's
  frames hold them), and the outputs of the ops it runs as kernels of their own
  (matrix products, convolutions, attention). The fused ops between them are run
  again together, so the op and line named are still the one op's. Cheap: fusion
  stays, and so do the compiled code's numbers.
- "every": every node's output. Every output is written to memory, so nothing fuses
  (slower), and a low-precision model's numbers may change: a fused float16 kernel
  computes in float32 and rounds once; unfused, each op's output is rounded, as in
  eager code.

Backward graphs (AOTAutograd's) get their checks too when the backward is observed
(--backward): their nodes are named as --backward names eager backward ops, by the
forward op whose gradient they compute (autograd's sequence number, which the forward
graph's nodes carry too), its module and line.
Not run again: random ops (a group with one: its draws would differ).
Graphs compiled before ops were observed stay as they were.
"""

import os
import re
import sys
import typing

import torch

from . import _ovf, _replay_check

_labels = []  # label id -> _Check
_STACK_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
# Ops Inductor runs as kernels of their own (extern calls), whose outputs it writes to
# memory anyway: a check there costs no fusion (nor a rounding a fused kernel skips).
_EXTERN = {
    "mm",
    "addmm",
    "bmm",
    "baddbmm",
    "convolution",
    "_convolution",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_cudnn_attention",
}


class _Check:
    """What one ovf::node_check names and runs again: the checked node's outputs were
    computed by `nodes` [(target, args, kwargs, name, module name, line, forward op)] in
    graph order (forward op: None in a forward graph, else the op a backward node
    differentiates), from `frontier` (names of the tensors the check is handed)."""

    def __init__(self, nodes, frontier, runnable):
        self.nodes, self.frontier, self.runnable = nodes, frontier, runnable


def granularity():
    """OVF_COMPILED_OPS (python3 -m ovf --compiled-ops): "kept" or "every"."""
    value = os.environ.get("OVF_COMPILED_OPS", "") or "kept"
    if value not in ("kept", "every"):
        _say_once(
            f"ovf: OVF_COMPILED_OPS={value!r} is neither 'kept' nor 'every': checking the"
            " outputs Inductor keeps (kept)"
        )
        return "kept"
    return value


def _observed(kind):
    """Whether "ops" (or "backward") are observed now, as a graph is compiled."""
    from ._options import OBSERVE_BITS

    return bool(_ovf.control()["observe"] & OBSERVE_BITS[kind])


def _is_aten(node):
    target = node.target
    return (
        node.op == "call_function"
        and isinstance(target, torch._ops.OpOverload)
        and (target.namespace in ("aten", "prims"))
    )


def _floating(value):
    return isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex())


def _outputs_of(node):
    """The floating tensors a node makes, as graph nodes: itself, or its getitems."""
    value = node.meta.get("val")
    if _floating(value):
        return [node]
    if isinstance(value, (tuple, list)):
        return (
            [
                u
                for u in node.users
                if getattr(u.target, "__name__", "") == "getitem" and _floating(u.meta.get("val"))
            ]
            if all(u.op == "call_function" for u in node.users)
            else []
        )
    return []


def _is_tensor(node):
    return isinstance(node.meta.get("val"), torch.Tensor)


def _tensor_inputs(node):
    found = []
    torch.fx.node.map_arg((node.args, node.kwargs), lambda a: found.append(a))
    return [a for a in found if _is_tensor(a)]


def _user_line(stack_trace, skip):
    """The innermost frame of a recorded stack trace outside torch and ovf, in the
    runtime's words ("model.py:25 in forward"), or ""."""
    for path, line, function in reversed(_STACK_FRAME.findall(stack_trace or "")):
        if not any(path.startswith(d) for d in skip):
            return f"{os.path.basename(path)}:{line} in {function}"
    return ""


def _package_dirs():
    import ovf

    return tuple(os.path.dirname(m.__file__) + os.sep for m in (torch, ovf))


def _module_path(node):
    """The node's innermost module as a path from the compiled module (Dynamo's
    nn_module_stack: "L['self'].blocks.0.attn", older "L['self']._modules['blocks']..."),
    in eager words ("blocks.0.attn"); None where it has none."""
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return None
    path = re.sub(r"^L\['[^']*'\]", "", str(list(stack.values())[-1][0]))
    path = re.sub(r"\['([^']*)'\]|\[(\d+)\]", lambda m: "." + (m.group(1) or m.group(2)), path)
    return ".".join(p for p in path.split(".") if p and p not in ("_modules", "_orig_mod"))


def instrument(graph):
    """The post-grad pass: checks after the nodes of a graph (see above); a backward
    graph's with the backward observed too."""
    backward = any(n.op == "placeholder" and n.name.startswith("tangents") for n in graph.nodes)
    if not _observed("ops") or (backward and not _observed("backward")):
        return
    skip = _package_dirs()
    every = granularity() == "every"
    nodes = list(graph.nodes)
    returned, framed = set(), set()  # graph outputs; module inputs and outputs (ovf's frames)
    for n in nodes:
        if n.op == "output":
            torch.fx.node.map_arg(n.args, returned.add)
        elif _is_effect(n, torch.ops.ovf.module_frame.default):
            torch.fx.node.map_arg(n.args[3:], framed.add)
    site = _backward_site if backward else _forward_sites(nodes, skip)
    checked = []
    for n in nodes:
        if not _is_aten(n) or n.target.is_view or not _tensor_inputs(n):
            continue
        outputs = _outputs_of(n)
        kept = n.target.overloadpacket.__name__ in _EXTERN or any(
            o in returned or o in framed for o in outputs
        )
        if outputs and (every or kept):
            checked.append(outputs)
    checked_outputs = {o for outs in checked for o in outs}
    # A check is an ordered side effect (as ovf's module hooks are): called through
    # with_effects, which every Inductor lowers as a kernel it keeps, in order (a plain
    # call returning nothing is dropped by torch 2.6's scheduler). The lowering reads no
    # value of the token: any tensor of the graph stands for it.
    token = next((n for n in nodes if n.op == "placeholder" and _is_tensor(n)), None)
    if token is None:
        return
    for outputs in checked:
        group, frontier = _group(outputs, checked_outputs)
        steps = [(g.target, g.args, g.kwargs, g.name, *site(g, skip)) for g in group]
        # Not run again: random draws would differ; a symbolic size is no tensor to hand over
        runnable = all(_is_tensor(f) for f in frontier) and not any(
            _is_aten(g) and torch.Tag.nondeterministic_seeded in g.target.tags for g in group
        )
        frontier = [f for f in frontier if _is_tensor(f)]
        label = len(_labels)
        _labels.append(_Check(steps, [f.name for f in frontier], runnable))
        with graph.inserting_after(outputs[-1]):
            call = graph.call_function(
                torch.ops.higher_order.with_effects,
                (token, torch.ops.ovf.node_check.default, label, outputs, frontier),
            )
        call.meta["val"] = (token.meta["val"], None)


# Autograd's sequence number -> (the forward op that made that node, ovf's name of its
# module), from the forward graphs: a backward graph's node names the forward op whose
# gradient it computes, as --backward does in eager code (the op that makes a node comes
# last among the ops with its number).
_forward_ops = {}


def _forward_sites(nodes, skip):
    """site(node, skip) -> (module name, line, None) of a forward graph's nodes."""
    from . import _compile

    entered = []  # (module path in the graph, ovf's name of it) of each pre-hook's call
    for n in nodes:
        if _is_effect(n, torch.ops.ovf.module_enter.default):
            module = _compile.module_or_none(n.args[2])
            entered.append((_module_path(n), _ovf.watched_name(module) if module else None))
    base = _compiled_module_name(entered)
    for n in nodes:
        if _is_aten(n) and n.meta.get("seq_nr") is not None:
            _forward_ops[n.meta["seq_nr"]] = (
                n.target._schema.name,
                _eager_name(base, _module_path(n)),
            )

    def site(node, skip):
        line = _user_line(node.meta.get("stack_trace"), skip) if _is_aten(node) else ""
        return _eager_name(base, _module_path(node)), line, None

    return site


def _backward_site(node, skip):
    """(module name, line, forward op) of a backward graph's node: its forward op's."""
    op, module = _forward_ops.get(node.meta.get("seq_nr"), ("", None))
    line = _user_line(node.meta.get("stack_trace"), skip) if _is_aten(node) else ""
    return module, line, op


def _compiled_module_name(entered):
    """ovf's name of the compiled module, from a module the graph calls (its path in the
    graph against ovf's name of it); None where the graph calls none ovf named."""
    for path, name in entered:
        if name is None or path is None:
            continue
        if not path:
            return name
        if name == path:
            return ""
        if name.endswith("." + path):
            return name[: -len(path) - 1]
    return None


def _eager_name(base, path):
    """ovf's name of the module at `path` in a graph of the module named `base`."""
    if base is None or path is None:
        return None
    return ".".join(part for part in (base, path) if part)


def _is_effect(node, op):
    return (
        node.op == "call_function"
        and node.target is torch.ops.higher_order.with_effects
        and len(node.args) > 2
        and node.args[1] is op
    )


def _group(outputs, checked_outputs):
    """The nodes that computed `outputs` since the tensors they were handed
    (placeholders, other checked outputs), in graph order, and those tensors."""
    group, frontier, seen = set(), [], set()
    todo = list(outputs)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op != "call_function" or (n in checked_outputs and n not in outputs):
            frontier.append(n)
            continue
        group.add(n)
        torch.fx.node.map_arg((n.args, n.kwargs), todo.append)
    order = {n: i for i, n in enumerate(next(iter(outputs)).graph.nodes)}
    return sorted(group, key=order.__getitem__), sorted(frontier, key=order.__getitem__)


def _nonfinite(t):
    stats = _replay_check.stats_of(t)
    return stats is not None and _replay_check.holds_nonfinite(stats)


def check(label, outputs, frontier):
    """ovf::node_check at run time: where `outputs` hold NaN/Inf that `frontier` did not,
    runs the label's nodes again eagerly, observed, each named by its module and line."""
    if not any(_nonfinite(t) for t in outputs if _floating(t)):
        return
    if any(_nonfinite(t) for t in frontier if _floating(t)):
        return  # carried in: the op that made it was checked before
    spec = _labels[label] if 0 <= label < len(_labels) else None
    if spec is None or not spec.runnable:
        return
    values = dict(zip(spec.frontier, frontier, strict=False))
    # Raised here once they ran (an asynchronous raise inside compiled code is lost
    # on its way out of the graph: SystemError).
    _ovf.hold_op_raises(True)
    try:
        for target, args, kwargs, name, module, line, gradient_of in spec.nodes:
            a, k = torch.fx.node.map_arg((args, kwargs), lambda n: values[n.name])
            _ovf.set_op_site(module, line, gradient_of)
            values[name] = target(*a, **k)
    except Exception as e:  # noqa: BLE001 -- ovf's check fails, never the compiled step
        _say_once(f"ovf: a compiled graph's nodes could not run again ({type(e).__name__}: {e})")
    finally:
        _ovf.set_op_site(None, "", None)
        _ovf.hold_op_raises(False)
    _ovf.deliver_pending_raise()


_said = set()


def _say_once(line):
    if line not in _said:
        _said.add(line)
        print(line, file=sys.stderr, flush=True)


def _generated_code_dir():
    """Inductor's cache directory, where its generated Python lives ("" if unknown)."""
    try:
        from torch._inductor.runtime.runtime_utils import cache_dir
    except ImportError:
        return ""
    return cache_dir()


def register():
    """ovf::node_check, and the pass (chained after a pass the program set itself)."""

    @torch.library.custom_op("ovf::node_check", mutates_args=())
    def node_check(
        label: int, outputs: typing.List[torch.Tensor], frontier: typing.List[torch.Tensor]
    ) -> None:
        check(label, outputs, frontier)

    @node_check.register_fake
    def _(label, outputs, frontier):
        return None

    from torch._higher_order_ops.effects import _EffectType, _register_effectful_op

    _register_effectful_op(torch.ops.ovf.node_check.default, _EffectType.ORDERED)
    _ovf.set_generated_code_dir(_generated_code_dir())
    from torch._inductor import config

    theirs = config.post_grad_custom_post_pass

    def post_grad_pass(graph):
        if theirs is not None:
            theirs(graph)
        instrument(graph)

    config.post_grad_custom_post_pass = post_grad_pass

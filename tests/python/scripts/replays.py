"""One module event per case, for the replay at module events (module mode, no --ops):
python3 -m ovf [--on-nan warn] [--no-replay] [--capture optimizer] replays.py CASE.
Step 1 goes wrong."""

import hashlib
import sys

import torch
from torch import nn

CALLS = [0]  # Block's forwards so far: state outside the generators


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.5)
        self.norm = nn.BatchNorm1d(8)

    def forward(self, x, case):
        CALLS[0] += 1
        h = self.norm(self.drop(self.fc(x)))
        if case == "dropout_divides":
            # 0 where the step's dropout mask drops: how many depends on the generator
            return h / self.drop(torch.ones_like(h))  # made: dropout_divides
        if case == "overflow":
            return h * 1e38 * 1e38  # made: overflow
        if case == "outside_noise" and CALLS[0] == 2:
            return h * float("inf")  # the run's second call only: a replay is the third
        if case == "backward_noise" and CALLS[0] == 2:
            # the run's call only: twice the values, and sqrt's gradient at 0 in its backward
            return 2 * h + (h - h.detach()).pow(2).sqrt()
        if case in ("upstream_noise", "noise_then_overflow") and CALLS[0] == 2:
            return h * 1e30  # finite, the run's call only: Scale overflows after it
        return h


class Scale(nn.Module):
    # |x| < 10: finite after one call, past float32's max after two
    def forward(self, x):
        big = x * 1e30  # made: second_call
        return big


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.scale = Scale()
        self.head = nn.Linear(8, 2)
        self.gate = nn.Parameter(torch.ones(2))  # in the loss only in adam_eps0's step

    def forward(self, x, case=""):
        if case == "input_in_place":
            x.mul_(2)  # the step writes its input
            return self.head(torch.log(x - x))
        if case == "upstream_noise":
            return self.head(self.scale(self.block(x, case)))
        if case in ("second_call", "noise_then_overflow"):
            return self.head(self.scale(self.scale(self.block(x, case))))
        if case == "backward_in_model":
            # 0, finite; its gradient is inf * 0 (the backward's NaN, inside the model)
            h = self.block(x, "")
            return self.head((h - h.detach()).pow(2).sqrt())  # made: backward_in_model
        if case in ("adam_eps0", "agreed_adam_eps0"):
            # its gradient is exactly 0: Adam(eps=0)'s first update of it is 0/0
            return self.head(self.block(x, "")) + 0 * self.gate.sum()
        if case == "all_reduce_in_forward":
            h = self.block(x, "")
            torch.distributed.all_reduce(h)  # a layer that sums over the ranks
            return self.head(h * 1e38 * 1e38)
        if case == "functional_all_reduce_in_forward":
            # DTensor's and tensor parallelism's route, a function imported by name: the
            # dispatcher's _c10d_functional::all_reduce, no torch.distributed attribute
            h = functional_all_reduce(self.block(x, ""), "sum", torch.distributed.group.WORLD)
            return self.head(h * 1e38 * 1e38)
        return self.head(self.block(x, case))


class Loss(nn.Module):
    def forward(self, out, case):
        if case == "loss_module":
            return torch.log(out.abs() - out.abs()).mean()  # outside Net's forward
        if case == "backward_nan":
            return (out - out.detach()).pow(2).sum().sqrt()  # 0; its gradients are 0 * inf
        return out.pow(2).mean()


class AgreedAdam(torch.optim.Adam):
    """Adam that steps only where every rank's gradients are finite: a count of non-finite
    values all-reduced inside its step, as loss scalers and sharded optimizers agree on a
    skip."""

    def step(self, closure=None):
        found = torch.zeros(1)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    found += (~torch.isfinite(p.grad)).sum()
        torch.distributed.all_reduce(found)
        return super().step(closure) if found.item() == 0 else None


def state_digest(net, opt):
    """Every parameter, gradient, buffer, optimizer slot and the generator's state."""
    h = hashlib.sha256()
    for t in [*net.parameters(), *net.buffers(), torch.get_rng_state()]:
        h.update(t.detach().numpy().tobytes())
    for p in net.parameters():
        h.update(b"none" if p.grad is None else p.grad.numpy().tobytes())
    for slots in opt.state.values():
        for v in slots.values():
            h.update(v.numpy().tobytes() if isinstance(v, torch.Tensor) else repr(v).encode())
    return h.hexdigest()


case = sys.argv[1]
torch.manual_seed(0)
net, loss_fn = Net(), Loss()
if case in (
    "sync_batchnorm",
    "all_reduce_in_forward",
    "functional_all_reduce_in_forward",
    "agreed_adam_eps0",
):
    # a one-rank Gloo group: a distributed run
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    from torch.distributed._functional_collectives import all_reduce as functional_all_reduce
if case == "sync_batchnorm":  # a model with SyncBatchNorm (unused: it needs a GPU)
    net.sync = nn.SyncBatchNorm(8)
    case = "overflow"
if case == "adam_eps0":
    opt = torch.optim.Adam(net.parameters(), lr=0.01, eps=0.0)
elif case == "agreed_adam_eps0":
    opt = AgreedAdam(net.parameters(), lr=0.01, eps=0.0)
else:
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
for step in range(3):
    x = torch.randn(16, 8)
    given = case if step == 1 else ""
    if given == "data_nan":
        x[3, 0] = float("nan")
    loss = loss_fn(net(x, given), given)
    opt.zero_grad()
    loss.backward()
    opt.step()  # made: adam_eps0
    print(f"step {step} done", flush=True)
print("state", state_digest(net, opt), flush=True)

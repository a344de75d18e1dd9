"""One producing op per case, for the verdict (the op re-run on its own inputs, on its
device and in float64): python3 -m ovf --ops verdicts.py CASE."""

import sys
import warnings

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

_calls = [0]


def _flaky_hypot(x, y):
    """aten::hypot's CPU kernel, replaced: its first call makes one inf, as a faulty
    kernel would, once; a re-run on the same inputs does not make it again."""
    _calls[0] += 1
    out = np.hypot(x.detach().numpy(), y.detach().numpy())  # made by no op
    if _calls[0] == 1:
        out[0, 0] = np.inf
    return torch.from_numpy(out)


with warnings.catch_warnings():  # "Overriding a previously registered kernel"
    warnings.simplefilter("ignore")
    _library = torch.library.Library("aten", "IMPL")
    _library.impl("hypot", _flaky_hypot, "CPU")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, case):
        h = self.lin(x).abs() + 1.0  # every value in [1, 3)
        if case == "log_of_zero":
            return torch.log(h - h)  # the math: log(0) is -inf in any precision
        if case == "float32_overflow":
            return h * 3e38  # the precision: 3e38 * [1, 3) passes float32's max
        if case == "float16_cast":
            return (h * 1e5).half()  # the precision: past float16's 65504
        if case == "flaky_op":
            return torch.hypot(h, h)  # the machine: the same inputs give finite values
        if case == "in_place":
            return h.div_(h - h)  # written in place: not re-run
        if case == "batch_norm_eval":  # running statistics 0 and 1, which it does not write
            mean, var, scale = torch.zeros(4), torch.ones(4), torch.full((4,), 4e4)
            return F.batch_norm(h.half(), mean.half(), var.half(), scale.half())  # h*4e4 > 65504
        if case == "batch_norm_training":  # writes its running statistics: not re-run
            mean, var, scale = torch.zeros(4), torch.ones(4), torch.full((4,), 3e38)
            return F.batch_norm(h, mean, var, scale, training=True)  # normalised h * 3e38
        return h


case = sys.argv[1]
torch.manual_seed(0)
net = Net()
for step in range(2):
    out = net(torch.ones(2, 4), case if step == 1 else "")
    print(f"step {step} done", flush=True)

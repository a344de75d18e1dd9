"""A module's input read again as a tensor an earlier hook of the forward read
(recent_stats.h), where its values changed without a new tensor: written in place
between two modules (its version moves), and a loader's buffer rewritten through a
numpy view between batches (no version moves). Batch 2's weights overflow: the report
shows both frames."""

import ovf
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        y = self.a(x)
        y.mul_(1000.0)  # in place between a's hook and b's: b reads other values than a wrote
        return self.b(y)


torch.manual_seed(0)
net = Net()
x = torch.ones(2, 4)
watch = ovf.DebugUnderflowOverflow(net, max_frames_to_save=3)
for batch in range(3):
    x.numpy()[:] = batch + 1  # the loader's pinned buffer, rewritten in place
    if batch == 2:
        with torch.no_grad():
            net.b.weight.mul_(1e38)
    net(x)

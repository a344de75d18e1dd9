"""The last optimizer step overflows the weights (SGD, lr 1e38): no forward reads them
after it, so no later hook answers the step's event; the session's end must."""

import torch
from torch import nn

model = nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=1e38)
for step in range(2):
    opt.zero_grad()
    model(torch.full((1, 2), 1e3)).sum().backward()
    if step == 1:  # the last step overflows the weights: no forward reads them after it
        opt.step()
    print(f"step {step} done", flush=True)
print("training finished", flush=True)

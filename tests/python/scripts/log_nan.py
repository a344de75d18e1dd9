"""A Linear then a Log module: log of a negative number makes a NaN in the Log's output.

    log_nan.py NAN_AT BATCHES [--api [--warn]] [--exit-0] [--exec]
    log_nan.py --wait-for FILE

NAN_AT: the batch whose input is negative (-1: none), of BATCHES; each batch prints
"batch N done", the end "training finished". --api: the script turns ovf on itself
(DebugUnderflowOverflow, fast device mode) instead of running under python3 -m ovf.
--exit-0: ends with sys.exit(0). --exec: prints "first image" and replaces itself with
a new interpreter running the rest of the command line. --exec-at-end: at the end,
replaces itself with an interpreter that prints "new image". --wait-for FILE: prints
"ready", runs healthy batches until FILE exists, then two NaN batches.
Used by the tests of exit statuses, exec and debuggers that die (issue 23)."""

import os
import sys
import time

import torch
from torch import nn

args = sys.argv[1:]
if "--exec" in args:
    print("first image", flush=True)
    os.execv(sys.executable, [sys.executable, __file__, *[a for a in args if a != "--exec"]])


class Log(nn.Module):
    def forward(self, x):
        return torch.log(x)


net = nn.Sequential(nn.Linear(3, 3), Log())
with torch.no_grad():
    net[0].weight.fill_(0.1)
    net[0].bias.zero_()
if "--api" in args:
    import ovf

    on_nan = "warn" if "--warn" in args else "raise"
    ovf.DebugUnderflowOverflow(net, device_mode="fast", on_nan=on_nan)


def run_batch(nan):
    net(torch.ones(2, 3) + (-100.0 if nan else 100.0))  # log(-29.7) is NaN, log(30.3) is not


if "--wait-for" in args:
    go = args[args.index("--wait-for") + 1]
    print("ready", flush=True)
    while not os.path.exists(go):
        run_batch(False)
        time.sleep(0.05)
    for _ in range(2):
        run_batch(True)
else:
    nan_at, batches = int(args[0]), int(args[1])
    for batch in range(batches):
        run_batch(batch == nan_at)
        print(f"batch {batch} done", flush=True)
print("training finished", flush=True)
if "--exit-0" in args:
    sys.exit(0)
if "--exec-at-end" in args:
    os.execv(sys.executable, [sys.executable, "-c", "print('new image')"])

"""A small model whose `mid` layer makes a NaN in batch argv[2] (-1: never) of
argv[3] batches, under DebugUnderflowOverflow(device_mode=argv[1], on_nan=argv[4]).
Prints "batch N" before each forward, "raised in batch N" when ovf raises;
--listing: the ring's listing at the end, then again after flush_device_frames().
tests/python/test_device_engine.py runs it with OVF_TEST_DEFER set, so its CPU
tensors take the device engine and their statistics arrive late."""

import sys

import ovf
import torch


class Mid(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bad = False

    def forward(self, x):
        return x / 0.0 * 0.0 if self.bad else x * 1.5


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(4, 4)
        self.mid = Mid()
        self.out = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.out(self.mid(self.inp(x)))


mode, bad_batch, batches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
on_nan = sys.argv[4]
torch.manual_seed(0)
net = Net()
ovf.DebugUnderflowOverflow(net, device_mode=mode, on_nan=on_nan)
with torch.no_grad():
    for batch in range(batches):
        print(f"batch {batch}", flush=True)
        net.mid.bad = batch == bad_batch
        try:
            net(torch.randn(3, 4))
        except ovf.NonFiniteError:
            print(f"raised in batch {batch}", flush=True)
            break
if "--listing" in sys.argv:
    print("== listing", ovf._ovf.report(100), sep="\n", flush=True)
    ovf._ovf.flush_device_frames()
    print("== listing after the flush", ovf._ovf.report(100), sep="\n", flush=True)
print("end of script", flush=True)

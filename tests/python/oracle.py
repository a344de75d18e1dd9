"""An independent oracle for DebugUnderflowOverflow's report, written from the
reference's documentation: torch's own abs().min()/abs().max() formatted with
%8.2e, frames of "<17 spaces> <name> <Class>" then weights, inputs, outputs, a
batch marker attached to the first frame of each batch, the last N frames kept.
ovf must print exactly what this computes for the same run."""

import collections

import torch

PREFIX = " " * 17
HEADER = f"{'abs min':8} {'abs max':8} metadata"


def start_lines(batch):
    return [f"\n\n{PREFIX} *** Starting batch number={batch} ***", HEADER]


def value_line(x, ctx):
    if torch.is_tensor(x):
        a = x.abs()
        return f"{a.min():8.2e} {a.max():8.2e} {ctx}"
    if x is None:
        return f"{'None':>17} {ctx}"
    return f"{'not a tensor':>17} {ctx}"


def nonfinite(x):
    return torch.is_tensor(x) and x.is_floating_point() and not torch.isfinite(x).all()


class Oracle:
    def __init__(self, model, max_frames_to_save=21):
        self.model = model
        self.names = {}
        for name, m in model.named_modules():
            self.names.setdefault(m, name)
        self.frames = collections.deque([], max_frames_to_save)
        self.pending = []
        self.batch = 0
        self.calls = 0
        self.detected = None  # (batch, frames, has-lines) at the first inf/nan
        self.handles = [m.register_forward_hook(self.hook) for m in self.names]

    def hook(self, module, inputs, output):
        if self.detected is not None:
            return
        if self.calls == 0:
            self.pending = start_lines(0)
        self.calls += 1
        if module is self.model:
            self.batch += 1
        lines = self.pending + [f"{PREFIX} {self.names[module]} {type(module).__name__}"]
        self.pending = []
        values = [(p, n) for n, p in module.named_parameters(recurse=False)]
        values += [(x, f"input[{i}]") for i, x in enumerate(inputs)]
        if isinstance(output, tuple):
            for i, x in enumerate(output):
                if isinstance(x, tuple):
                    values += [(y, f"output[{i}][{j}]") for j, y in enumerate(x)]
                else:
                    values.append((x, f"output[{i}]"))
        else:
            values.append((output, "output"))
        lines += [value_line(x, ctx) for x, ctx in values]
        self.frames.append("\n".join(lines))
        if module is self.model:
            self.pending = start_lines(self.batch)
        bad = []
        for x, ctx in values:
            if torch.is_tensor(x) and torch.isnan(x).any():
                bad.append(f"{ctx} has nans")
            if torch.is_tensor(x) and torch.isinf(x).any():
                bad.append(f"{ctx} has infs")
        if bad:
            self.detected = (self.batch, list(self.frames), bad)

    def expected_report(self):
        batch, frames, bad = self.detected
        return (
            "".join(line + "\n" for line in bad)
            + f"\nDetected inf/nan during batch_number={batch}\n"
            + f"Last {len(frames)} forward frames:\n{HEADER}\n"
            + "\n".join(frames)
            + "\n"
            + "\n\n\n"
        )

    def remove(self):
        for h in self.handles:
            h.remove()

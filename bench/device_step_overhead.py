"""Training-step time on a GPU in fp16 autocast: plain, ovf in fast and exact device
mode, and the reference's per-tensor approach, interleaved in one process.

The model is examples/t5_style.py's "t5-small-sized" (d_model 512, d_ff 2048, 8
heads, 6+6 layers), a step zero_grad, forward and loss under torch.autocast(cuda,
float16), backward and AdamW step, with one loss.item() per step as training loops
have. Modes:

  plain        no hooks;
  ovf fast     DebugUnderflowOverflow(model, device_mode="fast"): no host sync in
               the hooks, each frame judged when its statistics arrive;
  ovf exact    device_mode="exact": one host sync per module frame;
  ovf casts    fast mode with cast_shares=True: the kernels also count what casts
               to float16, bfloat16 and the float8 types would lose (no target:
               printed beside fast mode);
  reference    the per-tensor approach of transformers.debug_utils
               (step_overhead.ReferenceDetector: a host read per statistic).

Targets: ovf fast <= 1.10 x plain, ovf exact <= 1.5 x plain. A full run on a GPU
writes its output to bench/results/gpu-step-<device>.txt.

Without a GPU a full run says "no GPU: not run" and exits 0; --quick then runs the
same modes on the CPU with the device engine forced on CPU tensors
(OVF_TEST_DEFER=0, bfloat16 autocast, a tiny model): a smoke test of the code
path, never a GPU result.

    python3 bench/device_step_overhead.py [--quick]
"""

import argparse
import contextlib
import io
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_stats_bandwidth import have_gpu  # noqa: E402  (no torch there)

ON_GPU = have_gpu()
if not ON_GPU:
    os.environ["OVF_TEST_DEFER"] = "0"  # CPU tensors through the device engine (read once)
import _common  # noqa: E402  (pins threads before torch loads)
import torch  # noqa: E402
from step_overhead import ReferenceDetector  # noqa: E402

TARGETS = {"ovf fast": 1.10, "ovf exact": 1.5}


def run(device, config, batch_size, seq_length, reps, steps_per_rep, ovf, t5):
    torch.manual_seed(0)
    model = t5.T5ForConditionalGeneration(config).train().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    input_ids, labels = (
        t.to(device)
        for t in t5.synthetic_batches(config, 1, batch_size=batch_size, seq_length=seq_length)[0]
    )
    autocast_dtype = torch.float16 if device == "cuda" else torch.bfloat16

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=autocast_dtype):
            loss = model(input_ids, labels=labels)["loss"]
        loss.backward()
        optimizer.step()
        return loss.item()

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    modes = ["plain", "ovf fast", "ovf exact", "ovf casts", "reference"]
    samples = {m: [] for m in modes}
    for rep in range(reps + 1):  # the first repetition warms every mode up, unmeasured
        order = modes[rep % len(modes) :] + modes[: rep % len(modes)]
        for mode in order:
            hooks = None
            if mode == "ovf casts":
                hooks = ovf.DebugUnderflowOverflow(model, device_mode="fast", cast_shares=True)
            elif mode.startswith("ovf"):
                hooks = ovf.DebugUnderflowOverflow(model, device_mode=mode.split()[1])
            elif mode == "reference":
                hooks = ReferenceDetector(model)
            for _ in range(steps_per_rep):
                sync()
                start = time.perf_counter()
                loss = step()
                sync()
                if rep:
                    samples[mode].append(time.perf_counter() - start)
            if hooks is not None:
                if mode.startswith("ovf"):
                    ovf._ovf.flush_device_frames()
                hooks.remove()
            if loss != loss:
                raise RuntimeError(f"the benchmark's training diverged in mode {mode}")
    med = {m: _common.median(v) for m, v in samples.items()}
    for m in modes:
        print(f"  {m:<10} median {med[m] * 1e3:9.2f} ms  ({len(samples[m])} steps)")
    missed = False
    for mode, target in TARGETS.items():
        ratio = med[mode] / med["plain"]
        ok = ratio <= target
        missed = missed or not ok
        print(f"  {mode} / plain = {ratio:.3f}  (target <= {target}: {'ok' if ok else 'MISSED'})")
    print(f"  ovf casts / ovf fast = {med['ovf casts'] / med['ovf fast']:.3f}")
    print(f"  reference / plain = {med['reference'] / med['plain']:.3f}")
    return missed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test: few steps")
    args = parser.parse_args()
    ovf = _common.import_ovf()
    t5 = _common.import_t5_style()
    if ON_GPU and torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        print(f"device: {name}; torch {torch.__version__}; ovf CUDA backend built: "
              f"{ovf._ovf.cuda_backend_built()}")
        reps, steps = (2, 2) if args.quick else (7, 5)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            missed = run("cuda", t5.T5Config.t5_small(), 8, 128, reps, steps, ovf, t5)
        sys.stdout.write(out.getvalue())
        if not args.quick:
            device = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()
            path = os.path.join(_common.REPO, "bench", "results", f"gpu-step-{device}.txt")
            with open(path, "w") as f:
                f.write(f"device: {name}; torch {torch.__version__}\n" + out.getvalue())
            print(f"written to {os.path.relpath(path, _common.REPO)}")
        return _common.exit_status(missed, args.quick)
    if not args.quick:
        print("no GPU: not run (no NVIDIA device on this machine, or this torch has no CUDA)")
        return 0
    print("no GPU: the CPU smoke test of the same modes (device engine forced on CPU tensors; "
          "not a GPU result)")
    run("cpu", t5.T5Config.tiny(), 4, 16, 1, 2, ovf, t5)
    return _common.exit_status(True, True)


if __name__ == "__main__":
    sys.exit(main())

"""A transformers Trainer run on a tiny GPT-2 built from a config (random weights, nothing
downloaded) whose numbers leave the finite range in the forward of step --blow-up-at:
a callback of the script's own scales one MLP's weights up just before that step (as a
bad update would), the final LayerNorm's variance overflows and its output is NaN.

    hf_trainer.py [--mode plain|reference|callback] [--blow-up-at N] [--print-indices]

plain: the script as a user has it (for python3 -m ovf and the debuggers); reference:
TrainingArguments(debug="underflow_overflow"), transformers' own DebugUnderflowOverflow;
callback: ovf's one line, callbacks=[ovf.hf.OverflowCallback()]. --print-indices: the
dataset prints "fetched I" for each sample it is asked for, in order (the Trainer's loader
asks for a batch's samples together, in the order of its batches).
"""

import argparse
import os
import sys
import tempfile

import torch
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import transformers_models  # noqa: E402

VOCAB = transformers_models.VOCAB


class Tokens(torch.utils.data.Dataset):
    def __init__(self, print_indices=False):
        self.print_indices = print_indices

    def __len__(self):
        return 64

    def __getitem__(self, i):
        if self.print_indices:
            print(f"fetched {i}", flush=True)
        ids = torch.randint(1, VOCAB, (8,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


class BlowUp(transformers.TrainerCallback):
    def __init__(self, step):
        self.step = step

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        if state.global_step == self.step:
            with torch.no_grad():
                model.transformer.h[1].mlp.c_fc.weight.mul_(1e38)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=("plain", "reference", "callback"), default="plain")
    p.add_argument("--blow-up-at", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--learning-rate", type=float, default=1e-4)
    p.add_argument("--print-indices", action="store_true")
    args = p.parse_args()
    model, _ = transformers_models.gpt2(overflow=False)  # the tests' tiny GPT-2
    callbacks = [BlowUp(args.blow_up_at)]
    if args.mode == "callback":
        from ovf.hf import OverflowCallback

        callbacks.append(OverflowCallback())
    with tempfile.TemporaryDirectory() as out:
        training = transformers.TrainingArguments(
            output_dir=out,
            max_steps=args.steps,
            per_device_train_batch_size=4,
            learning_rate=args.learning_rate,
            report_to="none",
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            use_cpu=True,
            seed=0,
            debug="underflow_overflow" if args.mode == "reference" else "",
        )
        trainer = transformers.Trainer(
            model=model,
            args=training,
            train_dataset=Tokens(args.print_indices),
            callbacks=callbacks,
        )
        trainer.train()
    print("training finished")


if __name__ == "__main__":
    main()

"""ovf for a transformers Trainer, in one line::

    from ovf.hf import OverflowCallback
    trainer = Trainer(model, args, ..., callbacks=[OverflowCallback()])

It watches the model the Trainer trains from its first step, as
``TrainingArguments(debug="underflow_overflow")`` does with the reference, and with
every option of ``ovf.DebugUnderflowOverflow`` (``OverflowCallback(ops=True,
on_nan="abort")``, ...). It sees every tensor of a forward by default (keyword inputs,
a ModelOutput's logits: a Trainer calls its model with keywords only);
``keyword_inputs=False`` prints the reference's report instead. Without changing the
script: ``python3 -m ovf train.py``, or ``ovf break-on-nan`` in gdb or LLDB.
"""

import transformers

from ._debug_underflow_overflow import DebugUnderflowOverflow


class OverflowCallback(transformers.TrainerCallback):
    """Starts ovf on the Trainer's model when training begins, stops it at the end."""

    def __init__(self, **options):
        self.options = {"keyword_inputs": True, **options}
        self.debug = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if model is None:
            raise ValueError("ovf.hf.OverflowCallback: the Trainer passed no model")
        self.debug = DebugUnderflowOverflow(model, **self.options)

    def on_train_end(self, args, state, control, **kwargs):
        if self.debug is not None:
            self.debug.remove()
            self.debug = None

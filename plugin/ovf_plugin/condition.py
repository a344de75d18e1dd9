"""`--if EXPR`: a Python expression over an event's fields, evaluated by the
debugger only after the runtime's own filters matched."""

import ast
import math

from .errors import OvfError

FIELDS = {
    "absmax": "largest finite |x| of the line (0.0 when none is finite)",
    "absmin": "smallest finite |x| (inf when none is finite)",
    "nan": "number of NaN elements",
    "inf": "number of +inf and -inf elements",
    "module": "module path, e.g. 'encoder.block.2.layer.1.dropout'",
    "cls": "module class name, e.g. 'Dropout'",
    "batch": "batch number (0-based)",
    "kind": "'weight', 'input', 'output', 'grad', 'op' or 'checkpoint'",
    "label": "the line's name, e.g. 'output[0]', 'weight'",
    "dtype": "'float32', 'float16', 'bfloat16', ...",
    "event": "'nan', 'inf', 'above' or 'below'",
    "numel": "number of elements",
}

# What an expression may call besides its fields: pure functions only.
_BUILTINS = {"abs": abs, "min": min, "max": max, "len": len, "any": any, "all": all,
             "isnan": math.isnan, "isinf": math.isinf, "True": True, "False": False}


class Condition:
    def __init__(self, text):
        self.text = text
        try:
            tree = ast.parse(text, "--if", "eval")
        except SyntaxError as e:
            raise OvfError(f"ovf: --if {text!r} is not a Python expression: {e.msg}") from None
        self._code = compile(tree, "--if", "eval")
        # Free names only: attributes (module.endswith) are the fields' own.
        names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        unknown = sorted(names - set(FIELDS) - set(_BUILTINS))
        if unknown:
            raise OvfError(f"ovf: --if {text!r} uses {', '.join(unknown)}; it may use "
                           f"{', '.join(FIELDS)}")

    def __call__(self, fields):
        """Whether the expression holds for `fields`; OvfError if it fails."""
        try:
            return bool(eval(self._code, {"__builtins__": _BUILTINS}, dict(fields)))  # noqa: S307
        except Exception as e:  # noqa: BLE001 - any failure of the user's expression is reported as such
            raise OvfError(f"ovf: --if {self.text!r} failed: {type(e).__name__}: {e}") from None

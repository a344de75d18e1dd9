"""`--if EXPR`: an expression over an event's fields, evaluated by the debugger
only after the runtime's own filters matched.

It is parsed into Python's AST and interpreted here, node by node, over a
small whitelist: names of the fields, numbers, strings, tuples of them,
comparisons (including `in`), `and` / `or` / `not`, + - * / // % and a bounded
**, the functions listed below and str's startswith / endswith. Nothing else
runs: no attribute of any other object, no call of anything else (a name
blacklist with eval() is no sandbox), and numbers are bounded, so no
expression can hang the debugger or reach into it."""

import ast
import math
import operator

from ovf_ring.errors import OvfError

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
    "op": "the ATen op of an op event, e.g. 'aten::log' ('' otherwise)",
    "producer": "True where the value was made (not carried in)",
}

FUNCTIONS = {
    "abs": abs,
    "min": min,
    "max": max,
    "len": len,
    "isnan": math.isnan,
    "isinf": math.isinf,
}
STRING_METHODS = {"startswith", "endswith"}
MAX_TEXT = 1000  # characters of an expression
MAX_NODES = 200
MAX_INT_BITS = 256  # integers beyond this (9**9**9) are refused, not computed

_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_ARITHMETIC = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos}


class _Refused(Exception):
    """Part of the expression the interpreter does not run: the text says what."""


def _bounded(value):
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        raise _Refused(f"a number larger than 2**{MAX_INT_BITS}")
    if isinstance(value, str) and len(value) > MAX_TEXT:
        raise _Refused(f"a string longer than {MAX_TEXT} characters")
    return value


def _power(base, exponent):
    # Bounded before it is computed: 9**9**9 would take the debugger with it.
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and exponent > 0
        and max(abs(base), 2).bit_length() * exponent > MAX_INT_BITS
    ):
        raise _Refused(f"a number larger than 2**{MAX_INT_BITS}")
    return base**exponent


class Condition:
    def __init__(self, text):
        self.text = text
        if len(text) > MAX_TEXT:
            raise OvfError(
                f"ovf: --if holds at most {MAX_TEXT} characters; this one has {len(text)}"
            )
        try:
            self._tree = ast.parse(text, "--if", "eval")
        except SyntaxError as e:
            raise OvfError(f"ovf: --if {text!r} is not a Python expression: {e.msg}") from None
        nodes = list(ast.walk(self._tree))
        if len(nodes) > MAX_NODES:
            raise OvfError(
                f"ovf: --if {text!r} is too long ({len(nodes)} parts; at most {MAX_NODES})"
            )
        unknown = sorted(
            {n.id for n in nodes if isinstance(n, ast.Name)}
            - set(FIELDS)
            - set(FUNCTIONS)
            - {"True", "False"}
        )
        if unknown:
            raise OvfError(
                f"ovf: --if {text!r} uses {', '.join(unknown)}; it may use {', '.join(FIELDS)}"
            )
        try:  # refuse what cannot run before anything runs: with neutral values
            self._evaluate(self._tree.body, {name: _SAMPLE[name] for name in FIELDS}, dry=True)
        except _Refused as e:
            raise OvfError(f"ovf: --if {text!r}: {e} is not allowed") from None
        except (ArithmeticError, TypeError, ValueError):
            pass  # a value-dependent failure: reported when it happens

    def __call__(self, fields):
        """Whether the expression holds for `fields`; OvfError if it fails."""
        try:
            return bool(self._evaluate(self._tree.body, fields))
        except _Refused as e:
            raise OvfError(f"ovf: --if {self.text!r}: {e} is not allowed") from None
        except (ArithmeticError, TypeError, ValueError) as e:
            raise OvfError(f"ovf: --if {self.text!r} failed: {type(e).__name__}: {e}") from None

    def _evaluate(self, node, fields, dry=False):
        ev = lambda n: self._evaluate(
            n, fields, dry
        )  # noqa: E731 - the recursion, read as one word
        if isinstance(node, ast.Constant) and isinstance(
            node.value, (int, float, str, bool, type(None))
        ):
            return _bounded(node.value)
        if isinstance(node, ast.Name):
            if node.id in ("True", "False"):
                return node.id == "True"
            if node.id in FUNCTIONS:
                raise _Refused(f"the function {node.id} used as a value")
            return fields[node.id]
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(ev(e) for e in node.elts)
        if isinstance(node, ast.BoolOp):
            values = [ev(v) for v in node.values] if dry else None
            if isinstance(node.op, ast.And):
                return all(values) if dry else all(ev(v) for v in node.values)
            return any(values) if dry else any(ev(v) for v in node.values)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _bounded(_UNARY[type(node.op)](ev(node.operand)))
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow):
                return _bounded(_power(left, right))
            if isinstance(node.op, ast.Mult) and (isinstance(left, str) or isinstance(right, str)):
                raise _Refused("repeating a string")
            return _bounded(_ARITHMETIC[type(node.op)](left, right))
        if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            left = ev(node.left)
            for op, comparator in zip(node.ops, node.comparators, strict=False):
                right = ev(comparator)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.Call) and not node.keywords:
            args = [ev(a) for a in node.args]
            if isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS:
                return _bounded(FUNCTIONS[node.func.id](*args))
            if isinstance(node.func, ast.Attribute) and node.func.attr in STRING_METHODS:
                target = ev(node.func.value)
                if isinstance(target, str) and all(isinstance(a, (str, tuple)) for a in args):
                    return getattr(target, node.func.attr)(*args)
            raise _Refused(f"calling {ast.unparse(node.func)}")
        raise _Refused(ast.unparse(node) if hasattr(ast, "unparse") else type(node).__name__)


# Neutral values of each field, to refuse what cannot run at parse time.
_SAMPLE = {
    "absmax": 1.0,
    "absmin": 1.0,
    "nan": 0,
    "inf": 0,
    "module": "",
    "cls": "",
    "batch": 0,
    "kind": "output",
    "label": "output",
    "dtype": "float32",
    "event": "nan",
    "numel": 1,
    "op": "",
    "producer": True,
}

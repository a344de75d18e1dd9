"""`--if EXPR`: an expression over an event's fields, evaluated by the debugger
only after the runtime's own filters matched.

It is parsed into Python's AST and interpreted here, node by node, over a
small whitelist: names of the fields, numbers, strings, tuples of them,
comparisons (including `in`), `and` / `or` / `not`, + - * / // % and a bounded
**, the functions listed below and str's startswith / endswith. Nothing else
runs: no attribute of any other object, no call of anything else (a name
blacklist with eval() is no sandbox), and numbers, strings and tuples are
bounded before they are made (a bound checked after `(0,) * 10**9` has already
taken the debugger's memory), so no expression can hang the debugger or reach
into it."""

import ast
import math
import operator
import re

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
# Characters of a string, items of a tuple (with those of the tuples and strings
# inside it) that an expression may make: `module in ('a', 'b')` needs a few.
MAX_SIZE = 10000

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
        raise _Refused(f"a number larger than 2**{MAX_INT_BITS} is not allowed")
    return value


def _size(value):
    """What `value` holds, counted as MAX_SIZE counts: characters, items."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, tuple):
        return len(value) + sum(_size(item) for item in value)
    return 0


def _within(node, kind, size, at_least=False, length=None):
    """Refuses `node` (not yet computed) when what it makes would exceed MAX_SIZE;
    `length` is a tuple's own item count where its size counts nested ones too."""
    if size <= MAX_SIZE:
        return
    if kind == "string":
        made = f"a string of {'at least ' if at_least else ''}{size} characters"
    elif length is None or length == size:
        made = f"a tuple of {size} items"
    else:
        made = f"a tuple of {length} items holding {size} items and characters in all"
    raise _Refused(f"{ast.unparse(node)} would make {made} (at most {MAX_SIZE})")


def _repeat(node, left, right):
    """`left * right` for a string or tuple and a count, bounded first."""
    sequence, times = (left, right) if isinstance(left, (str, tuple)) else (right, left)
    if isinstance(times, int):
        times = max(times, 0)
        if isinstance(sequence, str):
            _within(node, "string", len(sequence) * times)
        else:
            _within(node, "tuple", _size(sequence) * times, length=len(sequence) * times)
    return left * right


def _concatenate(node, left, right):
    if isinstance(left, str) and isinstance(right, str):
        _within(node, "string", len(left) + len(right))
    elif isinstance(left, tuple) and isinstance(right, tuple):
        _within(node, "tuple", _size(left) + _size(right), length=len(left) + len(right))
    return left + right


# printf-style conversions (str % args): Python's grammar, parsed here only to
# know each piece's width and precision before any piece is made.
_CONVERSION = re.compile(
    r"%(?P<key>\([^)]*\))?(?P<flags>[-+ #0]*)(?P<width>\*|\d+)?"
    r"(?:\.(?P<precision>\*|\d*))?[hlL]?(?P<type>.?)",
    re.S,
)


def _format(node, template, args):
    """`template % args`, refused when the string it makes would exceed MAX_SIZE.
    Each piece is made without its width (its precision bounded first), so the
    length is known exactly; only a precision beyond the bound is counted as
    itself, a lower bound."""
    items = iter(args if isinstance(args, tuple) else (args,))

    def take():
        try:
            return next(items)
        except StopIteration:
            raise TypeError("not enough arguments for format string") from None

    def star(value):
        if value != "*":
            return None if value is None else int(value or 0)
        taken = take()
        if isinstance(taken, bool) or not isinstance(taken, int):
            raise TypeError("* wants int")
        return taken

    size, exact, at = 0, True, 0
    while (start := template.find("%", at)) >= 0:
        size += start - at
        spec = _CONVERSION.match(template, start)
        at = spec.end()
        if spec["key"] is not None:
            raise TypeError("format requires a mapping")
        if not spec["type"]:
            raise ValueError("incomplete format")
        width = abs(star(spec["width"]) or 0)
        precision = star(spec["precision"])
        if spec["type"] == "%":
            size += max(width, 1)
            continue
        value = take()
        if precision is not None and precision > MAX_SIZE and spec["type"] not in "sra":
            size, exact = size + max(width, precision), False
            continue
        shown = "" if precision is None else f".{max(precision, 0)}"
        piece = f"%{spec['flags']}{shown}{spec['type']}" % (value,)
        size += max(width, len(piece))
    size += len(template) - at
    _within(node, "string", size, at_least=not exact)
    return template % args


def _power(base, exponent):
    # Bounded before it is computed: 9**9**9 would take the debugger with it.
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and exponent > 0
        and max(abs(base), 2).bit_length() * exponent > MAX_INT_BITS
    ):
        raise _Refused(f"a number larger than 2**{MAX_INT_BITS} is not allowed")
    return base**exponent


class Condition:
    def __init__(self, text):
        self.text = text
        if not text.strip():  # else it would arm with no condition, silently
            raise OvfError(
                "ovf: --if is empty: give an expression over the event's fields, e.g. "
                "--if 'absmax > 1e4', or leave --if out"
            )
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
            raise OvfError(f"ovf: --if {text!r}: {e}") from None
        except (ArithmeticError, TypeError, ValueError):
            pass  # a value-dependent failure: reported when it happens

    def __call__(self, fields):
        """Whether the expression holds for `fields`; OvfError if it fails."""
        try:
            return bool(self._evaluate(self._tree.body, fields))
        except _Refused as e:
            raise OvfError(f"ovf: --if {self.text!r}: {e}") from None
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
                raise _Refused(f"the function {node.id} used as a value is not allowed")
            return fields[node.id]
        if isinstance(node, (ast.Tuple, ast.List)):
            items = tuple(ev(e) for e in node.elts)  # each bounded: this tuple holds only refs
            _within(node, "tuple", _size(items), length=len(items))
            return items
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
            if isinstance(node.op, ast.Mult) and isinstance(left, (str, tuple)) != isinstance(
                right, (str, tuple)
            ):
                return _repeat(node, left, right)
            if isinstance(node.op, ast.Add):
                return _bounded(_concatenate(node, left, right))
            if isinstance(node.op, ast.Mod) and isinstance(left, str):
                return _format(node, left, right)
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
            raise _Refused(f"calling {ast.unparse(node.func)} is not allowed")
        raise _Refused(f"{ast.unparse(node)} is not allowed")


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

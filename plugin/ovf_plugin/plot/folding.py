"""Folding a picture's rows: past MAX_ROWS, repeated blocks (layers.0 ..
layers.11) become one row; and the lower panel's series, the modules that came
closest to the limits."""

import re

MAX_ROWS = 80  # above this, repeated blocks (layers.0 .. layers.11) fold into one row
_INDEX = re.compile(r"^\d+$")

# ---------------------------------------------------------------- folding


def _parts(label):
    """(path components, the rest of the label): "blocks.0.fc (Linear)" ->
    (["blocks", "0", "fc"], " (Linear)"); "blocks.1: aten::add" -> (["blocks",
    "1"], ": aten::add")."""
    end = min((i for i in (label.find(" "), label.find(": ")) if i >= 0), default=len(label))
    return label[:end].split("."), label[end:]


def fold(picture, max_rows=MAX_ROWS):
    """Rows folded while there are more than `max_rows`: the first numbered path
    component (layers.0 .. layers.11) becomes one row "layers.[0-11]", then the
    next, and so on. A folded cell holds the largest value of its rows and is
    non-finite when any of them is. Returns (row labels, {(row, column): [value,
    non-finite]}, old row -> new row)."""
    labels = list(picture.rows)
    mapping = list(range(len(labels)))
    level = 0
    while len(set(mapping)) > max_rows:
        level += 1
        keys, changed = [], False
        for label in picture.rows:
            parts, rest = _parts(label)
            numbered = [i for i, p in enumerate(parts) if _INDEX.match(p)]
            parts = list(parts)
            for i in numbered[:level]:
                parts[i] = "*"
            changed |= bool(numbered[:level])
            keys.append((tuple(parts), rest))
        if not changed or level > 8:
            break
        order = {}
        for key in keys:
            order.setdefault(key, len(order))
        if len(order) == len(set(mapping)):
            continue  # this level folds nothing more: try the next
        mapping = [order[key] for key in keys]
        labels = [_folded_label(picture.rows, mapping, new) for new in range(len(order))]
    merged = {}
    for r, c, value, nonfinite in picture.cells:
        key = (mapping[r], c)
        old = merged.get(key)
        if old is None:
            merged[key] = [value, nonfinite]
        else:
            if value is not None and (old[0] is None or value > old[0]):
                old[0] = value
            old[1] = old[1] or nonfinite
    return labels, merged, mapping


def _folded_label(labels, mapping, new):
    members = [labels[i] for i, m in enumerate(mapping) if m == new]
    if len(members) == 1:
        return members[0]
    split = [_parts(label) for label in members]
    first, rest = split[0]
    out = []
    for i, part in enumerate(first):
        values = {parts[i] if i < len(parts) else "" for parts, _ in split}
        if len(values) == 1:
            out.append(part)
        elif all(_INDEX.match(v) for v in values):
            out.append(_ranges(sorted(int(v) for v in values)))
        else:
            out.append("*")
    rests = {r for _, r in split}
    return ".".join(out) + (rest if len(rests) == 1 else "") + f"  x{len(members)}"


def _ranges(numbers):
    """[0, 1, 2, 5] -> "[0-2,5]"."""
    spans = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return "[" + ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans) + "]"

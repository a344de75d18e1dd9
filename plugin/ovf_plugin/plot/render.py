"""Drawing a picture (ovf_ring.picture.Picture) with matplotlib: the heat map,
its colour bar, the marks, and the lower panel against the fp16/bf16 limits.
matplotlib (Agg, no pyplot) is imported here only, when a picture is drawn."""

import math
import os

from ovf_ring import layout
from ovf_ring.errors import OvfError

from .folding import fold
from .safe_write import checked_target, write_picture

TOP_SERIES = 5  # modules in the lower panel


FP16_MAX = layout.HEADROOM_DTYPES["fp16"][1]
FP16_MIN_NORMAL = layout.HEADROOM_DTYPES["fp16"][2]
BF16_MAX = layout.HEADROOM_DTYPES["bf16"][1]
FORMATS = ("png", "svg", "pdf")
NONFINITE = "#ff2d55"  # a colour viridis does not have
NO_RECORD = "#e6e6e6"
MARK_STYLES = {"first": ("black", "-"), "event": ("#c800c8", "--")}
LIMITS = (  # the lower panel's reference lines: (value, colour, dash, label)
    (BF16_MAX, "#d62728", "--", f"bf16 max {BF16_MAX:.2e}"),
    (FP16_MAX, "#ff7f0e", "--", f"fp16 max {FP16_MAX:g}"),
    (FP16_MIN_NORMAL, "#ff7f0e", ":", f"fp16 smallest normal {FP16_MIN_NORMAL:.2e}"),
)

# ---------------------------------------------------------------- drawing


def _escape(text):
    """matplotlib reads "$...$" as math: a module name must print as it is."""
    return text.replace("$", r"\$")


def series(labels, merged, columns, count=TOP_SERIES):
    """The lower panel's lines: the `count` rows with the most non-finite
    cells, then the largest abs max, leaving out a row whose line would lie on
    one already chosen (a block and its last layer carry one tensor); points
    [batch, abs max or None, non-finite], one per batch (its largest cell)."""
    per_row = {}
    for (row, column), (value, nonfinite) in merged.items():
        batch = columns[column]["batch"]
        point = per_row.setdefault(row, {}).setdefault(batch, [None, False])
        if value is not None and (point[0] is None or value > point[0]):
            point[0] = value
        point[1] = point[1] or nonfinite

    def rank(row):
        points = per_row[row].values()
        finite = [v for v, _ in points if v is not None]
        return (-sum(nf for _, nf in points), -(max(finite) if finite else -1.0), row)

    lines = []
    for row in sorted(per_row, key=rank):
        points = [[b, v, nf] for b, (v, nf) in sorted(per_row[row].items())]
        if not any(_same_line(line["points"], points) for line in lines):
            lines.append({"label": labels[row], "points": points})
        if len(lines) == count:
            break
    return lines


def _same_line(a, b, decades=0.05):
    """Whether two lines of the lower panel would be drawn on top of each other."""
    if [(x, v is None, nf) for x, v, nf in a] != [(x, v is None, nf) for x, v, nf in b]:
        return False
    return all(
        va == vb or (va > 0 and vb > 0 and abs(math.log10(va) - math.log10(vb)) < decades)
        for (_, va, _), (_, vb, _) in zip(a, b, strict=False)
        if va is not None
    )


def render(picture, path, dpi=100, inputs=()):
    """Draws `picture` into `path` (.png, .svg or .pdf) and returns what it
    drew: {"rows", "columns", "values" (abs max per row and column, None where
    no record or no finite value), "nonfinite", "marks", "series", "size"
    (width and height in pixels at `dpi`)}. `inputs`: the files the picture
    comes from (cores), which `path` must not be (safe_write)."""
    checked_target(path, inputs)
    fmt = os.path.splitext(path)[1].lower().lstrip(".")
    if fmt not in FORMATS:
        raise OvfError(f"ovf plot: {path}: the file name must end in .png, .svg or .pdf")
    if not picture.rows:
        raise OvfError(
            "ovf plot: nothing to draw: the ring holds no "
            + ("op records" if "op's output" in picture.value_is else "module frames")
            + " that match"
        )
    try:
        import matplotlib
        import numpy as np
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.colors import ListedColormap
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch, Rectangle
        from matplotlib.transforms import blended_transform_factory
    except ImportError as e:
        raise OvfError(
            f"ovf plot: needs matplotlib ({e}); Debian: apt install python3-matplotlib"
        ) from None

    labels, merged, mapping = fold(picture)
    n_rows, n_cols = len(labels), len(picture.columns)
    values = [[None] * n_cols for _ in range(n_rows)]
    nonfinite = [[False] * n_cols for _ in range(n_rows)]
    for (r, c), (value, bad) in merged.items():
        values[r][c], nonfinite[r][c] = value, bad
    marks = [dict(m, row=None if m["row"] is None else mapping[m["row"]]) for m in picture.marks]
    lines = series(labels, merged, picture.columns)
    footer = [f"{m['text']} (not in this picture)" for m in marks if m["row"] is None]
    footer += picture.notes

    # The layout in inches: labels | heat map | colour bar, the lower panel under
    # it with its legend on the right; the title, subtitle and marks' labels on top.
    label_font = 8 if n_rows <= 60 else 6
    label_in = min(6.0, 0.3 + max(len(t) for t in labels) * label_font * 0.55 / 72)
    heat_w = min(22.0, max(6.0, n_cols * 0.14))
    heat_h = min(60.0, max(2.0, n_rows * (0.17 if n_rows <= 60 else 0.12)))
    legend_chars = max([len(line["label"]) for line in lines] + [32])
    right_in = max(1.4, 0.9 + legend_chars * 7 * 0.55 / 72)
    top_in = 0.85 + 0.2 * len([m for m in marks if m["row"] is not None]) + 0.1
    gap_in, lower_h = 1.0, 2.8
    bottom_in = 0.55 + 0.13 * len(footer)
    width = label_in + heat_w + right_in
    height = top_in + heat_h + gap_in + lower_h + bottom_in
    fig = Figure(figsize=(width, height), dpi=dpi)
    canvas = FigureCanvasAgg(fig)

    def box(x, y, w, h):
        return [x / width, y / height, w / width, h / height]

    heat_y = bottom_in + lower_h + gap_in
    ax = fig.add_axes(box(label_in, heat_y, heat_w, heat_h))
    bar_ax = fig.add_axes(box(label_in + heat_w + 0.15, heat_y, 0.2, heat_h))
    low_ax = fig.add_axes(box(label_in, bottom_in, heat_w, lower_h))
    fig.text(0.1 / width, 1 - 0.1 / height, _escape(picture.title), fontsize=12, va="top")
    fig.text(0.1 / width, 1 - 0.42 / height, _escape(picture.subtitle), fontsize=9, va="top")

    logs = np.full((n_rows, n_cols), np.nan)
    for (r, c), (value, _) in merged.items():
        if value is not None:
            logs[r, c] = math.log10(value) if value > 0 else -np.inf
    finite = logs[np.isfinite(logs)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (-1.0, 1.0)
    if high - low < 0.1:  # one value (or nearly): a decade around it
        low, high = low - 0.5, high + 0.5
    zeros = bool(np.isneginf(logs).any())
    logs[np.isneginf(logs)] = low  # abs max 0: the bottom of the scale
    cmap = matplotlib.colormaps["viridis"].copy()
    cmap.set_bad((0, 0, 0, 0))
    ax.set_facecolor(NO_RECORD)
    image = ax.imshow(
        np.ma.masked_invalid(logs),
        aspect="auto",
        interpolation="nearest",
        cmap=cmap,
        vmin=low,
        vmax=high,
    )
    mask = np.array(nonfinite, dtype=bool).reshape(n_rows, n_cols)
    ax.imshow(
        np.ma.masked_where(~mask, np.ones((n_rows, n_cols))),
        aspect="auto",
        interpolation="nearest",
        cmap=ListedColormap([NONFINITE]),
        vmin=0,
        vmax=1,
    )
    bar = fig.colorbar(image, cax=bar_ax, extend="min" if zeros else "neither")
    bar.set_label(
        _escape(picture.value_is)
        + (f" ({'none' if picture.shares else 'abs max 0'}: the bottom)" if zeros else ""),
        fontsize=8,
    )
    bar.ax.tick_params(labelsize=7)

    row_pt = heat_h * 72 / n_rows
    step = max(1, math.ceil(label_font / row_pt)) if row_pt < label_font else 1
    ax.set_yticks(range(0, n_rows, step))
    ax.set_yticklabels([_escape(t) for t in labels[::step]], fontsize=label_font)
    _column_ticks(ax, picture.columns, picture.columns_are)
    ax.set_xlabel(
        "batch" if picture.columns_are == "batch" else "frames, oldest to newest (ticks: batches)",
        loc="left",
        fontsize=9,
    )
    ax.legend(
        handles=[
            Patch(facecolor=NONFINITE, label="non-finite (nan or inf)"),
            Patch(facecolor=NO_RECORD, edgecolor="#999999", label="no record"),
        ],
        loc="upper right",
        bbox_to_anchor=(1.0, -0.25 / heat_h),
        fontsize=7,
        ncol=2,
        frameon=False,
    )
    cell_pt = min(heat_w * 72 / n_cols, row_pt)
    placed = 0
    for m in marks:
        if m["row"] is None:
            continue
        colour, dash = MARK_STYLES[m["kind"]]
        ax.add_patch(
            Rectangle(
                (m["column"] - 0.5, m["row"] - 0.5),
                1,
                1,
                fill=False,
                edgecolor=colour,
                linestyle=dash,
                linewidth=2,
            )
        )
        if cell_pt < 8:  # too small to see its frame: a square around it
            ax.plot(
                m["column"],
                m["row"],
                marker="s",
                markersize=10,
                markerfacecolor="none",
                markeredgecolor=colour,
                markeredgewidth=1.5,
                linestyle="none",
            )
        ax.annotate(
            _escape(m["text"]),
            xy=(m["column"], m["row"]),
            xytext=(0.0, 1 + (0.12 + 0.2 * placed) / heat_h),
            textcoords="axes fraction",
            fontsize=8,
            color=colour,
            arrowprops={"arrowstyle": "->", "color": colour, "linestyle": dash},
            annotation_clip=False,
        )
        placed += 1
    if footer:
        fig.text(0.1 / width, 0.08 / height, _escape("\n".join(footer)), fontsize=7, va="bottom")

    blend = blended_transform_factory(low_ax.transData, low_ax.transAxes)
    for i, line in enumerate(lines):
        points = [(b, v) for b, v, _ in line["points"] if v is not None and v > 0]
        (drawn,) = low_ax.plot(
            [b for b, _ in points],
            [v for _, v in points],
            marker="o",
            markersize=3,
            label=_escape(line["label"]),
        )
        bad_x = [b for b, _, nf in line["points"] if nf]
        if bad_x:
            low_ax.plot(
                bad_x,
                [0.95 - 0.035 * i] * len(bad_x),
                marker="X",
                markersize=8,
                linestyle="none",
                color=drawn.get_color(),
                transform=blend,
            )
    measured = "share lost" if picture.shares else "abs max"
    for value, colour, dash, text in () if picture.shares else LIMITS:
        low_ax.axhline(value, color=colour, linestyle=dash, linewidth=1, label=text)
    low_ax.set_yscale("log")
    low_ax.set_xlabel("batch", fontsize=9)
    low_ax.set_ylabel(measured, fontsize=9)
    low_ax.tick_params(labelsize=7)
    low_ax.set_title(
        f"{measured} per batch of the {len(lines)} rows with the most non-finite cells, then the "
        "largest values (X: non-finite)",
        fontsize=9,
        loc="left",
    )
    batches = sorted({b for line in lines for b, _, _ in line["points"]})
    if batches:
        low_ax.set_xlim(batches[0] - 0.5, batches[-1] + 0.5)
        if len(batches) <= 30:
            low_ax.set_xticks(batches)
    low_ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    low_ax.grid(True, which="major", axis="y", alpha=0.3)

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a glyph the font lacks is no reason to fail
        try:
            write_picture(path, lambda out: fig.savefig(out, format=fmt, dpi=dpi), inputs)
        except OSError as e:
            raise OvfError(f"ovf plot: cannot write {path}: {e.strerror or e}") from None
    return {
        "rows": labels,
        "columns": [c["label"] for c in picture.columns],
        "values": values,
        "nonfinite": nonfinite,
        "marks": marks,
        "series": lines,
        "size": list(canvas.get_width_height()),
    }


def _column_ticks(ax, columns, columns_are):
    if columns_are == "batch":
        step = max(1, math.ceil(len(columns) / 30))
        ticks = list(range(0, len(columns), step))
        ax.set_xticks(ticks)
        ax.set_xticklabels([columns[i]["label"] for i in ticks], fontsize=8)
        return
    starts = [i for i, c in enumerate(columns) if i == 0 or c["batch"] != columns[i - 1]["batch"]]
    step = max(1, math.ceil(len(starts) / 30))
    starts = starts[::step]
    ax.set_xticks(starts)
    ax.set_xticklabels([f"b{columns[i]['batch']}" for i in starts], fontsize=8)

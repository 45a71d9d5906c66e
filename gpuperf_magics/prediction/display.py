"""How a :class:`~.record.Prediction` reads: a table for people, a header line,
plain text for a terminal or ``print`` and HTML for a notebook.

The prediction itself is data (a frame of seconds); everything about rounding, labels and
layout is here, so that the magic, the command line and the panel show one prediction alike
(the panel adds its own notes through ``extra_notes``). The functions take anything shaped
like a prediction (:class:`Shown`), so that this module imports no record and the record
imports it: no circle.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from gpuperf_magics.units import format_duration, format_seconds

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "MEASURE_NEXT",
    "Shown",
    "as_html",
    "as_text",
    "header",
    "label",
    "memory_lines",
    "memory_text",
    "table",
]


class Shown(Protocol):
    """What a prediction shows: the fields of :class:`~.record.Prediction` read here."""

    network: str
    frame: pd.DataFrame
    cv_mape: float
    runs: int
    measured: str
    advice: list[str]
    notes: list[str]


def table(prediction: Shown) -> pd.DataFrame:
    """The human table: configuration, total (h:mm:ss), per iteration, interval, kind, and
    the "GPU memory" a row needs of what its GPU has (:func:`memory_text`) where some run
    measured its peak."""
    import pandas as pd

    f = prediction.frame
    set_columns = list(f.attrs.get("set_columns", []))
    memory = "memory_gb" in f.columns and bool(f["memory_gb"].notna().any())
    rows = []
    for _, r in f.iterrows():
        device = r["gpu"] if isinstance(r["gpu"], str) and r["gpu"] else "CPU"
        count = 0 if pd.isna(r["gpu_count"]) else int(r["gpu_count"])
        if count > 1:
            device = f"{count}× {device}"
        extra = "".join(f" · {c}={r[c]:g}" for c in set_columns)
        kind = label(r["kind"], r["detail"])
        rows.append({
            "configuration": f"batch {int(r['batch_size'])} · {device}{extra}",
            "iterations": f"{int(r['iterations']):,}",
            "predicted time": format_duration(r["time_s"]),
            "per iteration": format_seconds(r["per_iteration_s"]),
            "interval": f"{format_duration(r['time_low_s'])} – "
                        f"{format_duration(r['time_high_s'])}",
            "kind": kind,
            "expected error": f"±{100 * r['expected_mape']:.0f}%",
        })
        if memory:
            rows[-1]["GPU memory"] = memory_text(r)
    return pd.DataFrame(rows)


def _gb(value: float) -> str:
    """GiB as the memory texts say them: "2.5", "41"."""
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


def _gpu(name: str) -> str:
    """A GPU as a sentence names it: "the A10G", not "the NVIDIA A10G"."""
    for maker in ("NVIDIA ", "Tesla "):
        if name.startswith(maker) and len(name) > len(maker):
            name = name[len(maker):]
    return name


def memory_text(row: Any) -> str:
    """A row's "GPU memory" cell: what one GPU needs of what it has ("2.5 of 16 GB"), "won't
    fit" where it does not; "—" where no run measured the peak (or on the CPU)."""
    import pandas as pd

    need, size = row.get("memory_gb"), row.get("gpu_memory_gb")
    if need is None or pd.isna(need):
        return "—"
    if size is None or pd.isna(size):
        return f"{_gb(need)} GB"
    fits = row.get("fits")
    return f"{_gb(need)} of {size:g} GB" + (" (won't fit)" if fits is False else "")


def memory_lines(frame: pd.DataFrame) -> list[str]:
    """One plain line per GPU (and GPU count) on which a row's batch would not fit: "batch
    1024 needs about 41 GB; the A10G has 24 GB: the largest batch that fits is about 512"."""
    import pandas as pd

    if "fits" not in frame.columns:
        return []
    lines = []
    short = frame[frame["fits"].fillna(True) == False]  # noqa: E712 (nullable booleans)
    for (gpu, count), rows in short.groupby(["gpu", "gpu_count"], sort=False, dropna=False):
        rows = rows.drop_duplicates("batch_size").sort_values("batch_size")
        needs = [f"batch {int(b)}{' needs' if i == 0 else ''} about {_gb(m)} GB"
                 for i, (b, m) in enumerate(zip(rows["batch_size"], rows["memory_gb"],
                                                strict=True))]
        if len(needs) > 3:
            needs = [*needs[:2], f"and {len(needs) - 2} larger batches"]
        n = 1 if pd.isna(count) else int(count)
        size = float(rows["gpu_memory_gb"].iloc[0])
        where = (f"the {_gpu(str(gpu))} has {size:g} GB" if n <= 1 else
                 f"each of the {n} {_gpu(str(gpu))}s has {size:g} GB")
        top = rows["largest_batch"].iloc[0]
        if pd.isna(top):
            fit = "no batch size fits"
        elif int(top) == 0:
            fit = "not even batch 1 fits"
        else:
            fit = f"the largest batch that fits is about {int(top)}"
        per = " per GPU" if n > 1 else ""
        lines.append(f"{', '.join(needs)}{per}; {where}: {fit}")
    return lines


#: How a model's detail opens on a row answered by its configuration's own runs, and what the
#: label says instead (``"measured: median of its runs"``, not "interpolation (measured
#: configuration (median of its runs))").
_MEASURED = "measured configuration (median of its runs)"


def label(kind: Any, detail: Any) -> str:
    """One flat label for a row: ``"kind: detail"``, parentheses never nested.

    A measured configuration reads ``"measured: median of its runs"``: it is answered by its
    own runs, not interpolated. Parentheses inside parentheses in the model's detail become
    commas (``"a (b (c))"`` → ``"a (b, c)"``).
    """
    kind = "" if not isinstance(kind, str) else kind
    detail = "" if not isinstance(detail, str) else detail
    if detail.startswith(_MEASURED):
        kind, detail = "measured", "median of its runs" + detail[len(_MEASURED):]
    elif detail.startswith("measured configuration"):
        kind, detail = "measured", detail[len("measured configuration"):].lstrip(" ;,")
    out, depth = [], 0
    for ch in detail:
        if ch == "(":
            depth += 1
            if depth == 1:
                out.append("(")
            else:
                while out and out[-1] == " ":
                    out.pop()
                out.append(", ")
        elif ch == ")" and depth:
            depth -= 1
            if depth == 0:
                out.append(")")
        else:
            out.append(ch)
    flat = "".join(out).replace(", , ", ", ")
    return f"{kind}: {flat}" if flat else kind


def header(prediction: Shown) -> str:
    """The network, what the model was fitted on, and one statement of its error: the
    cross-validated error of moves to unmeasured batch sizes, and where each row's expected
    error (the table's ``±``) comes from.

    Each row's ``±`` is the validated error of its kind of prediction on these runs, or the
    public data's figure for that kind where too few were validated: the header says which,
    so that "n/a" beside rows of ``±7%`` no longer reads as a contradiction.
    """
    p = prediction
    public = getattr(p, "public_errors", None)
    if not math.isfinite(p.cv_mape):
        cv = "not cross-validated (too few runs to validate a move to another batch size)"
        rows = "the public data's figure for its kind of prediction"
    else:
        cv = (f"cross-validated error (MAPE) {100 * p.cv_mape:.1f}% on moves to unmeasured "
              "batch sizes")
        rows = ("validated on these runs" if public is False else
                "validated on these runs, or the public data's figure where too few "
                "predictions of its kind were")
    return (f"{p.network}: fitted on {p.runs} run(s) ({p.measured}); {cv}; each row's "
            f"expected error is {rows}")


#: How the what-if panel's line on what to profile next opens, right under the interval.
MEASURE_NEXT = "measure next"


def as_text(prediction: Shown, extra_notes: Sequence[str] = (),
            measure_next: str | None = None) -> str:
    """Header, table, the lines on batches that would not fit their GPU
    (:func:`memory_lines`), the "measure next" line (the panel's, when given), notes (the
    prediction's, then ``extra_notes``) and advice as plain text."""
    lines = [header(prediction), table(prediction).to_string(index=False)]
    lines += memory_lines(prediction.frame)
    if measure_next:
        lines.append(f"{MEASURE_NEXT}: {measure_next}")
    lines += [f"note: {n}" for n in [*prediction.notes, *extra_notes]]
    lines += [f"advice: {a}" for a in prediction.advice]
    return "\n".join(lines)


#: Inline spacing of every table cell: inside a widget (the what-if panel) no notebook style
#: spaces them, and neighbouring headers ran together ("kind expected error", "mark note").
CELL_STYLE = "padding: 2px 10px 2px 0; text-align: left"


def html_table(frame: Any) -> str:
    """``frame`` as an HTML table (every text escaped) whose cells carry their spacing."""
    import re

    return re.sub(r"<(t[hd])(?=[\s>])", rf"<\1 style='{CELL_STYLE}'",
                  frame.to_html(index=False, escape=True, border=0))


def as_html(prediction: Shown, extra_notes: Sequence[str] = (),
            measure_next: str | None = None) -> str:
    """Header, table, the lines on batches that would not fit their GPU, the "measure next"
    line (when given, under the table's interval), notes (the prediction's, then
    ``extra_notes``) and advice as one HTML block (every text escaped)."""
    foot = "".join(f"<li>note: {html.escape(n)}</li>"
                   for n in [*prediction.notes, *extra_notes])
    foot += "".join(f"<li><b>advice:</b> {html.escape(a)}</li>" for a in prediction.advice)
    return (
        f"<div class='gpuperf-prediction'><p><b>{html.escape(header(prediction))}</b></p>"
        + html_table(table(prediction))
        + "".join(f"<p class='gpuperf-memory'>{html.escape(line)}</p>"
                  for line in memory_lines(prediction.frame))
        + (f"<p class='gpuperf-measure-next'><b>{MEASURE_NEXT}:</b> "
           f"{html.escape(measure_next)}</p>" if measure_next else "")
        + (f"<ul>{foot}</ul>" if foot else "")
        + "</div>"
    )

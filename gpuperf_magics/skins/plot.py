"""The what-if panel's plot: a job's time against batch size, drawn with matplotlib.

One curve per device of a prediction (the measured device first, then another GPU), its
interval as a band; the whole curve dashed and, on the measured device, the measured range
drawn solid over it, so that what is extrapolated or transferred stays dashed. The measured
runs are points. :func:`png_output` turns the figure into the one display output the panel
replaces at each change (no flicker).
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["JobPlot", "batch_sizes", "job_time_figure", "plain", "png_output"]


def batch_sizes(measured: list[int], asked: int) -> list[int]:
    """Measured batch sizes, powers of two from half the smallest to four times the largest,
    and the batch size asked for."""
    measured = sorted(measured) or [asked]
    low, high = max(1, measured[0] // 2), measured[-1] * 4
    powers = [2**k for k in range(0, 21) if low <= 2**k <= high]
    return sorted({*measured, *powers, asked})


@dataclass(frozen=True)
class JobPlot:
    """What the plot shows besides the prediction's frame.

    ``measured_per_iteration`` maps a measured batch size to its seconds per iteration (the
    points are that × the job's iterations); ``here`` names the measured device.
    """

    network: str
    here: str
    measured_per_iteration: dict[int, float]
    batch_size: int
    deadline_s: float | None = None


def plain(text: str) -> str:
    """``text`` drawn as it reads: matplotlib takes a pair of ``$`` for mathtext, so a network
    or device named ``cost $5 to $10`` would be typeset, or fail to draw the figure at all."""
    return str(text).replace("$", r"\$")


def job_time_figure(frame: pd.DataFrame, what: JobPlot) -> Figure:
    """The figure of a prediction's ``frame`` (rows of several batch sizes per device)."""
    import pandas as pd
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5.2, 3.4), dpi=80)
    ax = figure.add_subplot()
    measured = sorted(what.measured_per_iteration)
    # The measured device is a missing GPU on the CPU: None, NaN or pandas.NA by the
    # column's dtype (pandas 3 reads text as "str", where None becomes NaN).
    devices = list(dict.fromkeys(None if pd.isna(g) else g for g in frame["gpu"]))
    for number, device in enumerate(devices):
        rows = frame[frame["gpu"].isna()] if device is None else frame[frame["gpu"] == device]
        _curve(ax, rows.sort_values("batch_size"), number,
               plain(what.here if number == 0 else str(device)), measured if number == 0 else [],
               what.measured_per_iteration)
    ax.axvline(what.batch_size, color="grey", linewidth=0.8)
    if what.deadline_s:
        ax.axhline(what.deadline_s, color="#b00", linewidth=0.8, label="deadline")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size")
    ax.set_ylabel("job time (s)")
    ax.set_title(f"{plain(what.network)}: time of the job", fontsize=10)
    # Under the axes, never over the curves; png_output's tight box keeps it in the image.
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=2,
              frameon=False)
    figure.tight_layout()
    return figure


def _curve(ax: Axes, rows: pd.DataFrame, number: int, name: str, measured: list[int],
           per_iteration: dict[int, float]) -> None:
    """One device's band, dashed curve, solid measured range and measured points."""
    color = f"C{number}"
    x = rows["batch_size"].to_numpy()
    ax.fill_between(x, rows["time_low_s"], rows["time_high_s"], color=color, alpha=0.15,
                    linewidth=0)
    ax.plot(x, rows["time_s"], linestyle="--", color=color,
            label=f"{name} ({'extrapolated' if number == 0 else 'transfer'})")
    if not measured:
        return
    inside = (x >= measured[0]) & (x <= measured[-1])
    if inside.any():
        ax.plot(x[inside], rows["time_s"].to_numpy()[inside], linestyle="-", color=color,
                label=f"{name} (interpolated)")
    points = rows[rows["batch_size"].isin(measured)]
    per_it = points["batch_size"].map(per_iteration)
    ax.plot(points["batch_size"], per_it * points["iterations"], linestyle="none", marker="o",
            color=color, label="measured (× the job's iterations)")


def png_output(figure: Figure, label: str) -> dict[str, Any]:
    """The figure as one ``display_data`` output (a PNG and a text stand-in)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    buffer = io.BytesIO()
    FigureCanvasAgg(figure)
    figure.savefig(buffer, format="png", bbox_inches="tight", pad_inches=0.05)
    return {
        "output_type": "display_data", "metadata": {},
        "data": {"image/png": base64.b64encode(buffer.getvalue()).decode("ascii"),
                 "text/plain": label},
    }

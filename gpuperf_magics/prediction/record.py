"""The answer of :func:`~gpuperf_magics.prediction.predict.predict_time`: a
:class:`Prediction`, data that shows itself through :mod:`~.display`.

The record has a module of its own so that the display code and the prediction code both
build on it and on each other in one direction only (``predict`` → ``record`` → ``display``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gpuperf_magics.prediction import display

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["Prediction"]


@dataclass
class Prediction:
    """Predicted training times for a set of configurations.

    Attributes
    ----------
    network : str
    frame : DataFrame
        One row per configuration: ``batch_size``, ``gpu``, ``gpu_count``, ``iterations``,
        ``time_s``, ``time_low_s``, ``time_high_s``, ``per_iteration_s``, ``kind``, ``detail``,
        ``expected_mape``, plus any ``settings`` features, and the GPU memory of each
        configuration: ``memory_gb``, ``gpu_memory_gb``, ``fits``, ``largest_batch``
        (:func:`~gpuperf_magics.prediction.memory.memory_columns`).
    cv_mape : float
        The model's cross-validated MAPE on the measured runs (fraction); NaN where too few
        runs could be validated.
    runs : int
        Runs the model was fitted on.
    measured : str
        What those runs measured, as the header says it: the batch sizes and the device
        (``"batch 16, 32 on Tesla T4"``).
    advice : list of str
        What to profile next for better predictions.
    notes : list of str
        Assumptions made (iterations, default batch sizes...).
    public_errors : bool or None
        Whether some rows' expected error is a public figure standing in for a kind of
        prediction too few runs validated (False: all validated here; None: unknown).
    """

    network: str
    frame: pd.DataFrame
    cv_mape: float
    runs: int
    measured: str
    advice: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    public_errors: bool | None = None

    def rows(self, mask: Any) -> Prediction:
        """The same prediction restricted to some configurations (a boolean mask or index
        of ``frame``): what the panel shows of the prediction its plot draws. A note about
        one batch size (``"batch 8: ..."``) goes with that batch size's rows."""
        frame = self.frame.loc[mask]
        frame.attrs = dict(self.frame.attrs)
        kept = {int(b) for b in frame["batch_size"]}
        notes = [n for n in self.notes
                 if (m := re.match(r"batch (\d+): ", n)) is None or int(m.group(1)) in kept]
        return replace(self, frame=frame, notes=notes)

    def table(self) -> pd.DataFrame:
        """The human table: configuration, total (h:mm:ss), per iteration, interval, kind."""
        return display.table(self)

    def header(self) -> str:
        """One line: the network, what the model was fitted on and its cross-validated error."""
        return display.header(self)

    def __str__(self) -> str:
        return display.as_text(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text("Prediction(...)" if cycle else str(self))

    def _repr_html_(self) -> str:
        return display.as_html(self)

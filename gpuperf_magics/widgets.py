"""The what-if panel: ipywidgets controls over :func:`gpuperf_magics.predict.predict_time`.

``%predict_time --widget`` (or :func:`what_if`) shows a batch size, a job length, a GPU and a
GPU count, plus a control per numeric feature of the store; every change re-predicts (about
10 ms with the fitted model cached) and shows the answer with its kind and measured error.
"""

from __future__ import annotations

import html
from typing import Any

__all__ = ["WhatIfPanel", "what_if"]


class WhatIfPanel:
    """A panel of controls and a result line; ``panel.widget`` is what a notebook displays.

    Parameters
    ----------
    store : path or Store, optional
        The store whose completed runs the model learns from.
    network : str, optional
        Network shown first (default: the latest run's).
    """

    def __init__(self, store: Any = None, network: str | None = None) -> None:
        import ipywidgets as w
        import pandas as pd

        from gpuperf_magics.hardware.catalog import gpus
        from gpuperf_magics.predict import BASE_FEATURES, fit_store, predict_time

        self._predict_time = predict_time
        self.store = store
        model, runs = fit_store(store, network)
        first = predict_time(store, network, iterations=1)
        latest = runs.iloc[-1]
        measured_gpu = first.frame["gpu"].iloc[0]
        measured_gpu = measured_gpu if isinstance(measured_gpu, str) else None
        style = {"description_width": "110px"}
        layout = w.Layout(width="420px")
        from gpuperf_magics.store import Store

        networks = Store(store) if not isinstance(store, Store) else store
        self.network = w.Dropdown(
            options=list(dict.fromkeys(networks.runs(status="ok")["network"])),
            value=first.network, description="network", style=style, layout=layout)
        batch = int(latest["batch_size"]) if pd.notna(latest["batch_size"]) else 32
        self.batch_size = w.BoundedIntText(value=batch, min=1, max=1_000_000,
                                           description="batch size", style=style, layout=layout)
        dataset = latest.get("dataset_size")
        self.epochs = w.BoundedFloatText(value=10, min=0.01, max=1e6, description="epochs",
                                         style=style, layout=layout)
        self.samples = w.BoundedIntText(
            value=int(dataset) if pd.notna(dataset) and dataset else 50_000, min=1,
            max=10**12, description="samples / epoch", style=style, layout=layout)
        here = measured_gpu or "this CPU (measured)"
        self._here = here
        self.gpu = w.Dropdown(options=[here, *[g for g in gpus()["name"] if g != measured_gpu]],
                              value=here, description="GPU", style=style, layout=layout)
        self.gpu_count = w.BoundedIntText(value=max(1, int(latest["gpu_count"] or 0)), min=1,
                                          max=1024, description="GPUs", style=style,
                                          layout=layout)
        self.features = {
            name: w.FloatText(value=float(latest[name]), description=name, style=style,
                              layout=layout)
            for name in model.store_features_ if name not in BASE_FEATURES
        }
        self.result = w.HTML()
        controls = [self.network, self.batch_size, self.epochs, self.samples, self.gpu,
                    self.gpu_count, *self.features.values()]
        for control in controls:
            control.observe(self._update, names="value")
        self.network.observe(self._network_changed, names="value")
        self.widget = w.VBox([*controls, self.result])
        self._update()

    def _network_changed(self, change: Any) -> None:
        """Take the new network's latest batch size and dataset size as the starting point."""
        import pandas as pd

        from gpuperf_magics.predict import PredictionError, fit_store

        try:
            _, runs = fit_store(self.store, change["new"])
        except PredictionError:
            return
        latest = runs.iloc[-1]
        with self.batch_size.hold_trait_notifications():
            if pd.notna(latest["batch_size"]):
                self.batch_size.value = int(latest["batch_size"])
            dataset = latest.get("dataset_size")
            if pd.notna(dataset) and dataset:
                self.samples.value = int(dataset)
        self._update()

    def _update(self, change: Any = None) -> None:
        from gpuperf_magics.predict import PredictionError, format_duration

        on_gpu = self.gpu.value != self._here or not self._here.startswith("this CPU")
        try:
            prediction = self._predict_time(
                self.store, self.network.value, batch_sizes=[self.batch_size.value],
                epochs=self.epochs.value, samples=self.samples.value,
                gpus=[self.gpu.value] if self.gpu.value != self._here else None,
                gpu_count=self.gpu_count.value if on_gpu else None,
                settings={k: v.value for k, v in self.features.items()},
            )
        except PredictionError as exc:
            self.result.value = f"<p style='color:#b00'>{html.escape(str(exc))}</p>"
            return
        row = prediction.frame.iloc[-1]
        kind = row["kind"] + (f" ({row['detail']})" if row["detail"] else "")
        self.result.value = (
            f"<p style='font-size:1.3em'><b>{format_duration(row['time_s'])}</b> "
            f"for {int(row['iterations']):,} iterations "
            f"({format_duration(row['time_low_s'])} – {format_duration(row['time_high_s'])})"
            f"</p><p>{html.escape(kind)} · expected error ±{100 * row['expected_mape']:.0f}% · "
            f"{html.escape(prediction.header())}</p>"
        )

    @property
    def text(self) -> str:
        """The current answer as plain text (for tests and logs)."""
        import re

        return html.unescape(re.sub(r"<[^>]+>", "", self.result.value))

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


def what_if(store: Any = None, network: str | None = None) -> WhatIfPanel:
    """The what-if panel for a store (display it as the last expression of a cell)."""
    return WhatIfPanel(store, network)

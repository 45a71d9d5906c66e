"""The what-if panel's controls: their bounds and starting values, the offers chooser, and
how they are built, observed and laid out (:class:`PanelControls`, which
:class:`~gpuperf_magics.skins.widgets.WhatIfPanel` builds on).

The panel itself (:mod:`gpuperf_magics.skins.widgets`) answers: it fits, predicts, draws and shows
offers. What a control holds and when it is enabled is here.
"""

from __future__ import annotations

import html
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpuperf_magics._checks import positive_number

if TYPE_CHECKING:  # pragma: no cover
    from gpuperf_magics.prediction.job import Job

__all__ = ["ASSUMED_SAMPLES", "DEFAULT_EPOCHS", "DEFAULT_OFFERS", "PanelControls",
           "offer_choices", "preselected", "starting_value"]

#: Samples per epoch the panel starts from when the store records no dataset size.
ASSUMED_SAMPLES = 50_000
#: Epochs the panel starts from when none are given.
DEFAULT_EPOCHS = 10

# Bounds of the controls: a starting value outside them would be clamped silently by the
# bounded widgets, so it is refused instead.
_BOUNDS: dict[str, tuple[float, float]] = {
    "batch_size": (1, 1_000_000),
    "gpu_count": (1, 1024),
    "epochs": (0.01, 1_000_000),
    "iterations": (1, 10**15),
    "samples": (1, 10**12),
    "deadline_h": (0.001, 1_000_000),
}
#: The precision control's entries: (label, the class a Job keeps; "" for as measured).
PRECISION_CHOICES = [("as measured", ""), ("FP32 (TF32 off)", "fp32"), ("TF32", "tf32"),
                     ("AMP (fp16 / bf16)", "fp16")]
#: The measured device's entry when the runs were on the CPU.
CPU_LABEL = "this CPU (measured)"
#: CSS class of the saved answer shown when the widgets cannot render.
SNAPSHOT_CLASS = "gpuperf-whatif-saved"
#: Offers selected when the panel opens (the chooser holds every priced instance).
DEFAULT_OFFERS = 10
#: Room for the longest control label ("deadline (h, 0: none)", "samples / epoch") at
#: about 7.5 px a character; a shorter width cut the label off ("deadline (h, 0:…").
LABEL_WIDTH = "170px"
#: Pixels a character of a label or an offer takes, about, in JupyterLab's UI font.
CHAR_PX = 7.5


def _px(width: str) -> float:
    return float(width.removesuffix("px"))


def _number_text(value: float) -> str:
    return f"{value:,}" if float(value).is_integer() else f"{value:g}"


def starting_value(name: str, value: Any, *, whole: bool) -> Any:
    """``value`` checked as the starting value of control ``name`` (None stays None)."""
    if isinstance(value, str):  # a Python call passes numbers; text is a mistake here
        raise ValueError(f"{name} must be a number, got {value!r}")
    number = positive_number(value, name, whole=whole)
    if number is None:
        return None
    low, high = _BOUNDS[name]
    if not low <= number <= high:
        raise ValueError(f"{name} must be between {_number_text(low)} and "
                         f"{_number_text(high)}, got {value!r}")
    return number


def offer_choices(table: Any) -> list[tuple[str, str]]:
    """One choice per row of the price table: an instance's on-demand and spot prices (or its
    regions) are separate offers. The value is the instance name where the table has one row
    of it, else the row's offer label; both are what
    :func:`~gpuperf_magics.prediction.offers.offers`
    takes as ``instances``."""
    from gpuperf_magics.prediction.offers import offer_label

    counts = table["instance"].value_counts()
    return [(f"{r.provider} {r.instance} ({r.gpus}× {r.gpu}, {r.region}, {r.pricing})",
             r.instance if counts[r.instance] == 1
             else offer_label(r.provider, r.instance, r.region, r.pricing))
            for r in table.itertuples()]


def preselected(table: Any, choices: list[tuple[str, str]], builtin: Any) -> list[str]:
    """The offers selected when the panel opens: the user's own rows (added, or replacing a
    built-in price) first, then the table's first rows; :data:`DEFAULT_OFFERS` in all."""
    from gpuperf_magics.hardware.prices import KEY

    shipped = {tuple(k): (p, src) for *k, p, src in
               builtin[[*KEY, "usd_per_hour", "source"]].itertuples(index=False)}
    rows = table[[*KEY, "usd_per_hour", "source"]].itertuples(index=False)
    own = [i for i, (*k, p, src) in enumerate(rows) if shipped.get(tuple(k)) != (p, src)]
    order = own + [i for i in range(len(choices)) if i not in own]
    return [choices[i][1] for i in order[:DEFAULT_OFFERS]]


class PanelControls:
    """The controls of the what-if panel and the rules between them (which length control
    is enabled, whose samples per epoch the panel shows). The panel supplies ``_update`` (answer
    again) and ``_network_changed``."""

    _quiet: bool
    _requested: list[str]
    _opening: Any  # the Job the panel opened with
    _update: Callable[..., None]
    _network_changed: Callable[[Any], None]

    def _build_controls(
        self, networks: list[str], first: str, price_table: Any, *, batch_size: int | None,
        epochs: float | None, samples: int | None, iterations: int | None,
        gpu_count: int | None, deadline_h: float | None, precision: str | None = None,
    ) -> None:
        """Create the controls with their starting values (nothing observed yet)."""
        import ipywidgets as w

        from gpuperf_magics.hardware.prices import prices as load_prices
        from gpuperf_magics.prediction.predict import DEFAULT_BATCH_SIZE, DEFAULT_ITERATIONS

        self._samples_source = "given" if samples is not None else "assumed"
        self._here = CPU_LABEL
        self._measured: str | None = None
        self._error: str | None = None
        style = {"description_width": LABEL_WIDTH}
        layout = w.Layout(width="480px")
        self._style, self._layout = style, layout
        self.network = w.Dropdown(options=networks, value=first,
                                  description="network", style=style, layout=layout)
        low, high = _BOUNDS["batch_size"]
        self.batch_size = w.BoundedIntText(value=batch_size or DEFAULT_BATCH_SIZE, min=low,
                                           max=high, description="batch size",
                                           style=style, layout=layout)
        self.length = w.ToggleButtons(
            options=[("epochs × samples", "epochs"), ("iterations", "iterations")],
            value="iterations" if iterations is not None else "epochs",
            description="job length", style=style)
        low, high = _BOUNDS["epochs"]
        self.epochs = w.BoundedFloatText(value=epochs or DEFAULT_EPOCHS, min=low, max=high,
                                         description="epochs", style=style, layout=layout)
        low, high = _BOUNDS["samples"]
        self.samples = w.BoundedIntText(value=samples or ASSUMED_SAMPLES, min=low, max=high,
                                        description="samples / epoch", style=style,
                                        layout=layout)
        low, high = _BOUNDS["iterations"]
        self.iterations = w.BoundedIntText(value=iterations or DEFAULT_ITERATIONS, min=low,
                                           max=high, description="iterations", style=style,
                                           layout=layout)
        self.gpu = w.Dropdown(options=[CPU_LABEL], value=CPU_LABEL, description="GPU",
                              style=style, layout=layout)
        low, high = _BOUNDS["gpu_count"]
        self.gpu_count = w.BoundedIntText(value=gpu_count or 1, min=low, max=high,
                                          description="GPUs", style=style, layout=layout)
        # "" is "as measured": a Dropdown's None means no selection, not a value.
        self.precision = w.Dropdown(options=PRECISION_CHOICES, value=precision or "",
                                    description="precision", style=style, layout=layout)
        self.features: dict[str, Any] = {}
        self._feature_box = w.VBox()
        self.result = w.HTML()
        choices = offer_choices(price_table)
        # Wide enough for the longest offer's name; each name is its own tooltip as well.
        longest = max((len(label) for label, _ in choices), default=0)
        self.instances = w.SelectMultiple(
            options=choices, value=preselected(price_table, choices, load_prices()),
            description="offers", rows=min(8, max(1, len(choices))), style=style,
            tooltip="the priced offers to compare (ctrl/shift-click for several)",
            layout=w.Layout(width=f"{int(_px(LABEL_WIDTH) + CHAR_PX * longest) + 40}px"))
        # min=0, below the starting bound: 0 is how the user clears the deadline.
        self.deadline = w.BoundedFloatText(value=deadline_h or 0, min=0,
                                           max=_BOUNDS["deadline_h"][1],
                                           step=0.5, description="deadline (h, 0: none)",
                                           style=style, layout=layout)
        for control in (self.network, self.batch_size, self.length, self.epochs,
                        self.samples, self.iterations, self.gpu, self.gpu_count,
                        self.precision, self.deadline):
            control.tooltip = control.description  # the whole label, were it ever cut
        self.plot = w.Output()
        self.offers_view = w.HTML()
        self.figure: Any = None
        self.offers: Any = None

    def _observe(self) -> None:
        """Answer every change of a control."""
        self.samples.observe(self._samples_edited, names="value")
        self.length.observe(self._length_changed, names="value")
        self.network.observe(self._network_changed, names="value")
        for control in (self.batch_size, self.epochs, self.samples, self.iterations, self.gpu,
                        self.gpu_count, self.precision, self.instances, self.deadline):
            control.observe(self._update, names="value")

    def _lay_out(self) -> None:
        """Controls beside the plot, the answer and the offers below (``widget``)."""
        import ipywidgets as w

        self._show_length()
        controls = w.VBox([self.network, self.batch_size, self.length, self.epochs,
                           self.samples, self.iterations, self.gpu, self.gpu_count,
                           self.precision, self._feature_box, self.instances, self.deadline])
        # A notebook reopened without a kernel cannot draw the widgets; the answer is then
        # shown by a plain output next to them (see _ipython_display_), which this style,
        # present only while the widgets render, hides.
        hide = w.HTML(f"<style>.{SNAPSHOT_CLASS} {{display: none}}</style>")
        # The saved copy's one display id (every display of the panel shares it), and the
        # views the front end reports: one that no display made is a reloaded page.
        self._display_id = f"gpuperf-whatif-{uuid.uuid4().hex}"
        self._displays = self._unseen_displays = 0
        self._shown_in: int | None = None
        self._number: int | None = None  # among the panels shown (widgets.panel)
        self.saved_note = w.HTML()
        self.widget = w.VBox([w.HBox([controls, self.plot]), self.result, self.offers_view,
                              self.saved_note, hide])
        self.widget._view_count = 0  # counted by the front end from now on
        self.widget.observe(self._view_counted, names="_view_count")

    def _samples_edited(self, change: Any) -> None:
        if not self._quiet:
            self._samples_source = "user"

    def _length_changed(self, change: Any) -> None:
        self._show_length()
        self._update()

    def _show_length(self) -> None:
        by_epochs = self.length.value == "epochs"
        self.epochs.disabled = self.samples.disabled = not by_epochs
        self.iterations.disabled = by_epochs

    def _length(self) -> dict[str, Any]:
        if self.length.value == "epochs":
            return {"epochs": self.epochs.value, "samples": self.samples.value}
        return {"iterations": self.iterations.value}

    def job(self) -> Job:
        """The job the controls describe now (one batch size, the chosen GPU and count)."""
        from gpuperf_magics.prediction.job import Job

        on_gpu = self.gpu.value != self._here or self._measured is not None
        return Job(
            network=self.network.value, batch_sizes=[self.batch_size.value],
            gpus=[self.gpu.value] if self.gpu.value != self._here else None,
            gpu_count=self.gpu_count.value if on_gpu else None,
            settings={k: v.value for k, v in self.features.items()},
            coverage=self._opening.coverage,
            deadline_s=self.deadline.value * 3600 if self.deadline.value else None,
            precision=self.precision.value or None, **self._length())

    def _view_counted(self, change: Any) -> None:
        """A view of the widgets appeared or went. One that no display of ours made is a
        front end that rendered the widgets again from the kernel, a page reload: that page
        has forgotten which output holds the saved copy (JupyterLab keeps that map in the
        page only), so no update reaches it any more; say so, and how to save it again."""
        if (change["new"] or 0) <= (change["old"] or 0):
            return
        if self._unseen_displays:
            self._unseen_displays -= 1
            return
        where = html.escape(self._handle())
        self.saved_note.value = (
            "<p style='color:#b60'>The page was reloaded: the saved copy of this answer "
            "(what the notebook shows when reopened without the widgets) no longer follows "
            f"the controls. Run <code>{where}</code> in a new cell to save the current answer "
            "there "
            "(it follows from then on), or run this cell again.</p>")

    def _handle(self) -> str:
        """Code that gives this panel back in the notebook: a variable bound to it, the
        cell's ``Out[N]``, else its entry among the panels shown (``%predict_time -w``
        returns none)."""
        from IPython import get_ipython

        namespace = getattr(get_ipython(), "user_ns", {})
        names = [k for k, v in namespace.items() if v is self and not k.startswith("_")]
        if names:
            return names[0]
        if namespace.get("Out", {}).get(self._shown_in) is self:
            return f"Out[{self._shown_in}]"
        return f"from gpuperf_magics.skins.widgets import panel; panel({self._number})"

    def _set_gpu_options(self, gpu: Any, *, opening: bool) -> None:
        """The GPU choices: the measured device first, the GPUs asked for, then the catalog;
        the user's choice kept across networks."""
        from gpuperf_magics.hardware.catalog import find, gpus

        self._measured = gpu if isinstance(gpu, str) and gpu else None
        found = find(self._measured)
        measured_name = None if found is None else str(found["gpu_name"])
        previous_here, chosen = self._here, self.gpu.value
        self._here = self._measured or CPU_LABEL
        others = [str(g) for g in gpus()["name"] if g != measured_name]
        listed = [g for g in self._requested if g in others]
        options = [self._here, *listed, *[g for g in others if g not in listed]]
        if opening and self._requested:
            wanted = self._requested[0]
        elif chosen != previous_here:
            wanted = chosen
        else:
            wanted = self._here
        self.gpu.options = options
        self.gpu.value = wanted if wanted in options else self._here

    def _set_features(self, model: Any, runs: Any) -> None:
        """One number control per feature the model learnt besides the base ones, starting
        at the latest run's value."""
        import ipywidgets as w

        from gpuperf_magics.prediction.store_model import BASE_FEATURES

        self.features = {}
        if model is not None:
            for name in model.features:
                if name in BASE_FEATURES:
                    continue
                known = runs[name].dropna()
                start = self._opening.settings.get(name, float(known.iloc[-1]))
                control = w.FloatText(value=start, description=name,
                                      style=self._style, layout=self._layout)
                control.observe(self._update, names="value")
                self.features[name] = control
        self._feature_box.children = tuple(self.features.values())

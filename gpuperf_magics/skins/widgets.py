"""The what-if panel: ipywidgets controls over :func:`~gpuperf_magics.predict_time`.

``%predict_time --widget`` (or :func:`what_if`) shows a batch size, a job length (epochs ×
samples per epoch, or iterations), a GPU, a GPU count and a precision (as measured, FP32, TF32
or AMP), plus a control per numeric feature of the store; the panel opens at a
:class:`~gpuperf_magics.prediction.job.Job`'s values. Every change predicts once, with the
fitted model cached (no refit): the prediction over the plot's batch sizes, whose row at the
chosen batch size and GPU is the answer, shown by the display code of ``%predict_time``
(:mod:`gpuperf_magics.prediction.display`) with the notes on what it assumes; a plot of the
job's time against batch size (measured points marked, the interval as a band, extrapolation
dashed); a "measure next" line under the interval (the batch worth profiling next,
:mod:`~gpuperf_magics.prediction.suggestions`, asked of the cached model); and the offers table
of :func:`gpuperf_magics.offers` (job time and cost per priced instance, a deadline picking the
cheapest that meets it), whose rows the same prediction answers (``also=``). An error inside a
callback is shown in the panel and logged, never lost in the kernel's log.
"""

from __future__ import annotations

import html
import logging
import weakref
from typing import TYPE_CHECKING, Any

from gpuperf_magics.skins import plot
from gpuperf_magics.skins.panel_controls import (
    _BOUNDS,
    SNAPSHOT_CLASS,
    PanelControls,
    starting_value,
)

if TYPE_CHECKING:  # pragma: no cover
    from gpuperf_magics.prediction.job import Job

__all__ = ["WhatIfPanel", "panel", "what_if"]

_log = logging.getLogger(__name__)
#: The panels shown in this kernel, by number (their widgets keep them alive).
_SHOWN: weakref.WeakValueDictionary[int, WhatIfPanel] = weakref.WeakValueDictionary()


class WhatIfPanel(PanelControls):
    """A panel of controls and a result area; ``panel.widget`` is what a notebook displays.

    The keyword arguments are the controls' starting values (what ``%predict_time -w`` passes
    on from its options); left out, they come from the network's latest run. A network whose
    runs cannot be fitted opens the panel all the same, with the reason in the result area,
    and the other networks of the store stay selectable.

    Parameters
    ----------
    store : path or Store, optional
        The store whose completed runs the model learns from.
    job : Job or str, optional
        The job the panel opens at (:class:`~gpuperf_magics.prediction.job.Job`), or a network
        name; what it leaves out comes from the network's latest run:

        - ``network``: shown first (default: the latest run's);
        - ``batch_sizes``: one batch size (default: the latest run's, else 32);
        - ``gpus``: GPUs to look at, by any name of :func:`gpuperf_magics.gpus` (matched
          tolerantly, as ``--gpu`` is). The first is selected; all of them are listed first
          among the GPU choices, after the measured device;
        - ``gpu_count``: GPUs per job (default: as measured, at least 1), used when a GPU is
          selected;
        - ``epochs`` (default 10; iterations are epochs × ⌈samples ÷ batch⌉) and ``samples``
          per epoch (default: the dataset size the store recorded, else 50,000, which the
          panel then says it assumed), or ``iterations``: the panel then opens with the job
          length given in iterations;
        - ``settings``: starting values of the feature controls;
        - ``coverage``: of the intervals (default: the model's);
        - ``deadline_s``: seconds the job may take (the control shows hours): the offers
          table marks the cheapest offer that meets it.
    prices : path or DataFrame, optional
        A price file merged over the built-in prices (see
        :func:`gpuperf_magics.hardware.prices.prices`).
    suggest_per : {"second", "run"}, default "second"
        What the "measure next" line counts the profiling budget in (``--suggest-per``):
        the most narrowing per second of profiling, or per run.
    **fields
        Fields of a :class:`~gpuperf_magics.prediction.job.Job`, over those of ``job``.

    Raises
    ------
    ValueError
        A starting value is not a finite positive number within the control's range, a GPU
        name is unknown (:class:`~gpuperf_magics.hardware.catalog.UnknownGPUError`, with close
        matches).
    PredictionError
        A job that is no job (both ``epochs`` and ``iterations``, several batch sizes), a
        store with no completed run, or a ``network`` that is not one of its networks.

    Attributes
    ----------
    widget : ipywidgets.VBox
        The panel to display.
    result : ipywidgets.HTML
        The answer, the notes on what it assumes, or why there is no answer.
    answer : Prediction or None
        The prediction shown: one row, the chosen batch size on the chosen device (None
        when there is no answer).
    measure_next : str or None
        The "measure next" line under the answer's interval: the batch worth profiling next
        for it, as ``%predict_time --suggest`` lists it first ("profile batch 256 next: ±31%
        → ±9%, about 12 s"), and the batches left out for the device's memory; "no
        suggestion: <why>" where suggesting failed; None where there is no candidate.
    text : str
        ``result`` as plain text.
    plot : ipywidgets.Output
        The plot of the job's time against batch size (a PNG, replaced on each change).
    figure : matplotlib.figure.Figure or None
        The figure last drawn (its lines hold the plotted points).
    offers : Offers or None
        The offers table last computed (``offers_view`` shows it).
    instances : ipywidgets.SelectMultiple
        The priced instances to compare.
    deadline : ipywidgets.BoundedFloatText
        Hours the job may take (0: no deadline).
    saved_note : ipywidgets.HTML
        Empty, or, after a page reload, that the saved copy no longer follows and how to
        save it again (the reloaded page cannot be reached from the kernel).
    """

    def __init__(self, store: Any = None, job: Job | str | None = None, *,
                 prices: Any = None, suggest_per: str = "second", **fields: Any) -> None:
        from gpuperf_magics.hardware.catalog import canonical_names
        from gpuperf_magics.hardware.prices import prices as load_prices
        from gpuperf_magics.prediction.job import Job
        from gpuperf_magics.prediction.options import check_suggest_per
        from gpuperf_magics.prediction.predict import predict_time
        from gpuperf_magics.prediction.store_model import fit_store, resolve_network
        from gpuperf_magics.store import Store

        self._suggest_per = check_suggest_per(suggest_per, "suggest_per")
        job = Job.of(job, **fields)
        network, gpus = job.network, job.gpus
        batch_size = starting_value("batch_size", job.one_batch_size("the panel"), whole=True)
        gpu_count = starting_value("gpu_count", job.gpu_count, whole=True)
        epochs = starting_value("epochs", job.epochs, whole=False)
        iterations = starting_value("iterations", job.iterations, whole=True)
        samples = starting_value("samples", job.samples, whole=True)
        deadline_h = None
        if job.deadline_s is not None:
            deadline_h = starting_value("deadline_h", job.deadline_s / 3600, whole=False)
        self._opening = job
        self._requested = canonical_names(list(gpus) if gpus else None)
        self._prices = prices
        price_table = load_prices(prices)  # a bad price file fails here, not in a callback

        self._predict_time = predict_time
        self._fit_store = fit_store
        self.store = store if isinstance(store, Store) else Store(store)
        all_runs = self.store.runs(status="ok")
        if all_runs.empty:
            fit_store(self.store, network)  # raises: nothing to learn from, and says what to do
        first = resolve_network(all_runs, network)

        self._text: str | None = None  # the answer as plain text, when there is one
        self.answer: Any = None
        self.measure_next: str | None = None
        # The last suggestion, by fit and configuration: ((fit, *configuration), line).
        self._next_cache: tuple[tuple[Any, ...], str | None] | None = None
        self._quiet = True  # no prediction while the controls are being set up
        self._build_controls(list(dict.fromkeys(all_runs["network"])), first, price_table,
                             batch_size=batch_size, epochs=epochs, samples=samples,
                             iterations=iterations, gpu_count=gpu_count, deadline_h=deadline_h,
                             precision=job.precision)
        self._load_network(first, opening=True, batch_size=batch_size, samples=samples,
                           gpu_count=gpu_count)
        self._observe()
        self._lay_out()
        self._quiet = False
        self._update()

    # ------------------------------------------------------------------ network
    def _load_network(
        self, network: str, *, opening: bool = False, batch_size: int | None = None,
        samples: int | None = None, gpu_count: int | None = None,
    ) -> None:
        """Fit ``network`` (or keep why it cannot be fitted) and set the controls from its
        latest run, except where a starting value was given. Opening, the GPU and the GPU
        count are set too; later, the user's choice of GPU and GPU count is kept."""
        import pandas as pd

        from gpuperf_magics.prediction.store_model import PredictionError, robust_times
        from gpuperf_magics.store import StoreError

        model = None
        try:
            fit = self._fit_store(self.store, network)
            model, runs = fit.model, fit.runs  # model: a StoreModel
            self._error = None
        except (PredictionError, StoreError) as exc:
            self._error = str(exc)
            try:
                runs = self.store.runs(status="ok", network=network)
            except StoreError:
                runs = self.store.runs(status="ok").iloc[:0]
        latest = runs.iloc[-1] if len(runs) else pd.Series(dtype=object)
        # Measured seconds per iteration by batch size, as the model learns them (a profiled
        # run's robust steady time, the median run of each batch size): the plot's points,
        # and its keys the measured batch sizes the plot spans.
        per_it = (robust_times(self.store, runs) / runs["iterations"]).groupby(
            runs["batch_size"]).median() if model is not None and len(runs) \
            else pd.Series(dtype=float)
        self._measured_per_iteration = {int(b): float(t) for b, t in per_it.items()}
        self._runs = runs if model is not None else None  # what the offers' rows need

        self._set_gpu_options(latest.get("gpu"), opening=opening)

        if batch_size is not None:
            self.batch_size.value = batch_size
        elif pd.notna(latest.get("batch_size")):
            self.batch_size.value = int(latest["batch_size"])
        dataset = latest.get("dataset_size")
        if samples is None and pd.notna(dataset) and dataset:
            self.samples.value = int(dataset)
            self._samples_source = "recorded"
        elif self._samples_source == "recorded":
            # The previous network's dataset is not this one's: an assumption from now on.
            self._samples_source = "assumed"
        if gpu_count is not None:
            self.gpu_count.value = gpu_count
        elif opening and pd.notna(latest.get("gpu_count")):
            self.gpu_count.value = max(1, int(latest["gpu_count"]))

        self._set_features(model, runs)

    def _network_changed(self, change: Any) -> None:
        """Take the new network's latest batch size and dataset size as the starting point."""
        self._quiet = True
        try:
            self._load_network(change["new"])
        finally:
            self._quiet = False
        self._update()

    # ------------------------------------------------------------------ answer
    def _notes(self, on_gpu: bool) -> list[str]:
        """What the answer assumes that the user did not say."""
        notes = []
        if self.length.value == "epochs" and self._samples_source == "assumed":
            notes.append(f"no dataset size recorded for {self.network.value!r}: assuming "
                         f"{self.samples.value:,} samples per epoch; set samples / epoch to "
                         "your dataset's size")
        if not on_gpu and self.gpu_count.value > 1:
            notes.append(f"GPUs = {self.gpu_count.value} applies to a GPU: this answer is for "
                         "the measured CPU; choose a GPU to use it")
        return notes

    def _show_error(self, message: str) -> None:
        hint = ""
        if len(self.network.options) > 1:
            hint = "<p>Choose another network above.</p>"
        self.result.value = f"<p style='color:#b00'>{html.escape(message)}</p>{hint}"
        self._text = None
        self.answer = None
        self.measure_next = None

    def _update(self, change: Any = None) -> None:
        """Re-answer after a change; any error, expected or not, is shown in the panel (an
        observer's exception would otherwise only reach the kernel's log) and logged."""
        if self._quiet:
            return
        try:
            self._answer()
        except Exception as exc:
            _log.exception("the what-if panel failed")
            self._show_error(f"the panel failed: {type(exc).__name__}: {exc}")
        try:
            self._refresh_snapshot()
        except Exception as exc:  # pragma: no cover - the live panel matters more
            _log.exception("the what-if panel's saved answer could not be updated")
            self._show_error(f"the saved answer could not be updated: {exc}")

    def _answer(self) -> None:
        """One prediction over the plot's batch sizes: its row at the chosen batch size and
        device is the answer (shown as ``%predict_time`` shows one), all of it the plot."""
        from gpuperf_magics.hardware.catalog import UnknownGPUError
        from gpuperf_magics.prediction import display
        from gpuperf_magics.prediction.store_model import PredictionError
        from gpuperf_magics.store import StoreError

        if self._error is not None:
            self._show_error(self._error)
            self.plot.outputs = ()
            self.offers_view.value = ""
            return
        on_gpu = self.gpu.value != self._here or self._measured is not None
        job = self.job()
        asked = job.with_(batch_sizes=self._plot_batches(), deadline_s=None)
        also = self._offer_configurations()
        try:
            try:
                whole = self._predict_time(self.store, asked, also=also)
            except (PredictionError, UnknownGPUError) as exc:
                if not also:
                    raise
                # An offer's GPU the runs cannot reach (CPU runs without FLOPs, say) must not
                # take the answer with it: the job alone, and the offers table says why.
                _log.debug("the offers' rows could not be predicted: %s", exc)
                whole = self._predict_time(self.store, asked, also=[])
        except (PredictionError, UnknownGPUError, StoreError) as exc:
            self._show_error(str(exc))
            self.plot.outputs = ()
            self.offers_view.value = ""
            return
        # The job's own rows (the offers' rows come after them): the answer and the plot.
        prediction = whole.rows(whole.frame.index[:len(whole.frame)
                                                  - whole.frame.attrs.get("also_rows", 0)])
        frame = prediction.frame
        here = frame[frame["batch_size"] == self.batch_size.value]
        answer = prediction.rows(here.index[-1:])  # the chosen GPU's row comes last
        row = answer.frame.iloc[0]
        if self.length.value == "epochs":
            # Shown for reference, and the starting point when switching to iterations.
            self._quiet = True
            try:
                self.iterations.value = min(int(row["iterations"]), _BOUNDS["iterations"][1])
            finally:
                self._quiet = False
        notes = self._notes(on_gpu)
        self.measure_next = self._measure_next(answer)
        self.result.value = display.as_html(answer, notes, self.measure_next)
        self._text = display.as_text(answer, notes, self.measure_next)
        self.answer = answer
        for part, show in ((lambda: self._draw(prediction, job), self.plot),
                           (lambda: self._show_offers(job, whole), self.offers_view)):
            try:
                part()
            except Exception as exc:  # one part failing leaves the others standing
                _log.exception("a part of the what-if panel failed")
                message = f"<p style='color:#b00'>{html.escape(type(exc).__name__)}: " \
                          f"{html.escape(str(exc))}</p>"
                if show is self.plot:
                    self.figure = None
                    self.plot.outputs = ({"output_type": "display_data", "metadata": {},
                                          "data": {"text/html": message,
                                                   "text/plain": str(exc)}},)
                else:
                    self.offers = None
                    self.offers_view.value = message

    def _measure_next(self, answer: Any) -> str | None:
        """The first line ``--suggest`` prints for the answer's configuration, and the
        batches left out for memory (None: no candidate); asked of the cached model only when
        the fit or that configuration changed. A failure reads "no suggestion: <why>" and is
        logged: it never takes the answer with it."""
        from gpuperf_magics.prediction.store_model import PredictionError
        from gpuperf_magics.prediction.suggestions import next_runs

        try:
            fit = self._fit_store(self.store, self.network.value)
            row = answer.frame.iloc[0]
            # The line opens with the answer's ±: a new ± is a new line.
            key = (fit, answer.frame.attrs.get("precision"),
                   *(str(row.get(c)) for c in (*fit.model.features, "expected_mape")))
            last = self._next_cache
            if last is None or last[0][0] is not fit or last[0][1:] != key[1:]:
                last = self._next_cache = (key, next_runs(answer, fit, k=1,
                                                         per=self._suggest_per).first())
            return last[1]
        except Exception as exc:  # the answer matters more than the suggestion
            _log.warning("the what-if panel has no suggestion: %s", exc,
                         exc_info=not isinstance(exc, PredictionError))
            return f"no suggestion: {exc}"

    # ------------------------------------------------------------------ plot and offers
    def _plot_batches(self) -> list[int]:
        return plot.batch_sizes(list(self._measured_per_iteration), self.batch_size.value)

    def _draw(self, prediction: Any, job: Job) -> None:
        """Job time against batch size on the measured device and the chosen GPU, drawn into
        a new PNG that replaces the last one in ``plot`` (one update: no flicker)."""
        self.figure = plot.job_time_figure(prediction.frame, plot.JobPlot(
            network=self.network.value, here=self._here,
            measured_per_iteration=self._measured_per_iteration,
            batch_size=self.batch_size.value, deadline_s=job.deadline_s))
        self.plot.outputs = (plot.png_output(self.figure,
                                             f"<plot of {self.network.value}'s job time>"),)

    def _offer_configurations(self) -> list[tuple[str, int, int]]:
        """What the chosen offers need answered, asked in the panel's one prediction (none
        where no offer is chosen, or where the offers cannot be read: the offers table then
        says why)."""
        from gpuperf_magics.prediction.offers import offer_configurations

        if not self.instances.value or self._runs is None:
            return []
        try:
            return offer_configurations(list(self.instances.value), self.batch_size.value,
                                        self._runs, self._prices)
        except Exception:  # the offers table shows the error itself
            _log.debug("the offers' configurations could not be read", exc_info=True)
            return []

    def _show_offers(self, job: Job, prediction: Any = None) -> None:
        from gpuperf_magics.prediction.offers import offers

        if not self.instances.value:
            self.offers = None
            self.offers_view.value = "<p>Choose offers above to compare their cost.</p>"
            return
        self.offers = offers(self.store, job.with_(gpus=None, gpu_count=None),
                             instances=list(self.instances.value), prices=self._prices,
                             prediction=prediction)
        self.offers_view.value = self.offers._repr_html_()

    @property
    def text(self) -> str:
        """The current answer as plain text: as ``print(prediction)`` shows it, or the
        message of why there is none (for tests and logs)."""
        import re

        if self._text is not None:
            return self._text
        paragraphs = re.sub(r"</p>\s*", "\n", self.result.value)
        return html.unescape(re.sub(r"<[^>]+>", "", paragraphs)).strip()

    def snapshot_html(self) -> str:
        """The panel's current answer as plain HTML: the prediction, the plot (a PNG) and the
        offers table; what a saved notebook shows where the widgets cannot render."""
        image = ""
        if self.plot.outputs and "image/png" in self.plot.outputs[0].get("data", {}):
            data = self.plot.outputs[0]["data"]["image/png"]
            image = f"<img src='data:image/png;base64,{data}' alt='job time against batch size'>"
        return (f"<div class='{SNAPSHOT_CLASS}'><p><i>The what-if panel's last answer "
                f"({html.escape(self.network.value)}, batch {self.batch_size.value}; open the "
                f"notebook with a kernel to change it):</i></p>{self.result.value}{image}"
                f"{self.offers_view.value}</div>")

    def _refresh_snapshot(self) -> None:
        """Rewrite every saved copy this front end knows (all share one display id)."""
        from IPython.display import update_display

        if self._displays:
            update_display({"text/html": self.snapshot_html(), "text/plain": self.text},
                           raw=True, display_id=self._display_id)

    def _ipython_display_(self) -> None:
        """The widgets, and the saved copy under the panel's one display id: a panel shown
        again (after a page reload, or in another cell) adds a copy that follows too."""
        from IPython import get_ipython
        from IPython.display import display

        shell = get_ipython()
        self._shown_in = getattr(shell, "execution_count", None)
        if self._number is None:
            self._number = len(_SHOWN) + 1
            _SHOWN[self._number] = self
        self._unseen_displays += 1
        self.saved_note.value = ""
        display(self.widget)
        display({"text/html": self.snapshot_html(), "text/plain": self.text},
                raw=True, display_id=self._display_id)
        self._displays += 1


def panel(number: int) -> WhatIfPanel:
    """The what-if panel shown ``number``-th in this kernel (1 first), for a cell that shows
    it again (after a page reload, the panel's note names it).

    Raises
    ------
    KeyError
        No panel of that number is shown any more.
    """
    try:
        return _SHOWN[number]
    except KeyError:
        raise KeyError(f"no what-if panel {number} in this kernel; shown: "
                       f"{sorted(_SHOWN) or 'none'}") from None


def what_if(store: Any = None, job: Job | str | None = None, *, prices: Any = None,
            suggest_per: str = "second", **fields: Any) -> WhatIfPanel:
    """The what-if panel for a store (display it as the last expression of a cell).

    Parameters
    ----------
    store : path or Store, optional
        The store to learn from (default: ``$GPUPERF_STORE`` or the per-user store).
    job : Job or str, optional
        The job the panel opens at, or a network name (see :class:`WhatIfPanel`;
        ``%predict_time -w`` passes the job its options describe).
    prices : path or DataFrame, optional
        A price file merged over the built-in prices (``%config GpuPerf.prices``).
    suggest_per : {"second", "run"}, default "second"
        What the panel's "measure next" line counts the budget in (see
        :class:`WhatIfPanel`; ``%predict_time -w --suggest-per run``).
    **fields
        Fields of a :class:`~gpuperf_magics.prediction.job.Job`, over those of ``job``.

    Returns
    -------
    WhatIfPanel

    Raises
    ------
    ValueError
        A starting value is invalid or a GPU name unknown (see :class:`WhatIfPanel`).
    PredictionError
        The store has no completed run, or ``network`` is not one of its networks. A
        network whose runs cannot be fitted opens the panel with the reason shown in it.

    Examples
    --------
    >>> what_if("runs.sqlite", batch_sizes=[48], gpus=["T4"], epochs=3,
    ...         samples=1000, deadline_s=3 * 3600)  # doctest: +SKIP
    """
    return WhatIfPanel(store, job, prices=prices, suggest_per=suggest_per, **fields)

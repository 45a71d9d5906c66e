"""Which instance to rent: predicted job time and cost of a job on priced cloud offers.

:func:`offers` asks :func:`~.predict.predict_time` for the job on the measured
device and on the GPU of every offer of the price table
(:func:`gpuperf_magics.hardware.prices.prices`), at each offer's GPU count, and prices it: job
cost = predicted time × the instance's price per hour. The cheapest and the fastest offers are
marked, and with a deadline the cheapest offer whose interval's upper end meets it. Where the
runs measured their peak GPU memory, an offer whose GPU would not hold the batch is marked
(:mod:`gpuperf_magics.prediction.memory`) and is never the one recommended.
"""

from __future__ import annotations

import datetime
import html
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuperf_magics.prediction import display
from gpuperf_magics.prediction.job import Job, spell
from gpuperf_magics.prediction.record import Prediction
from gpuperf_magics.prediction.store_model import PredictionError
from gpuperf_magics.units import format_cost, format_duration

if TYPE_CHECKING:  # pragma: no cover
    import os

    import pandas as pd

__all__ = ["Offers", "offer_label", "offers"]

#: Marks of the ``marks`` column.
CHEAPEST, FASTEST, DEADLINE = "cheapest", "fastest", "cheapest within deadline"
TOO_SMALL = "too little memory"


def offer_label(provider: str, instance: str, region: str, pricing: str) -> str:
    """``aws g5.xlarge (us-east-1, on-demand)``: one row of the price table, as the ``offer``
    column shows it and as ``instances=`` takes it (an instance name alone takes all its rows:
    every region and pricing)."""
    return f"{provider} {instance} ({region}, {pricing})"


@dataclass
class Offers:
    """A job's predicted time and cost on the measured device and on priced instances.

    Attributes
    ----------
    network : str
    frame : DataFrame
        One row per offer, the measured device first (``instance`` empty, no price):
        ``offer, provider, region, instance, pricing, gpu, gpus, batch_size, iterations,
        time_s, time_low_s, time_high_s, kind, detail, expected_mape, usd_per_hour,
        price_date, note, memory_gb, gpu_memory_gb, fits, cost_usd, cost_low_usd,
        cost_high_usd, marks``. ``memory_gb`` is the GPU memory each GPU needs for the
        batch, which an offer of several GPUs holds on each of them as its time is predicted
        (NaN when no run measured its peak), ``gpu_memory_gb`` what the GPU has (the
        measured device's recorded total, else the catalog's), ``fits`` True, False or None
        (unknown): :func:`~gpuperf_magics.prediction.memory.memory_columns`, as every
        prediction row.
    deadline_s : float or None
        The deadline the ``cheapest within deadline`` mark was chosen for.
    notes : list of str
        What the answer assumes (job length, prices' age, no offer meeting the deadline).
    """

    network: str
    frame: pd.DataFrame
    deadline_s: float | None = None
    notes: list[str] = field(default_factory=list)

    def _row(self, mark: str) -> pd.Series | None:
        hit = self.frame[self.frame["marks"].str.split(", ").apply(lambda m: mark in m)]
        return None if hit.empty else hit.iloc[0]

    @property
    def cheapest(self) -> pd.Series | None:
        """The priced offer of lowest job cost."""
        return self._row(CHEAPEST)

    @property
    def fastest(self) -> pd.Series | None:
        """The priced offer of shortest predicted time."""
        return self._row(FASTEST)

    @property
    def within_deadline(self) -> pd.Series | None:
        """The cheapest offer whose interval's upper end meets the deadline (None without
        a deadline, or when no offer meets it)."""
        return self._row(DEADLINE)

    def table(self) -> pd.DataFrame:
        """The human table: offer, GPUs, time and interval, kind and error, price, cost."""
        import pandas as pd

        rows = []
        for _, r in self.frame.iterrows():
            kind = display.label(r["kind"], r["detail"])
            rows.append({
                "offer": r["offer"],
                "GPUs": f"{int(r['gpus'])}× {r['gpu']}" if r["gpu"] else "CPU",
                "job time": format_duration(r["time_s"]),
                "interval": f"{format_duration(r['time_low_s'])} – "
                            f"{format_duration(r['time_high_s'])}",
                "kind": kind,
                "expected error": f"±{100 * r['expected_mape']:.0f}%",
                "$/hour": format_cost(r["usd_per_hour"]),
                "job cost": format_cost(r["cost_usd"]),
                "memory": _memory_text(r["memory_gb"], r["gpu_memory_gb"]),
                "mark": r["marks"],
                "note": r["note"],
            })
        return pd.DataFrame(rows)

    def header(self) -> str:
        deadline = (f"; deadline {format_duration(self.deadline_s)}"
                    if self.deadline_s is not None else "")
        return f"{self.network}: job time and cost per offer{deadline}"

    def compact(self) -> tuple[pd.DataFrame, list[str]]:
        """:meth:`table` with each text said once: a column holding one text on every row
        (the kind, the expected error) is left out and said above the table; a kind or note
        that repeats on several rows (the multi-GPU note) is a footnote ``[1]`` under it.

        Returns
        -------
        table : DataFrame
            What differs per row.
        said : list of str
            The lines said once (``kind: transfer (...)``, ``[1] scaled from one GPU ...``).
        """
        table = self.table()
        said: list[str] = []
        marks: dict[str, str] = {}
        for column in ("kind", "expected error", "note"):
            values = table[column]
            if not values.astype(bool).any():
                table = table.drop(columns=column)
            elif len(table) > 1 and values.nunique() == 1:
                said.append(f"{column}, every row: {values.iloc[0]}")
                table = table.drop(columns=column)
            elif column != "expected error":
                counts = values[values != ""].value_counts()
                for text in counts[counts > 1].index:
                    marks.setdefault(text, f"[{len(marks) + 1}]")
                table[column] = values.map(lambda v: marks.get(v, v))
        return table, said + [f"{mark} {text}" for text, mark in marks.items()]

    def __str__(self) -> str:
        table, said = self.compact()
        lines = [self.header(), table.to_string(index=False), *said]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text("Offers(...)" if cycle else str(self))

    def _repr_html_(self) -> str:
        from gpuperf_magics.prediction.display import html_table

        table, said = self.compact()
        foot = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        cells = html_table(table)
        return (
            f"<div class='gpuperf-offers'><p><b>{html.escape(self.header())}</b></p>"
            + "".join(f"<p>{html.escape(line)}</p>" for line in said if not line.startswith("["))
            + cells
            + "".join(f"<p>{html.escape(line)}</p>" for line in said if line.startswith("["))
            + (f"<ul>{foot}</ul>" if foot else "")
            + "</div>"
        )


def _memory_text(needed: float, capacity: float) -> str:
    """``12.3 of 24 GB`` (what one GPU needs for the batch, of what it has), or ``—``."""
    if not math.isfinite(needed):
        return "—"
    if not math.isfinite(capacity):
        return f"{needed:.1f} GB"
    return f"{needed:.1f} of {capacity:g} GB"


def _select(table: pd.DataFrame, instances: list[str] | None) -> pd.DataFrame:
    """The rows asked for, in the table's order: an offer label is one row, an instance name
    all rows of that instance (its regions and pricings)."""
    if instances is None:
        return table
    labels = [offer_label(*k) for k in table[["provider", "instance", "region", "pricing"]]
              .itertuples(index=False)]
    by_label = {label.lower(): i for i, label in enumerate(labels)}
    names = [str(n).lower() for n in table["instance"]]
    chosen: set[int] = set()
    for name in instances:
        key = str(name).lower()
        if key in by_label:
            chosen.add(by_label[key])
        elif key in names:
            chosen.update(i for i, n in enumerate(names) if n == key)
        else:
            known = ", ".join(dict.fromkeys(table["instance"]))
            raise PredictionError(f"no price for instance {name!r}; priced instances: "
                                  + known + f" (add your own with {spell('prices')})")
    return table.iloc[sorted(chosen)]


def offers(
    store: Any = None,
    job: Job | str | None = None,
    *,
    instances: list[str] | None = None,
    prices: str | os.PathLike[str] | pd.DataFrame | None = None,
    today: datetime.date | None = None,
    prediction: Prediction | None = None,
    **fields: Any,
) -> Offers:
    """Predicted time and cost of one job on the measured device and on priced instances.

    Parameters
    ----------
    store : path or Store, optional
        As for :func:`~gpuperf_magics.prediction.predict.predict_time`.
    job : Job or str, optional
        The job (:class:`~gpuperf_magics.prediction.job.Job`) or a network name. Its one
        batch size (default: the latest run's), its length, settings and coverage are
        answered for; its ``deadline_s`` (seconds the job may take) marks the cheapest offer
        whose interval's upper end is within it. The GPUs and their count are the offers'.
    instances : list of str, optional
        Offers of the price table to compare (default: all of them): an instance name takes
        every row of that instance (its regions, on-demand and spot), an offer label as the
        ``offer`` column shows it (:func:`offer_label`) one row.
    prices : path or DataFrame, optional
        A price file merged over the built-in prices
        (:func:`gpuperf_magics.hardware.prices.prices`).
    today : date, optional
        The date the prices' age is counted to (default: today).
    prediction : Prediction, optional
        A prediction of the same job that already answers the measured device and every
        chosen offer's GPU and count at the job's batch size (``predict_time(...,
        also=offer_configurations(...))``, as the what-if panel asks): its rows are taken
        instead of predicting again. One that lacks a row is not used.
    **fields
        Fields of a :class:`~gpuperf_magics.prediction.job.Job`, over those of ``job``.

    Returns
    -------
    Offers

    Raises
    ------
    PredictionError
        As :func:`~gpuperf_magics.prediction.predict.predict_time`; several batch sizes; GPUs
        asked for (an offer says its GPUs); an instance with no price.
    PriceError
        The price file is unreadable or has an invalid row.

    Examples
    --------
    >>> gm.offers("runs.sqlite", batch_sizes=[64], iterations=2_000_000,
    ...           deadline_s=3 * 3600)  # doctest: +SKIP
    """
    import pandas as pd

    from gpuperf_magics.hardware.prices import prices as load_prices
    from gpuperf_magics.prediction.predict import DEFAULT_BATCH_SIZE
    from gpuperf_magics.prediction.store_model import fit_store

    job = Job.of(job, **fields)
    batch_size = job.one_batch_size("offers")
    if job.gpus is not None or job.gpu_count is not None:
        raise PredictionError(f"offers take the GPUs and their count from the price table: "
                              f"leave out {spell('gpus', value=False)} and "
                              f"{spell('gpu_count', value=False)}, choose with instances=")
    chosen = _select(load_prices(prices), instances)
    runs = fit_store(store, job.network).runs
    net = str(runs["network"].iloc[0])
    if batch_size is None:
        known = runs["batch_size"].dropna()
        batch_size = int(known.iloc[-1]) if len(known) else DEFAULT_BATCH_SIZE
    multi_measured = bool((runs["gpu_count"].fillna(0) > 1).any())
    asked = job.with_(network=net, batch_sizes=[int(batch_size)], deadline_s=None)

    notes: list[str] = []
    reused = None if prediction is None else _from_prediction(prediction, int(batch_size),
                                                               runs, chosen, notes)
    first, by_count = reused or _predict_per_count(store, asked, runs, chosen, notes)
    frame = pd.DataFrame(_offer_rows(first, chosen, by_count, multi_measured))
    _memory(frame, runs, int(batch_size), notes)
    hours = frame["usd_per_hour"] / 3600
    frame["cost_usd"] = frame["time_s"] * hours
    frame["cost_low_usd"] = frame["time_low_s"] * hours
    frame["cost_high_usd"] = frame["time_high_s"] * hours
    frame["marks"] = _marks(frame, job.deadline_s, notes)
    dates = [d for d in frame["price_date"] if d is not None]
    if dates:
        oldest = min(dates)
        age = ((today or datetime.date.today()) - oldest).days
        notes.append(f"prices from {oldest.isoformat()} to {max(dates).isoformat()} (the "
                     f"oldest {age} days old): check the source pages before renting; add "
                     f"your own with {spell('prices')}")
    return Offers(network=net, frame=frame, deadline_s=job.deadline_s, notes=notes)


def offer_configurations(instances: list[str] | None, batch_size: int, runs: pd.DataFrame,
                         prices: Any = None) -> list[tuple[str, int, int]]:
    """``(gpu, gpu_count, batch_size)`` of the measured device (at its count) and of each
    chosen offer: what a prediction must answer for :func:`offers` to take it as
    ``prediction=`` (``predict_time(..., also=...)``)."""
    from gpuperf_magics.hardware.prices import prices as load_prices

    chosen = _select(load_prices(prices), instances)
    latest = runs.iloc[-1]
    out: list[tuple[str, int, int]] = []
    if isinstance(latest["gpu"], str) and latest["gpu"]:
        out.append((latest["gpu"], max(1, int(latest["gpu_count"])), batch_size))
    out += [(str(g), int(c), batch_size) for g, c in zip(chosen["gpu"], chosen["gpus"],
                                                         strict=True)]
    return list(dict.fromkeys(out))


def _from_prediction(prediction: Prediction, batch_size: int, runs: pd.DataFrame,
                     chosen: pd.DataFrame, notes: list[str],
                     ) -> tuple[pd.Series, dict[int, pd.DataFrame]] | None:
    """The measured device's row and the per-count frames taken from ``prediction`` (None
    where it lacks one of them: the caller then predicts itself)."""
    frame = prediction.frame[prediction.frame["batch_size"] == batch_size]
    latest = runs.iloc[-1]
    if isinstance(latest["gpu"], str) and latest["gpu"]:
        first = frame[(frame["gpu"] == latest["gpu"])
                      & (frame["gpu_count"] == max(1, int(latest["gpu_count"])))]
    else:
        first = frame[frame["gpu"].isna()]
    by_count: dict[int, pd.DataFrame] = {}
    for count in sorted(set(chosen["gpus"])):
        rows = frame[(frame["gpu_count"] == count)
                     & frame["gpu"].isin(chosen.loc[chosen["gpus"] == count, "gpu"])]
        if set(rows["gpu"]) != set(chosen.loc[chosen["gpus"] == count, "gpu"]):
            return None
        by_count[int(count)] = rows
    if first.empty:
        return None
    notes += [n for n in prediction.rows(frame.index).notes if n not in notes]
    return first.iloc[0], by_count


def _predict_per_count(store: Any, job: Job, runs: pd.DataFrame, chosen: pd.DataFrame,
                       notes: list[str]) -> tuple[pd.Series, dict[int, pd.DataFrame]]:
    """The measured device's row and, per GPU count of the chosen offers, the prediction
    frame for their GPUs."""
    from gpuperf_magics.prediction.predict import predict_time

    # One prediction per GPU count (each answers the measured device too, first): the
    # measured device's own row comes from the call at its count when there is one.
    latest = runs.iloc[-1]
    on_gpu = isinstance(latest["gpu"], str) and bool(latest["gpu"])
    measured_count = max(1, int(latest["gpu_count"])) if on_gpu else None
    by_count: dict[int, pd.DataFrame] = {}
    for count in sorted(set(chosen["gpus"])):
        gpus = list(dict.fromkeys(chosen.loc[chosen["gpus"] == count, "gpu"]))
        result = predict_time(store, job.with_(gpus=gpus, gpu_count=int(count)))
        notes += [n for n in result.notes if n not in notes]
        by_count[int(count)] = result.frame
    if measured_count is None and by_count:
        first = next(iter(by_count.values())).iloc[0]  # the CPU row is the same in each
    elif measured_count in by_count:
        first = by_count[measured_count].iloc[0]
    else:
        here = predict_time(store, job)
        notes += [n for n in here.notes if n not in notes]
        first = here.frame.iloc[0]
    return first, by_count


def _offer_rows(first: pd.Series, chosen: pd.DataFrame, by_count: dict[int, pd.DataFrame],
                multi_measured: bool) -> list[dict[str, Any]]:
    """One row for the measured device, then one per chosen offer."""
    measured_gpu = first["gpu"] if isinstance(first["gpu"], str) and first["gpu"] else None
    rows: list[dict[str, Any]] = [{
        "offer": f"measured: {measured_gpu or 'this CPU'}", "provider": "", "region": "",
        "instance": "", "pricing": "", "gpu": measured_gpu or "",
        "gpus": int(first["gpu_count"]) if measured_gpu else 0, **_prediction(first),
        "usd_per_hour": math.nan, "price_date": None, "note": "",
    }]
    for _, offer in chosen.iterrows():
        frame = by_count[int(offer["gpus"])]
        match = frame[frame["gpu"] == offer["gpu"]]
        if match.empty:  # pragma: no cover - predict_time answers every GPU it is asked
            raise PredictionError(f"no prediction for {offer['gpu']}")
        note = ""
        if offer["gpus"] > 1 and not multi_measured:
            # The GPUs column says how many: one text for every multi-GPU row, said once.
            note = ("scaled from one GPU with no multi-GPU measurement: the scaling is the "
                    "model's assumption")
        rows.append({
            "offer": offer_label(offer["provider"], offer["instance"], offer["region"],
                                 offer["pricing"]),
            "provider": offer["provider"], "region": offer["region"],
            "instance": offer["instance"], "pricing": offer["pricing"], "gpu": offer["gpu"],
            "gpus": int(offer["gpus"]), **_prediction(match.iloc[0]),
            "usd_per_hour": float(offer["usd_per_hour"]), "price_date": offer["date"],
            "note": note,
        })
    return rows


def _prediction(row: pd.Series) -> dict[str, Any]:
    return {key: row[key] for key in ("batch_size", "iterations", "time_s", "time_low_s",
                                      "time_high_s", "kind", "detail", "expected_mape")}


def _memory(frame: pd.DataFrame, runs: pd.DataFrame, batch_size: int,
            notes: list[str]) -> None:
    """The ``memory_gb``, ``gpu_memory_gb`` and ``fits`` columns, in place, and a note: the
    figures every prediction row carries (:func:`~.memory.memory_columns`), so that the
    offers table and the answer beside it agree. An offer of several GPUs holds the batch on
    each of them, as its time is predicted (weak scaling: per-GPU batch held)."""
    import pandas as pd

    from gpuperf_magics.prediction.memory import HEADROOM, memory_columns, peak_memory

    model = peak_memory(runs)
    sized = memory_columns(pd.DataFrame({"gpu": frame["gpu"], "gpu_count": frame["gpus"],
                                         "batch_size": batch_size}, index=frame.index), runs)
    verdicts = [None if pd.isna(ok) else bool(ok) for ok in sized["fits"]]
    frame["memory_gb"] = sized["memory_gb"]
    frame["gpu_memory_gb"] = sized["gpu_memory_gb"]
    frame["fits"] = pd.Series(verdicts, index=frame.index, dtype=object)
    if model is None:
        return
    short = [o for o, i, ok in zip(frame["offer"], frame["instance"], verdicts, strict=True)
             if ok is False and i]  # the measured device is no offer
    one = model.needed_gb(batch_size)
    notes.append(
        f"GPU memory for batch {batch_size}: {one:.1f} GB on one GPU ({model.caveat}); "
        f"{100 * HEADROOM:.0f}% of each GPU is kept for the CUDA context and the allocator"
        + (f"; {len(short)} offer{'s' if len(short) > 1 else ''} marked '{TOO_SMALL}' would "
           f"not hold it and {'are' if len(short) > 1 else 'is'} never recommended"
           if short else ""))


def _marks(frame: pd.DataFrame, deadline_s: float | None, notes: list[str]) -> list[str]:
    marks: list[list[str]] = [[] for _ in range(len(frame))]
    for i, ok in enumerate(frame["fits"]):
        if ok is False:
            marks[i].append(TOO_SMALL)
    # An offer whose GPU would not hold the batch is no recommendation at any price.
    priced = frame[frame["usd_per_hour"].notna() & (frame["fits"] != False)]  # noqa: E712
    if not priced.empty:
        marks[frame.index.get_loc(priced["cost_usd"].idxmin())].append(CHEAPEST)
        marks[frame.index.get_loc(priced["time_s"].idxmin())].append(FASTEST)
        if deadline_s is not None:
            meets = priced[priced["time_high_s"] <= deadline_s]
            if meets.empty:
                notes.append(f"no offer's interval ends within the deadline of "
                             f"{format_duration(deadline_s)}")
            else:
                marks[frame.index.get_loc(meets["cost_usd"].idxmin())].append(DEADLINE)
    return [", ".join(m) for m in marks]

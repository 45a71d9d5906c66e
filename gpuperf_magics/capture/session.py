"""``profile_training``: capture one training loop into a :class:`~gpuperf_magics.run.Run`.

Order of work, so that nothing of ours lands on the timed path: hooks on (cheap) → user code →
hooks off, device synchronised → *then* iteration interpretation, hardware detection,
architecture description (FLOPs), and the store write.
"""

from __future__ import annotations

import datetime as _dt
import logging
import math
import signal
from collections import Counter
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple

from gpuperf_magics._checks import positive_number
from gpuperf_magics.capture import nesting
from gpuperf_magics.capture.context import (
    fill_hardware,
    fill_model,
    gpu_count,
    model_name,
    no_iteration_reason,
)
from gpuperf_magics.capture.load import CpuClockSample, fill_quality, load_avg
from gpuperf_magics.capture.signals import SignalHold
from gpuperf_magics.capture.stopping import StopRule, StopTraining, auto_warmup, stop_after_value
from gpuperf_magics.capture.unsaved import check_store, forget, keep, unsaved_runs, warn_unsaved
from gpuperf_magics.run import IterationRecord, Run

if TYPE_CHECKING:  # pragma: no cover
    from gpuperf_magics.capture.progress import LiveLine, Prior

_log = logging.getLogger(__name__)


class Progress(NamedTuple):
    """Where a profiled loop stands: optimizer steps so far, and steps of the whole job
    (None while not known)."""

    steps: int
    total: int | None


def _mode(values: list[int]) -> int | None:
    values = [v for v in values if v]
    return Counter(values).most_common(1)[0][0] if values else None


class ProfileSession:
    """Profile the training loop run inside a ``with`` block; the script twin of the magic.

    Parameters
    ----------
    name : str, optional
        Workload label; default: the model's class name and parameter count
        (:func:`~gpuperf_magics.capture.context.default_name`, e.g. ``"ResNet-25.6M"``). Runs
        of one name are learnt as one network: name runs yourself to group them (a depth
        study) or to tell apart models of one size.
    store : str or path-like or Store, optional
        Where to save the run; default: ``$GPUPERF_STORE`` or the per-user store.
    warmup : int, optional
        Leading iterations flagged warm-up; default: chosen from the timings (at least 1).
    tags : dict, optional
        Labels kept with the run.
    epochs, total_iterations : optional
        What the full job would be; kept with the run for predictions.
    sync : bool
        Synchronise the GPU at every iteration (exact wall time, loses CPU/GPU overlap).
    phases : bool
        Split each iteration into data/forward/loss/backward/optimizer (~30 µs/iteration).
    save : bool
        Write the run to the store (default True).
    live : bool or Prior
        Show a live progress bar while the block runs (``tqdm.auto``: a widget in a notebook,
        a redrawn line on a terminal) with the steps done, the time per step, the time left
        and when the job will be done; it needs the job's length (``epochs`` or
        ``total_iterations``). ``True`` estimates from the run's own steps;
        :func:`gpuperf_magics.prediction.live.live_prior` gives a prior that lets the store's
        model of the network lead while the run is young. Default False (``%%profile_training``
        passes one in a notebook unless ``-q``).
    stop_after : int or "auto", optional
        End the loop after this many iterations in all (warm-up included, still decided
        afterwards), or with ``"auto"`` once the median time per iteration is known within 1%
        (50 to 1000 iterations: :mod:`~gpuperf_magics.capture.stopping`), by an exception
        from ``optimizer.step()`` that the block catches: **code after the loop inside the**
        ``with`` **block does not run**. The model and optimizer keep the state those
        iterations left (what the loop does after the last ``opt.step()`` does not run). The
        run is complete (``Run.stopped_by`` says why it ended) and keeps ``epochs`` /
        ``total_iterations`` as the whole job's. Counts ``torch.optim`` steps.

    The ``with`` block's target is the :class:`~gpuperf_magics.run.Run`, filled in when the
    block exits; exceptions are never swallowed (the partial run is kept with its status),
    except the stop of ``stop_after``.
    Nothing after the loop loses the run: it is kept before the FLOP count, hardware detection
    and the save begin (see :func:`unsaved_runs`).

    In a data-parallel job (``DistributedDataParallel`` under torchrun or
    ``torch.multiprocessing``) use it in every rank: rank 0 saves one run for the job, and a
    failed rank saves its own partial run (:mod:`gpuperf_magics.capture.distributed`).

    Examples
    --------
    >>> import gpuperf_magics as gm
    >>> with gm.profile_training(name="mlp", store="runs.sqlite") as run:  # doctest: +SKIP
    ...     for x, y in loader:
    ...         opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
    >>> print(run)  # doctest: +SKIP
    >>> from gpuperf_magics.prediction.live import live_prior
    >>> with gm.profile_training(name="mlp", store="runs.sqlite", epochs=3,
    ...                          live=live_prior("runs.sqlite", "mlp")):  # doctest: +SKIP
    ...     train()
    """

    def __init__(
        self,
        name: str | None = None,
        store: Any = None,
        *,
        warmup: int | None = None,
        tags: dict[str, str] | None = None,
        epochs: float | None = None,
        total_iterations: int | None = None,
        sync: bool = False,
        phases: bool = False,
        save: bool = True,
        live: bool | Prior = False,
        stop_after: int | str | None = None,
    ) -> None:
        if warmup is not None and warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {warmup}")
        positive_number(epochs, "epochs")
        total_iterations = positive_number(total_iterations, "total_iterations", whole=True)
        if epochs is not None and total_iterations is not None:
            raise ValueError("give epochs or total_iterations, not both (total_iterations "
                             "counts the whole job; epochs are multiplied by the loader's length)")
        self.stop_after = stop_after_value(stop_after)
        self.name = name
        self.store = store
        self.warmup = warmup
        self.sync = sync
        self.phases = phases
        self.save = save
        # Keys as text: the store writes tags as JSON with sorted keys, which mixed key types
        # (``{1: "a", "b": "c"}``) would break at save time, after the training.
        self.run = Run(network=name or "", status="running",
                       tags={str(k): v for k, v in (tags or {}).items()})
        if epochs is not None:
            self.run.hyper["epochs"] = epochs
        if total_iterations is not None:
            self.run.hyper["total_iterations"] = total_iterations
        self._recorder: Any = None
        self._stop_rule: StopRule | None = None
        self._sigterm: SignalHold | None = None
        self._job_gpus: int | None = None  # CUDA devices of the whole job, from the merge
        self._left_to_rank0 = False  # a rank > 0 whose figures rank 0 saves
        self.live = live
        self._live: LiveLine | None = None
        self._nested = False  # inside another block: not profiled on its own

    def __enter__(self) -> Run:
        from gpuperf_magics.capture.recorder import Recorder

        if not nesting.enter(self, self.run):  # inside another block: its run counts
            self._nested = True
            return self.run
        if self.save:  # a store that cannot take the run is said now, not after the training
            check_store(self.store)
        self.run.created_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        self.run.quality["load_avg_start"] = load_avg()
        self._cpu = CpuClockSample()
        from gpuperf_magics.capture import distributed

        job = distributed.current_job() or distributed.launched_job()
        if job and self.stop_after == "auto":
            # Each rank would judge its own timings and stop at its own step: the others
            # would wait for it in the next all-reduce for ever.
            raise ValueError("stop_after='auto' stops each process on its own timings; in a "
                             "data-parallel job give a number of iterations (stop_after=200)")
        if job:
            # torchrun stops every rank once one fails: the rank it stops still saves its
            # partial run, as after a Ctrl-C.
            self._sigterm = SignalHold(signal.SIGTERM, raise_as=distributed.Terminated)
        self._recorder = Recorder(phases=self.phases, sync=self.sync)
        self._recorder.__enter__()
        if self.stop_after is not None:  # after the recorder: its hook logs a step first
            self._stop_rule = StopRule(self.stop_after, self, self.warmup).install(
                self._recorder)
        if self.live is not False and self.live is not None:
            from gpuperf_magics.capture.progress import LiveLine

            prior = None if isinstance(self.live, bool) else self.live
            self._live = LiveLine(self.progress, configuration=self.configuration,
                                  prior=prior).start()
        nesting.hold(self)  # last: a block that failed to start leaves no mark
        return self.run

    def progress(self) -> Progress:
        """Optimizer steps so far and steps of the whole job (None when not known yet):
        ``total_iterations``, else ``epochs`` × the DataLoader's length once one is iterated.
        Safe to call from another thread while the block runs (the live line does)."""
        rec = self._recorder
        if rec is None:
            return Progress(0, None)
        total = self.run.hyper.get("total_iterations")
        epochs = self.run.hyper.get("epochs")
        if total is None and epochs is not None:
            per_epoch = rec.loader_length()
            total = max(1, math.ceil(epochs * per_epoch)) if per_epoch else None
        return Progress(rec.steps_seen, total)

    def configuration(self) -> tuple[str, int, str | None, int] | None:
        """Network, batch size, GPU name (None on the CPU) and GPU count of the loop running
        in the block, or None until the recorder has seen the model and a complete step.
        Safe to call from another thread (the live line asks the store's model with it)."""
        from gpuperf_magics.capture.probes import device_of

        rec = self._recorder
        model = rec.model if rec is not None else None
        if model is None:
            return None
        batch = rec.recent_batch()
        if not batch:
            return None
        network = self.name or model_name(model)
        device = device_of(model)
        if device is None or device.type != "cuda":
            return network, batch, None, 0
        import torch

        return network, batch, torch.cuda.get_device_name(device), gpu_count(model)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        self.stop(exc)
        # Our own stop ends the block, not the script; any other exception goes on.
        return isinstance(exc, StopTraining) and exc.owner is self

    def stop(self, error: BaseException | None = None) -> Run:
        """Stop the live line and remove the hooks, then interpret, describe and save;
        ``error`` ended the block."""
        if isinstance(error, StopTraining):  # ours, or an outer block's passing through
            error = None
        if self._stop_rule is not None:  # the magic passes its own stop on as None
            self.run.stopped_by = self._stop_rule.stopped_by
        if error is None:
            status = "ok"
        elif isinstance(error, KeyboardInterrupt):
            status = "interrupted"
        else:
            status = "failed"
        if self._nested:
            self.run.status = status
            return self.run  # the outer block holds the iterations
        nesting.leave(self)
        try:
            if self._stop_rule is not None:  # first: nothing may stop the loop any more
                self._stop_rule.remove()
            if self._live is not None:
                self._live.stop(status)  # its last draw: the steps the loop made, how it ended
                self._live = None
            self._recorder.close()
            if self._sigterm is not None:  # a stop from now on waits until the run is saved
                self._sigterm.hold()
            return self._finish(status, error)
        finally:
            if self._sigterm is not None and self._sigterm.release():
                from gpuperf_magics.capture import distributed

                raise distributed.Terminated  # it waited for the run to be saved: stop now

    def _finish(self, status: str, error: BaseException | None) -> Run:
        run, rec = self.run, self._recorder
        # From the loop's end until the run is kept, a Ctrl-C waits: a few milliseconds of
        # interpretation that would otherwise drop everything measured.
        hold = SignalHold(signal.SIGINT)
        try:
            job, kept = self._keep(status, error)
        finally:
            interrupted = hold.release()
        if not kept:
            if interrupted:
                raise KeyboardInterrupt
            if job is not None and status == "ok":
                # The other ranks wait for this one's figures: say there are none.
                from gpuperf_magics.capture import distributed
                from gpuperf_magics.capture.probes import device_of

                try:
                    distributed.exchange(distributed.summary(run, None), device_of(rec.model))
                except Exception:  # a rank without a run has nothing to lose here
                    _log.warning("telling the other ranks this one has no run failed",
                                 exc_info=True)
            return run
        try:
            if interrupted:
                raise KeyboardInterrupt
            self._post_process(rec, job)
        except BaseException as exc:  # Ctrl-C while describing: save what was measured
            run.notes.append(
                f"post-processing stopped by {type(exc).__name__}: architecture or hardware "
                "figures may be missing"
            )
            if self.save and not self._left_to_rank0:
                self._save()
            raise
        if self.save and not self._left_to_rank0:
            self._save()
        elif self._left_to_rank0:
            forget(run)
        return run

    def _keep(self, status: str, error: BaseException | None) -> tuple[Any, bool]:
        """Interpret the timings and keep the run (in unsaved_runs() until saved); returns
        the data-parallel job (or None) and whether there was a run to keep."""
        run, rec = self.run, self._recorder
        run.status = status
        if error is not None:
            run.error = f"{type(error).__name__}: {error}"[:500]
        records = rec.iterations()
        fill_quality(self.run, rec, self._cpu, sync=self.sync, phases=self.phases)
        if self._stop_rule is not None:
            run.quality["stop_after"] = str(self.stop_after)
            note = self._stop_rule.note(rec.steps_seen, status)
            if note:
                run.notes.append(note)
        run.peak_memory_gb = rec.peak_memory_gb
        from gpuperf_magics.capture import distributed

        job = distributed.current_job()
        if not records:
            run.notes.append(no_iteration_reason(rec, status, error))
            return job, False
        k = self.warmup if self.warmup is not None else auto_warmup(
            [r.duration_s for r in records]
        )
        if len(records) == 1:
            run.notes.append("only 1 iteration: its time includes first-call costs (warm-up); "
                             "profile a few more iterations for a steady time")
        elif k >= len(records):
            run.notes.append(f"all {len(records)} iterations are warm-up (--warmup {k}): the "
                             "statistics include them; profile more iterations")
        for r in records[: min(k, len(records))]:
            r.warmup = True
        run.iterations = records
        self._fill_batch(rec, records)
        run.tags = {str(k): v for k, v in run.tags.items()}
        if self.save:
            # Kept before anything slow or fallible runs (the FLOP count, hardware detection,
            # the exchange between ranks, the store write): a second Ctrl-C or a failure there
            # leaves the run in unsaved_runs(), never lost. A successful save takes it out.
            keep(run)
        return job, True

    def _post_process(self, rec: Any, job: Any) -> None:
        """Everything after the timings that may take long or fail: the exchange between
        ranks, model, hardware, notes."""
        run = self.run
        if job is not None:
            self._join_job(rec, job)
        else:
            from gpuperf_magics.capture import distributed

            launched = distributed.launched_job()
            if launched is not None:
                self._rank_alone(launched, "no process group at the block's end (destroyed "
                                 "inside it?): put destroy_process_group() after the block")
        if not self._left_to_rank0:
            fill_model(self.run, rec)
        fill_hardware(self.run, rec, self._job_gpus)
        if run.quality.get("busy"):
            run.notes.append(
                f"machine busy: other processes used {run.quality['other_cpu_load']:.1f} cores "
                "on average during the run; timings may be inflated"
            )
        skipped = run.hyper.get("skipped_steps")
        if skipped:
            run.notes.append(f"{skipped} optimizer steps skipped by AMP")
        raised = run.quality.get("raised_steps")
        if raised:
            run.notes.append(f"{raised} optimizer step{'s' if raised > 1 else ''} raised and "
                             "the loop went on: each is part of the next iteration")

    # ------------------------------------------------------------------ pieces
    def _join_job(self, rec: Any, job: Any) -> None:
        """One run per data-parallel job (see :mod:`~gpuperf_magics.capture.distributed`)."""
        from gpuperf_magics.capture import distributed
        from gpuperf_magics.capture.probes import device_of

        run = self.run
        if run.status != "ok":
            # No collective after an error: the others would wait for this rank.
            self._rank_alone(job, f"this rank {run.status}")
            return
        device = device_of(rec.model)
        try:
            ranks = distributed.exchange(distributed.summary(run, device), device)
        except Exception as exc:  # a peer died after its loop, or the group timed out
            _log.warning("the exchange between ranks failed", exc_info=True)
            run.status = "failed"
            run.error = f"exchange between ranks failed: {type(exc).__name__}: {exc}"[:500]
            self._rank_alone(job, "the exchange with the other ranks failed")
            return
        self._job_gpus = distributed.merge(run, ranks, job)
        if job.rank != 0:
            self._left_to_rank0 = True
            run.notes.append(f"rank {job.rank} of {job.world_size}: rank 0 saves the job's run")

    def _rank_alone(self, job: Any, why: str) -> None:
        """A rank's own partial run, tagged with its rank, without the others' figures."""
        run = self.run
        run.tags["rank"] = str(job.rank)
        run.quality.update(rank=job.rank, world_size=job.world_size, global_batch_size=None)
        run.notes.append(f"rank {job.rank} of {job.world_size} saved alone ({why}): its own "
                         "figures, not the job's")

    def _fill_batch(self, rec: Any, records: list[IterationRecord]) -> None:
        """Batch size, hyper-parameters and the default name: cheap, before anything slow."""
        run = self.run
        steady = [r for r in records if not r.warmup] or records
        run.batch_size = _mode([r.samples or 0 for r in steady])
        micro = _mode([r.micro_batches or 0 for r in steady]) or 1
        hyper = {**rec.hyper(), **run.hyper}
        hyper["micro_batches"] = micro
        if run.batch_size:
            hyper["micro_batch_size"] = run.batch_size // micro
        if micro > 1 and hyper.get("iterations_per_epoch"):
            # The loader yields micro-batches; an iteration is one optimizer step.
            hyper["iterations_per_epoch"] = -(-hyper["iterations_per_epoch"] // micro)
        if "total_iterations" not in hyper and hyper.get("epochs") and hyper.get(
            "iterations_per_epoch"
        ):
            hyper["total_iterations"] = int(hyper["epochs"] * hyper["iterations_per_epoch"])
        run.hyper = hyper
        run.quality.setdefault("world_size", 1)
        run.quality.setdefault("global_batch_size", run.batch_size)
        model = rec.model
        if model is None:
            run.network = run.network or "training"
        elif not run.network:
            run.network = model_name(model)

    def _save(self) -> None:
        """Write the run; a Ctrl-C during the write waits for it (the run is then saved, and
        the interrupt raised). A failed or interrupted write leaves the run in
        :func:`unsaved_runs` with a note and an :class:`UnsavedRunWarning`."""
        from gpuperf_magics.store import Store

        if self.store is not None:  # where run.save() retries; the default stays dynamic
            self.run.target_store = str(getattr(self.store, "path", self.store))
        run = self.run
        keep(run)
        hold = SignalHold(signal.SIGINT)
        try:
            Store(self.store).save_run(run)
        except BaseException as exc:  # whatever it is, the measured run must survive it
            hold.release()
            warn_unsaved(run, self.store, self._not_saved(exc))
            if not isinstance(exc, Exception):  # an interrupt still stops the script
                raise
            return
        interrupted = hold.release()
        forget(run)
        if interrupted:  # a Ctrl-C that came during the write: the run is saved, now stop
            raise KeyboardInterrupt

    def _not_saved(self, exc: BaseException) -> str:
        """The run's note that its save failed, and how to save it; returns why it failed."""
        from gpuperf_magics.store import StoreError

        if not isinstance(exc, Exception):
            _log.warning("the store write was interrupted; the run is kept in unsaved_runs()")
            what = (f"the store write was interrupted ({type(exc).__name__}) before it "
                    "finished.")
        else:
            _log.warning("the run could not be saved; it is kept in unsaved_runs()",
                         exc_info=True)
            what = str(exc) if isinstance(exc, (StoreError, ValueError)) else (
                f"{type(exc).__name__}: {exc}.")
        self.run.notes.append(
            f"not saved: {what} The run is kept in memory: fix the store, then call "
            "run.save() (or run.save('other.sqlite')); gpuperf_magics.capture.unsaved_runs() "
            "lists such runs."
        )
        return what


__all__ = ["ProfileSession", "auto_warmup", "check_store", "profile_training", "unsaved_runs"]

#: ``with profile_training(...) as run:`` — the script twin of ``%%profile_training``.
profile_training = ProfileSession

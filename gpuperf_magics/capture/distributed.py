"""Data-parallel jobs: one run per job, from what every rank measured.

Each rank of a ``DistributedDataParallel`` job (started by ``torchrun`` or
``torch.multiprocessing``) runs ``profile_training()`` around its own loop and captures it
exactly as a single process does: nothing is exchanged while it trains. When a rank's block
ends without error, the ranks exchange one summary each, once (``all_gather_object``), and
rank 0 writes one run for the job:

- its iterations are those of the slowest rank (the job advances at that pace);
- ``gpu_count`` is the number of distinct CUDA devices the ranks used (0 on the CPU);
- ``quality``: ``world_size`` and ``global_batch_size`` (samples per step over all ranks;
  ``batch_size`` stays the samples per step of one process), ``rank_slowest``,
  ``rank_median_min_s``/``rank_median_max_s`` (the fastest and slowest rank's median
  iteration), ``rank_spread`` (max/min - 1) and ``dist_backend``.

After an error no collective is called: a rank that failed would otherwise make the others
wait for it until the process group's timeout. Each rank then saves its own partial run, tagged
``rank=<r>``; a rank whose exchange fails (a peer died after its loop) does the same, and so
does a rank that a launcher stops with SIGTERM while it profiles (torchrun stops the others
once one rank fails).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from dataclasses import dataclass
from typing import Any

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    """This process's place in a data-parallel job."""

    rank: int
    world_size: int
    backend: str


def current_job() -> Job | None:
    """The initialised process group of more than one rank this process belongs to, if any."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    world = dist.get_world_size()
    if world <= 1:
        return None
    return Job(dist.get_rank(), world, str(dist.get_backend()))


def launched_job() -> Job | None:
    """This process's rank from a launcher's environment (torchrun, accelerate, Lightning
    set ``RANK`` and ``WORLD_SIZE``), whether or not the process group exists (yet, or still)."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
    except ValueError:
        return None
    return Job(rank, world, "none") if world > 1 else None


def summary(run: Any, device: Any) -> dict[str, Any]:
    """What one rank tells the others: its iterations, batch, status and device."""
    return {
        "status": run.status,
        "iterations": list(run.iterations),
        "batch_size": run.batch_size,
        "median_s": run.median_s,
        "device": _device_key(device),
    }


def _device_key(device: Any) -> str | None:
    """A name for the CUDA device a rank used that is unique over the job's machines."""
    if device is None or getattr(device, "type", "cpu") != "cuda":
        return None
    import torch

    try:
        uuid = str(torch.cuda.get_device_properties(device).uuid)
    except Exception:  # an older torch without uuid: the index is unique on one machine
        _log.debug("no device uuid; naming the device by its index", exc_info=True)
        uuid = str(device.index if device.index is not None else torch.cuda.current_device())
    return f"{socket.gethostname()}/{uuid}"


def exchange(mine: dict[str, Any], device: Any = None) -> list[dict[str, Any]]:
    """Every rank's summary, in rank order (one collective; call it only without error).

    NCCL moves the pickled summaries through the current CUDA device: the model's, so that a
    job that never called ``torch.cuda.set_device`` does not put every rank on device 0.
    """
    import torch
    import torch.distributed as dist

    out: list[Any] = [None] * dist.get_world_size()
    on_model_device: Any = contextlib.nullcontext()
    if device is not None and getattr(device, "type", None) == "cuda":
        on_model_device = torch.cuda.device(device)
    with on_model_device:
        dist.all_gather_object(out, mine)
    return out


def merge(run: Any, ranks: list[dict[str, Any]], job: Job) -> int:
    """Make ``run`` the job's run from every rank's summary; returns its ``gpu_count``."""
    medians = [r["median_s"] for r in ranks]
    known = [(m, i) for i, m in enumerate(medians) if m is not None]
    if known:
        slowest = max(known)[1]
        run.iterations = list(ranks[slowest]["iterations"])
        fastest_s, slowest_s = min(known)[0], max(known)[0]
        run.quality.update(
            rank_slowest=slowest,
            rank_median_min_s=fastest_s,
            rank_median_max_s=slowest_s,
            rank_spread=(slowest_s / fastest_s - 1.0) if fastest_s > 0 else None,
        )
    batches = [r["batch_size"] for r in ranks]
    run.quality["world_size"] = job.world_size
    run.quality["global_batch_size"] = (
        sum(batches) if all(b is not None for b in batches) else None
    )
    run.quality["dist_backend"] = job.backend
    not_ok = [i for i, r in enumerate(ranks) if r["status"] != "ok"]
    if not_ok:
        run.notes.append(f"rank(s) {not_ok} ended with another status")
    devices = {r["device"] for r in ranks if r["device"] is not None}
    return len(devices)


class Terminated(KeyboardInterrupt):
    """SIGTERM, as a launcher sends to the surviving ranks once one rank has failed."""

    def __init__(self, message: str = "stopped by SIGTERM (another rank failed?)") -> None:
        super().__init__(message)

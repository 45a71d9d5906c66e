"""Class patches the recorder puts on for the life of a profiled block: what hooks cannot see.

Each ``patch_*`` function patches one class and returns the undo (and
:func:`quiet_compile_hook_warning` a warnings filter). None of them is on a per-iteration path:
a GradScaler update is once per step in an AMP loop at most, a DataLoader pass once per epoch,
a process start once.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from gpuperf_magics.capture.batch import safe_len, samples_per_epoch


@dataclass(slots=True)
class LoaderUse:
    """A DataLoader iterated in the cell and how many passes it made."""

    loader: Any
    passes: int = 0


def patch_grad_scaler(on_update: Callable[[], None]) -> list[Callable[[], None]]:
    """Call ``on_update`` at each ``GradScaler.update()`` (the recorder notices AMP steps the
    scaler skipped: an update with no optimizer step before it); the undos."""
    classes = [getattr(getattr(torch, "amp", None), "GradScaler", None)]
    classes.append(getattr(getattr(torch.cuda, "amp", None), "GradScaler", None))
    undos: list[Callable[[], None]] = []
    for cls in dict.fromkeys(c for c in classes if c is not None and "update" in vars(c)):
        original = cls.update

        def update(scaler: Any, *args: Any, _orig: Any = original, **kwargs: Any) -> Any:
            on_update()
            return _orig(scaler, *args, **kwargs)

        cls.update = update

        def restore(c: Any = cls, o: Any = original) -> None:
            c.update = o

        undos.append(restore)
    return undos


def patch_dataloader(loaders: dict[int, LoaderUse]) -> Callable[[], None]:
    """Count passes over DataLoaders into ``loaders`` (epochs, dataset size); the undo."""
    loader_cls = torch.utils.data.DataLoader
    original = loader_cls.__iter__

    def __iter__(loader: Any) -> Any:
        use = loaders.setdefault(id(loader), LoaderUse(loader))
        use.passes += 1
        return original(loader)

    loader_cls.__iter__ = __iter__  # type: ignore[method-assign]
    return lambda: setattr(loader_cls, "__iter__", original)


def patch_process_start(workers: list[str]) -> Callable[[], None]:
    """Note in ``workers`` the worker processes the cell starts (``torch.multiprocessing.spawn``,
    accelerate's ``notebook_launcher``, Lightning's ``ddp_notebook``): their training happens
    where the hooks cannot see it. DataLoader workers are not counted. The undo."""
    import multiprocessing.process as mp_process

    cls = mp_process.BaseProcess
    original = cls.start

    def start(proc: Any) -> None:
        target = getattr(proc, "_target", None)
        if getattr(target, "__name__", "") != "_worker_loop":  # a DataLoader worker
            args = getattr(proc, "_args", ())
            if getattr(target, "__module__", "") == "torch.multiprocessing.spawn" and args:
                target = args[0]  # torch's _wrap(fn, rank, ...): the user's function
            workers.append(_callable_name(target))
        return original(proc)

    cls.start = start  # type: ignore[method-assign,assignment]
    return lambda: setattr(cls, "start", original)


def _callable_name(fn: Any) -> str:
    """``fn``'s name as a user wrote it (``train_worker``), through ``functools.partial``."""
    fn = getattr(fn, "func", fn)
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or fn)


def longest_loader(loaders: dict[int, LoaderUse]) -> int | None:
    """Batches per pass of the longest sized DataLoader iterated so far (None: none). Read
    from the live line's thread while the loop may add a loader."""
    try:
        lengths = [safe_len(use.loader) for use in list(loaders.values())]
    except RuntimeError:  # the training thread added a loader meanwhile
        return None
    known = [n for n in lengths if n]
    return max(known) if known else None


def loader_hyper(loaders: dict[int, LoaderUse]) -> dict[str, Any]:
    """The hyper-parameters the training DataLoader says: the one iterated most (the larger
    dataset on a tie), its passes, dataset size, length, batch size and workers."""
    if not loaders:
        return {}
    use = max(loaders.values(), key=lambda u: (u.passes, safe_len(u.loader.dataset) or 0))
    loader = use.loader
    return {
        "epochs_seen": use.passes,
        "dataset_size": samples_per_epoch(loader),
        "iterations_per_epoch": safe_len(loader),
        "drop_last": bool(getattr(loader, "drop_last", False)),
        "loader_batch_size": loader.batch_size,
        "dataloader_workers": loader.num_workers,
    }


def quiet_compile_hook_warning() -> Callable[[], None]:
    """Silence torch's warning that global hooks fire twice for a ``torch.compile``'d module
    (the recorder removes its global hooks before a compiled model's inner call); the undo."""
    warnings.filterwarnings(
        "ignore", message=r"Using `torch\.compile\(module\)` when there are global hooks",
        category=UserWarning,
    )
    added = warnings.filters[0]

    def undo() -> None:
        with contextlib.suppress(ValueError):
            warnings.filters.remove(added)  # type: ignore[attr-defined]
            warnings._filters_mutated()  # type: ignore[attr-defined]

    return undo

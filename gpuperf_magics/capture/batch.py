"""What a training loop's inputs and loaders say about its batch: the samples of one call,
the samples of one pass over a loader.

Called from the recorder's hooks on the timed path, so each look is cheap on purpose: one
container level deep, no copies.
"""

from __future__ import annotations

from typing import Any

import torch

_Tensor = torch.Tensor


def first_tensor(obj: Any, min_dim: int = 0) -> torch.Tensor | None:
    """The first tensor (of at least ``min_dim`` dimensions) in args/kwargs-like containers,
    one level deep (cheap on purpose)."""
    if isinstance(obj, _Tensor):
        return obj if obj.dim() >= min_dim else None
    if isinstance(obj, (list, tuple)):
        for item in obj:
            if isinstance(item, _Tensor):
                if item.dim() >= min_dim:
                    return item
            elif isinstance(item, (list, tuple, dict)):
                found = first_tensor(item, min_dim)
                if found is not None:
                    return found
    elif isinstance(obj, dict):
        return first_tensor(tuple(obj.values()), min_dim)
    return None


def batch_of(args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> int | None:
    """Dim 0 of the first input with a batch dimension (a leading scalar such as a
    temperature ``model(torch.tensor(2.0), x)`` is not the batch)."""
    t = first_tensor(args, 1)
    if t is None and kwargs:
        t = first_tensor(kwargs, 1)
    return None if t is None else int(t.shape[0])


def samples_per_epoch(loader: Any) -> int | None:
    """Samples one pass of ``loader`` visits: its sampler's length (a subset, a distributed
    shard), else the dataset's. A custom batch sampler is asked for its own sampler."""
    sampler = getattr(loader, "sampler", None)
    if getattr(loader, "batch_size", None) is None:  # a custom batch_sampler
        sampler = getattr(getattr(loader, "batch_sampler", None), "sampler", None)
    size = safe_len(sampler) if sampler is not None else None
    return size if size is not None else safe_len(loader.dataset)


def safe_len(obj: Any) -> int | None:
    try:
        return len(obj)
    except TypeError:
        return None

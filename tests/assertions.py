"""Checks that several test files share: the recorder leaves no hook behind, and
``describe`` runs without a warning."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import nn

from gpuperf_magics.architecture import Architecture, describe


def assert_no_hooks_left(*models: nn.Module) -> None:
    """No global or per-module hook and no patched torch method remains after a capture."""
    from torch.nn.modules import module as module_mod
    from torch.optim import optimizer as optim_mod

    assert not module_mod._global_forward_pre_hooks
    assert not module_mod._global_forward_hooks
    assert not module_mod._has_any_global_hook()
    assert not optim_mod._global_optimizer_pre_hooks
    assert not optim_mod._global_optimizer_post_hooks
    assert torch.utils.data.DataLoader.__iter__.__module__ == "torch.utils.data.dataloader"
    assert torch.amp.GradScaler.update.__module__ == "torch.amp.grad_scaler"
    for m in models:
        for sub in m.modules():
            assert not sub._forward_pre_hooks and not sub._forward_hooks


def describe_quietly(model: nn.Module, *args: Any, **kwargs: Any) -> Architecture:
    """describe(), asserting that it emits no warning at all."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        arch = describe(model, *args, **kwargs)
    assert [str(w.message) for w in caught] == []
    return arch

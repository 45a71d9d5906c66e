"""What one training iteration launches on a GPU, counted in the FLOPs trace.

Eager PyTorch issues a small network's kernels one by one from the host, and on a fast GPU that
issue time, not the arithmetic, is the iteration (``model/roofline.py``). How many kernels the
forward and backward passes launch is read from the same meta, fake or real run that counts the
FLOPs: :class:`KernelCounter` is a dispatch mode that sees every ATen operator below autograd.
An operator counts as the kernels a CUDA build launches for it:

- none for views and bare allocations (``view``, ``transpose``, ``expand``, ``empty``...):
  metadata only, no kernel;
- :data:`OP_KERNELS` for the operators cuDNN splits (a convolution adds its bias in a second
  kernel; its backward computes data, weight and bias gradients apart);
- a dropout's mask (``bernoulli_`` and the in-place scaling of its result) none: on CUDA,
  dropout is one fused kernel (``native_dropout``) and its backward one multiply, which the
  ``mul`` by the mask stands for in both directions;
- a recurrent layer (``nn.RNN``, ``nn.LSTM``, ``nn.GRU``) runs as a handful of cuDNN calls on
  a GPU, while the trace unrolls it into operators per time step: its operators are not
  counted, and each layer and direction counts :data:`RNN_LAYER_KERNELS` instead. Its share of
  the backward pass is taken in proportion to its share of the forward pass (the backward
  cannot be told apart by module).

The count is per iteration and independent of the batch; the loss, the batch's copies and the
optimizer step, which the trace does not run, are added by the roofline.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

#: Kernels a CUDA build launches for these operators (any other operator that is not a view or
#: an allocation: one).
OP_KERNELS = {"convolution": 3, "convolution_backward": 5}
#: Operators that allocate or only describe memory: no kernel.
NO_KERNEL = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "lift_fresh",
    "lift_fresh_copy", "detach", "alias", "sym_size", "sym_stride", "sym_numel",
    "sym_storage_offset", "resize_", "set_",
})
#: Kernels of one recurrent layer and direction over a forward and backward pass on cuDNN:
#: its forward call, the backward's data and weight passes and their workspace set-up.
RNN_LAYER_KERNELS = 24


def _is_view(func: Any) -> bool:
    """Whether an operator returns an alias of an input without writing it (a view)."""
    returns = func._schema.returns
    return bool(returns) and all(
        r.alias_info is not None and not r.alias_info.is_write for r in returns)


class KernelCounter(TorchDispatchMode):
    """Counts the kernels the operators dispatched under it would launch on a GPU.

    Attributes
    ----------
    kernels : int
        Kernels counted so far (recurrent layers' operators excluded).
    recurrent_ops : int
        Operators dispatched inside a recurrent layer's forward (not counted in ``kernels``).
    """

    def __init__(self) -> None:
        super().__init__()
        self.kernels = 0
        self.recurrent_ops = 0
        self._inside_rnn = 0
        # Dropout masks (bernoulli_ results) by id, held so that no other tensor takes the id.
        self._masks: dict[int, torch.Tensor] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        if self._inside_rnn:
            self.recurrent_ops += 1
        elif name == "bernoulli_":
            self._masks[id(args[0])] = args[0]
        elif name.endswith("_") and args and id(args[0]) in self._masks:
            pass  # the mask's scaling, inside the fused dropout kernel on CUDA
        elif name not in NO_KERNEL and not _is_view(func):
            self.kernels += OP_KERNELS.get(name, 1)
        return out

    @contextmanager
    def recurrent_layers(self, model: nn.Module) -> Iterator[int]:
        """While open, operators inside ``model``'s recurrent layers are set apart; yields the
        number of recurrent layers × directions."""
        handles = []
        units = 0
        for module in model.modules():
            if isinstance(module, nn.RNNBase):
                units += module.num_layers * (2 if module.bidirectional else 1)
                handles.append(module.register_forward_pre_hook(self._enter))
                handles.append(module.register_forward_hook(self._leave))
        try:
            yield units
        finally:
            for handle in handles:
                handle.remove()

    def _enter(self, module: nn.Module, args: Any) -> None:
        self._inside_rnn += 1

    def _leave(self, module: nn.Module, args: Any, out: Any) -> None:
        self._inside_rnn -= 1


def iteration_kernels(forward_kernels: int, forward_rnn_ops: int, total_kernels: int,
                      rnn_units: int) -> int:
    """Kernels of a forward and backward pass from :class:`KernelCounter`'s figures after the
    forward (``forward_*``) and after the backward (``total_kernels``).

    The backward runs outside the recurrent layers' forward hooks, so its operators of those
    layers were counted: they are dropped in proportion to the layers' share of the forward's
    operators. Each recurrent layer and direction adds :data:`RNN_LAYER_KERNELS`.
    """
    backward = total_kernels - forward_kernels
    forward_ops = forward_kernels + forward_rnn_ops
    if forward_rnn_ops and forward_ops:
        backward = round(backward * forward_kernels / forward_ops)
    return forward_kernels + backward + RNN_LAYER_KERNELS * rnn_units

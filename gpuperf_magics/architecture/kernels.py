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
  counted, and each call counts :data:`RNN_LAYER_KERNELS` per layer and direction instead (a
  cell, :data:`RNN_CELL_KERNELS` per call). Its share of the backward pass is taken in
  proportion to its share of the forward pass (the backward cannot be told apart by module).
  cuDNN may pick an algorithm that launches per time step (a GRU on an H200 did: 445 launches
  where 68 were counted); that is not foreseen here.

What the count leaves out: the casts autocast adds (the meta trace runs without them),
attention counted as its math decomposition where CUDA runs one fused kernel, masks other than
plain dropout's, and ``torch.compile``, which fuses kernels the eager count keeps apart.

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

#: Kernels a CUDA build launches for these operators (any other ATen operator that returns a
#: tensor and is not a view or an allocation: one).
OP_KERNELS = {"convolution": 3, "convolution_backward": 5}
#: Operators that allocate, alias or only describe memory: no kernel. (``_unsafe_view`` and
#: the ``unsafe_`` splits are views whose schema does not say so.)
NO_KERNEL = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "lift_fresh",
    "lift_fresh_copy", "detach", "alias", "sym_size", "sym_stride", "sym_numel",
    "sym_storage_offset", "resize_", "set_", "_unsafe_view", "unsafe_split",
    "unsafe_split_with_sizes", "unsafe_chunk",
})
#: Kernels of one recurrent layer and direction over a forward and backward pass on cuDNN:
#: its forward call, the backward's data and weight passes and their workspace set-up.
RNN_LAYER_KERNELS = 24
#: Kernels of one call of a recurrent cell (``nn.LSTMCell``, ``nn.GRUCell``, ``nn.RNNCell``)
#: over a forward and backward pass on CUDA: its two matrix products and fused gate kernel,
#: and their gradients.
RNN_CELL_KERNELS = 8


def _launches(func: Any) -> bool:
    """Whether an ATen operator launches a kernel on CUDA: it returns a tensor that is not an
    alias of an input (``prim`` operators, views and allocations launch none)."""
    schema = func._schema
    if not schema.name.startswith("aten::") or func.overloadpacket.__name__ in NO_KERNEL:
        return False
    returns = schema.returns
    if not any("Tensor" in str(r.type) for r in returns):
        return False
    return not all(r.alias_info is not None and not r.alias_info.is_write for r in returns)


class KernelCounter(TorchDispatchMode):
    """Counts the kernels the operators dispatched under it would launch on a GPU.

    Attributes
    ----------
    kernels : int
        Kernels counted so far (operators inside recurrent layers excluded).
    recurrent_ops : int
        Operators dispatched inside a recurrent layer's or cell's forward (not counted in
        ``kernels``).
    recurrent_kernels : int
        What the recurrent layers and cells called so far launch on cuDNN, forward and
        backward (:data:`RNN_LAYER_KERNELS` per layer and direction of each call,
        :data:`RNN_CELL_KERNELS` per call of a cell).
    """

    def __init__(self) -> None:
        super().__init__()
        self.kernels = 0
        self.recurrent_ops = 0
        self.recurrent_kernels = 0
        self._inside_rnn = 0
        self._paused = False
        # Dropout masks (bernoulli_ results) by id, held so that no other tensor takes the id.
        self._masks: dict[int, torch.Tensor] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        if self._paused:
            pass
        elif self._inside_rnn:
            self.recurrent_ops += 1
        elif name == "bernoulli_":
            self._masks[id(args[0])] = args[0]
        elif name.endswith("_") and args and id(args[0]) in self._masks:
            pass  # the mask's scaling, inside the fused dropout kernel on CUDA
        elif _launches(func):
            self.kernels += OP_KERNELS.get(name, 1)
        return out

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Operators dispatched while open are not counted (the trace's own scaffolding)."""
        self._paused = True
        try:
            yield
        finally:
            self._paused = False

    @contextmanager
    def recurrent_layers(self, model: nn.Module) -> Iterator[None]:
        """While open, operators inside ``model``'s recurrent layers and cells are set apart
        and each call of one adds its cuDNN kernels to :attr:`recurrent_kernels`."""
        handles = []
        for module in model.modules():
            if isinstance(module, (nn.RNNBase, nn.RNNCellBase)):
                handles.append(module.register_forward_pre_hook(self._enter))
                try:  # also when the layer raises (a caught error must not leave it open)
                    handles.append(module.register_forward_hook(self._leave, always_call=True))
                except TypeError:  # torch without always_call
                    handles.append(module.register_forward_hook(self._leave))
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    def _enter(self, module: nn.Module, args: Any) -> None:
        if not self._inside_rnn and not self._paused:
            if isinstance(module, nn.RNNBase):
                units = module.num_layers * (2 if module.bidirectional else 1)
                self.recurrent_kernels += RNN_LAYER_KERNELS * units
            else:
                self.recurrent_kernels += RNN_CELL_KERNELS
        self._inside_rnn += 1

    def _leave(self, module: nn.Module, args: Any, out: Any) -> None:
        self._inside_rnn = max(self._inside_rnn - 1, 0)


def iteration_kernels(forward_kernels: int, forward_rnn_ops: int, total_kernels: int,
                      recurrent_kernels: int) -> int:
    """Kernels of a forward and backward pass from :class:`KernelCounter`'s figures after the
    forward (``forward_*``) and after the backward (``total_kernels``, ``recurrent_kernels``).

    The backward runs outside the recurrent layers' forward hooks, so its operators of those
    layers were counted: they are dropped in proportion to the layers' share of the forward's
    operators, and the layers' cuDNN kernels added instead.
    """
    backward = total_kernels - forward_kernels
    forward_ops = forward_kernels + forward_rnn_ops
    if forward_rnn_ops and forward_ops:
        backward = round(backward * forward_kernels / forward_ops)
    return forward_kernels + backward + recurrent_kernels

"""What :func:`~gpuperf_magics.architecture.describe` returns: :class:`Architecture`, the
``arch_*`` columns it fills (``columns.names(producer="architecture")``), the FLOP
:data:`METHODS`, and the one-line form of the errors it collects."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from gpuperf_magics.columns import names

_log = logging.getLogger(__name__)

#: Ways to count FLOPs, in the order :func:`describe` tries them by default.
METHODS: tuple[str, ...] = ("meta", "fake", "real")


@dataclasses.dataclass(frozen=True)
class Architecture:
    """What :func:`describe` found out about a model.

    Every figure is ``None`` when it could not be determined; :attr:`errors` says why.

    Attributes
    ----------
    class_name : str
        Class name of the model after unwrapping ``torch.compile`` and (Distributed)DataParallel.
    params, trainable_params : int or None
        Number of parameter elements (shared parameters once), all and ``requires_grad`` ones.
    layers_conv, layers_linear, layers_norm, layers_attention, layers_recurrent,
    layers_embedding, layers_activation, layers_pool, layers_dropout, layers_other : int or None
        Leaf modules by kind (module instances, not calls: a ReLU used twice counts once).
        ``nn.MultiheadAttention`` is one attention layer, its ``out_proj`` is not counted as
        linear; ``nn.Identity`` is not counted; any other leaf module is ``other``.
    layers_total : int or None
        Sum of the layer counts.
    module_depth : int or None
        Nesting depth of the module tree (0: the model is a single layer).
    depth : int or None
        Weighted depth: the most convolution / matrix-multiply / embedding ops on one path of the
        autograd graph (ResNet-18: 18, VGG-11: 11). Only paths that lead to trainable parameters
        (or inputs that require grad) exist in that graph.
    flops_fwd, flops_fwd_bwd : float or None
        FLOPs per sample of the forward pass, and of forward plus backward to the trainable
        parameters. ``flops_fwd_bwd`` is ``None`` when nothing can be differentiated.
    flops_method : str or None
        ``"meta"``, ``"fake"`` or ``"real"``: how the FLOPs were counted.
    kernels : int or None
        GPU kernels one forward and backward pass launches, counted in the same trace
        (:mod:`.kernels`; the loss and the optimizer step not included): what the host issues
        one by one in eager mode, the time a fast GPU cannot remove.
    param_tensors : int or None
        Trainable parameter tensors (the lists a ``foreach`` optimizer step works on).
    input_shape : str or None
        Shape of the first input tensor without its batch dimension, e.g. ``"3x32x32"``
        (``"scalar"`` for a 1-D input).
    dtype : str or None
        Dtype of the first floating-point parameter, e.g. ``"float32"``.
    amp : bool or None
        Automatic mixed precision was on (as given, or autocast enabled when describe ran).
    channels_last : bool or None
        The first 4-D input or the first 2-D convolution's weight is channels-last (either
        makes the convolutions run channels-last).
    compiled : bool
        The model was a ``torch.compile`` wrapper (or the caller said so).
    batch_size : int or None
        The batch the per-sample figures were divided by.
    errors : tuple of str
        Why a figure is missing or why a cheaper FLOP method was skipped, one line each.
    elapsed_s : float
        Seconds describe took to compute this (not counting later cache hits).
    """

    class_name: str
    params: int | None = None
    trainable_params: int | None = None
    layers_conv: int | None = None
    layers_linear: int | None = None
    layers_norm: int | None = None
    layers_attention: int | None = None
    layers_recurrent: int | None = None
    layers_embedding: int | None = None
    layers_activation: int | None = None
    layers_pool: int | None = None
    layers_dropout: int | None = None
    layers_other: int | None = None
    layers_total: int | None = None
    module_depth: int | None = None
    depth: int | None = None
    flops_fwd: float | None = None
    flops_fwd_bwd: float | None = None
    flops_method: str | None = None
    kernels: int | None = None
    param_tensors: int | None = None
    input_shape: str | None = None
    dtype: str | None = None
    amp: bool | None = None
    channels_last: bool | None = None
    compiled: bool = False
    batch_size: int | None = None
    errors: tuple[str, ...] = ()
    elapsed_s: float = dataclasses.field(default=0.0, compare=False)

    def as_features(self) -> dict[str, Any]:
        """The ``arch_*`` columns of the canonical table.

        Returns
        -------
        dict
            Exactly the keys of ``columns.names(producer="architecture")``, in that order;
            ``None`` where unknown. Each is ``arch_`` + a field name, but ``arch_class``
            (:attr:`class_name`).
        """
        return {key: self.class_name if key == "arch_class"
                else getattr(self, key.removeprefix("arch_"))
                for key in names(producer="architecture")}


def _error_line(what: str, exc: BaseException) -> str:
    # The run keeps one line; the traceback goes to the package's log for a maintainer.
    _log.debug("architecture figure %s failed", what, exc_info=exc)
    text = str(exc).strip()
    line = f"{what}: {type(exc).__name__}"
    if text:
        line += ": " + text.splitlines()[0]
    return line if len(line) <= 300 else line[:297] + "..."

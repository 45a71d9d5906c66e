"""Architecture features of a PyTorch model: size, layer counts, depth and FLOPs per sample.

:func:`describe` looks at a model once, off the timed path, and returns an
:class:`Architecture` whose :meth:`Architecture.as_features` gives the ``arch_*`` columns of the
canonical table. FLOPs come from :class:`torch.utils.flop_counter.FlopCounterMode`, which counts
matrix-multiply, convolution and attention ops (1 multiply-add = 2 FLOPs) and ignores
element-wise work such as activations and normalisation.

The FLOP count tries three ways to run the model's forward and backward pass, cheapest first:

``meta``
    parameters, buffers and inputs replaced by shape-only tensors on the ``meta`` device
    (no memory, no arithmetic; the full batch costs the same as one sample);
``fake``
    ``FakeTensorMode``: like meta, but also tolerates tensors the forward creates itself;
``real``
    a real run of a deep copy on the model's device, on the first two rows of the batch,
    with the fused mkldnn/cudnn RNN kernels and (on CPU) fused attention switched off so that
    every matrix multiply is visible to the counter.

Meta and fake fail on data-dependent code (``.item()``, boolean masks, ``nonzero``); the real
run handles those. None of the three touches the user's model: its parameters, buffers,
gradients, hooks, training/eval flags and the random number generators are as before.

The package: :mod:`.result` (:class:`Architecture`, :data:`METHODS`),
:mod:`.summary` (:func:`describe` and its cache), :mod:`.unwrap` (``torch.compile`` and
DataParallel wrappers), :mod:`.figures` (parameter and layer counts, input shape, dtype,
channels-last), :mod:`.tracing` (FLOPs via meta/fake/real runs, isolation) and
:mod:`.depth` (weighted depth of the autograd graph).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["Architecture", "clear_cache", "describe"]

# name -> module that defines it, imported on first use (PEP 562): the capture layer imports
# :mod:`.unwrap` before a profiled loop, and the FLOP counter (:mod:`.summary`, :mod:`.tracing`,
# ``torch.utils.flop_counter``) is needed only after it, once the loop has ended.
_LAZY = {
    "METHODS": "gpuperf_magics.architecture.result",
    "Architecture": "gpuperf_magics.architecture.result",
    "clear_cache": "gpuperf_magics.architecture.summary",
    "describe": "gpuperf_magics.architecture.summary",
}

if TYPE_CHECKING:  # pragma: no cover
    from gpuperf_magics.architecture.result import METHODS as METHODS  # a name, not exported
    from gpuperf_magics.architecture.result import Architecture
    from gpuperf_magics.architecture.summary import clear_cache, describe


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gpuperf_magics.architecture' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

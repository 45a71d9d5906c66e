"""The small figures of a model: parameter and layer counts, module depth, input shape, dtype
and channels-last."""

from __future__ import annotations

from typing import Any, cast

import torch
import torch.utils._pytree as pytree
from torch import nn
from torch.nn.modules import (
    activation,
    batchnorm,
    conv,
    dropout,
    instancenorm,
    normalization,
    pooling,
)

from gpuperf_magics.architecture.unwrap import is_compiled


def _public_modules(module: Any, exclude: tuple[type, ...] = ()) -> tuple[type[nn.Module], ...]:
    """The ``nn.Module`` classes a ``torch.nn.modules`` submodule exports."""
    classes = (getattr(module, name) for name in module.__all__)
    return tuple(
        c
        for c in classes
        if isinstance(c, type) and issubclass(c, nn.Module) and not issubclass(c, exclude)
    )


# Layer buckets, checked in this order with isinstance, so subclasses (LazyLinear,
# NonDynamicallyQuantizableLinear, QAT convs, user subclasses) land in their parent's bucket.
# MultiheadAttention is one attention layer; its out_proj child (a Linear subclass) is part of
# it and is not counted again as a linear layer.
_BUCKETS: tuple[tuple[str, tuple[type[nn.Module], ...]], ...] = (
    ("attention", (nn.MultiheadAttention,)),
    ("conv", _public_modules(conv)),
    ("linear", (nn.Linear, nn.Bilinear)),
    (
        "norm",
        _public_modules(batchnorm) + _public_modules(instancenorm) + _public_modules(normalization),
    ),
    ("recurrent", (nn.RNNBase, nn.RNNCellBase)),
    ("embedding", (nn.Embedding, nn.EmbeddingBag)),
    ("activation", _public_modules(activation, exclude=(nn.MultiheadAttention,))),
    ("pool", _public_modules(pooling)),
    ("dropout", _public_modules(dropout)),
)
_LAYER_KINDS: tuple[str, ...] = (*(kind for kind, _ in _BUCKETS), "other")

# Modules counted as one layer although they have children.
_UNITS: tuple[type[nn.Module], ...] = (nn.MultiheadAttention,)


def _tensor_leaves(tree: Any) -> list[torch.Tensor]:
    return [leaf for leaf in pytree.tree_leaves(tree) if isinstance(leaf, torch.Tensor)]


def _count_params(model: nn.Module) -> dict[str, int]:
    total = trainable = 0
    for p in model.parameters():  # shared (tied) parameters are yielded once
        total += p.numel()
        if p.requires_grad:
            trainable += p.numel()
    return {"params": total, "trainable_params": trainable}


def _count_layers(model: nn.Module) -> dict[str, int]:
    counts = dict.fromkeys(_LAYER_KINDS, 0)
    deepest = 0
    seen: set[int] = set()
    stack: list[tuple[nn.Module, int]] = [(model, 0)]
    while stack:  # iterative: very deep module trees must not hit the recursion limit
        module, level = stack.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        if is_compiled(module):
            # A compiled submodule is not a level of its own.
            stack.append((cast(nn.Module, module._orig_mod), level))
            continue
        deepest = max(deepest, level)
        children = [] if isinstance(module, _UNITS) else list(module.children())
        if children:
            stack.extend((child, level + 1) for child in children)
            continue
        if type(module) is nn.Identity:  # a placeholder (removed head), not a layer
            continue
        counts[_layer_kind(module)] += 1
    figures = {f"layers_{kind}": n for kind, n in counts.items()}
    figures["layers_total"] = sum(counts.values())
    figures["module_depth"] = deepest
    return figures


def _layer_kind(module: nn.Module) -> str:
    for kind, classes in _BUCKETS:
        if isinstance(module, classes):
            return kind
    return "other"


def _input_shape(first: torch.Tensor | None) -> str | None:
    if first is None or first.dim() == 0:
        return None
    per_sample = tuple(first.shape[1:])
    return "x".join(str(n) for n in per_sample) if per_sample else "scalar"


def _param_dtype(model: nn.Module) -> str | None:
    for p in model.parameters():
        if p.is_floating_point():
            return str(p.dtype).removeprefix("torch.")
    return None


def _channels_last(model: nn.Module, tensors: list[torch.Tensor]) -> bool:
    # Convolutions run channels-last when either their input or their weight is, so look at
    # the first 4-D input and the first 4-D convolution weight.
    candidates = [t for t in tensors if t.dim() == 4][:1]
    for m in model.modules():
        if isinstance(m, _CONV_2D) and m.weight.dim() == 4:
            candidates.append(m.weight)
            break
    # A tensor with 1x1 spatial size or one channel is both contiguous and channels-last.
    return any(
        t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()
        for t in candidates
    )


_CONV_2D = (nn.Conv2d, nn.ConvTranspose2d)

"""Tests for gpuperf_magics.architecture.result: the ``arch_*`` features are the agreed columns."""

from __future__ import annotations

import torch
from assertions import describe_quietly
from tiny_models import mlp_two_hidden_layers as mlp

from gpuperf_magics.columns import names

SPEC_KEYS = [
    "arch_params",
    "arch_trainable_params",
    "arch_layers_conv",
    "arch_layers_linear",
    "arch_layers_norm",
    "arch_layers_attention",
    "arch_layers_recurrent",
    "arch_layers_embedding",
    "arch_layers_activation",
    "arch_layers_pool",
    "arch_layers_dropout",
    "arch_layers_other",
    "arch_layers_total",
    "arch_module_depth",
    "arch_depth",
    "arch_flops_fwd",
    "arch_flops_fwd_bwd",
    "arch_flops_method",
    "arch_input_shape",
    "arch_dtype",
    "arch_amp",
    "arch_channels_last",
    "arch_compiled",
    "arch_class",
    "arch_kernels",
    "arch_param_tensors",
]


def test_feature_keys_are_the_agreed_columns() -> None:
    arch = describe_quietly(mlp(), (torch.randn(4, 32),))
    assert list(names(producer="architecture")) == SPEC_KEYS
    assert list(arch.as_features()) == SPEC_KEYS

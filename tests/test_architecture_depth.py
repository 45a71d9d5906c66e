"""Tests for gpuperf_magics.architecture.depth: the weighted depth of the autograd graph."""

from __future__ import annotations

import pytest
import torch
from assertions import describe_quietly
from torch import nn


def vgg11_bn() -> nn.Sequential:
    """torchvision's vgg11_bn as one flat Sequential."""
    layers: list[nn.Module] = []
    cin = 3
    for v in [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            assert isinstance(v, int)
            layers += [nn.Conv2d(cin, v, 3, padding=1), nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
            cin = v
    return nn.Sequential(
        *layers,
        nn.AdaptiveAvgPool2d(7),
        nn.Flatten(),
        nn.Linear(512 * 7 * 7, 4096),
        nn.ReLU(True),
        nn.Dropout(),
        nn.Linear(4096, 4096),
        nn.ReLU(True),
        nn.Dropout(),
        nn.Linear(4096, 1000),
    )


def test_vgg11_depth_on_a_meta_device_model() -> None:
    with torch.device("meta"):  # 133 M parameters, no memory and no init time
        model = vgg11_bn()
    arch = describe_quietly(model, (torch.empty(2, 3, 224, 224, device="meta"),))
    assert arch.params == 132_868_840
    assert arch.depth == 11
    assert arch.flops_fwd == pytest.approx(15.218e9, rel=1e-3)
    assert arch.layers_conv == 8
    assert arch.layers_linear == 3
    assert arch.module_depth == 1


def test_deep_graph_does_not_hit_the_recursion_limit() -> None:
    model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(1500)])
    arch = describe_quietly(model, (torch.randn(2, 4),))
    assert arch.depth == 1500
    assert arch.layers_linear == 1500

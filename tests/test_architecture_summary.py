"""Tests for gpuperf_magics.architecture.summary: ``describe`` end to end (counts, FLOPs and
depth together), its arguments, autocast and its cache (the test models are in
tiny_models.py)."""

from __future__ import annotations

import pytest
import torch
from assertions import describe_quietly
from tiny_models import ResNet18, small_cnn
from tiny_models import mlp_two_hidden_layers as mlp
from torch import nn

from gpuperf_magics.architecture import clear_cache, describe

torch.set_num_threads(1)


def test_mlp_exact_counts_and_flops() -> None:
    arch = describe_quietly(mlp(), (torch.randn(8, 32),))
    features = arch.as_features()
    assert features["arch_params"] == 32 * 64 + 64 + 64 * 64 + 64 + 64 * 10 + 10 == 6922
    assert features["arch_trainable_params"] == 6922
    fwd = 2 * (32 * 64 + 64 * 64 + 64 * 10)
    # Backward: weight gradients everywhere, input gradients except for the first layer.
    bwd = 2 * 2 * (64 * 64 + 64 * 10) + 2 * 32 * 64
    assert features["arch_flops_fwd"] == fwd == 13_568
    assert features["arch_flops_fwd_bwd"] == fwd + bwd == 36_608
    assert features["arch_flops_method"] == "meta"
    assert features["arch_depth"] == 3
    assert features["arch_layers_linear"] == 3
    assert features["arch_layers_activation"] == 2
    assert features["arch_layers_total"] == 5
    assert features["arch_module_depth"] == 1
    assert features["arch_input_shape"] == "32"
    assert features["arch_dtype"] == "float32"
    assert features["arch_class"] == "Sequential"
    assert features["arch_amp"] is False
    assert features["arch_channels_last"] is False
    assert features["arch_compiled"] is False
    assert arch.batch_size == 8
    assert arch.errors == ()


def test_resnet18_params_flops_depth_and_layers() -> None:
    model = ResNet18()
    arch = describe_quietly(model, (torch.randn(2, 3, 224, 224),))
    assert arch.params == 11_689_512
    assert arch.depth == 18
    assert arch.flops_method == "meta"
    assert arch.flops_fwd is not None and arch.flops_fwd_bwd is not None
    assert arch.flops_fwd == pytest.approx(3.628e9, rel=1e-3)  # 1.81 GMAC, as published
    assert arch.flops_fwd_bwd == pytest.approx(3 * arch.flops_fwd, rel=0.03)
    assert arch.layers_conv == 20
    assert arch.layers_norm == 20
    assert arch.layers_linear == 1
    assert arch.layers_activation == 9  # one ReLU instance per block, used twice, counts once
    assert arch.layers_pool == 2
    assert arch.module_depth == 4  # model > layer2 > block > downsample > conv
    assert arch.input_shape == "3x224x224"
    assert arch.channels_last is False


def test_no_inputs_needs_a_batch_size() -> None:
    class Generator(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self) -> torch.Tensor:
            return self.fc(torch.ones(5, 8, device=self.fc.weight.device))

    unknown = describe_quietly(Generator())
    assert unknown.flops_fwd is None and unknown.depth == 1 and unknown.input_shape is None
    assert any("batch size unknown" in e for e in unknown.errors)
    known = describe_quietly(Generator(), batch_size=5)
    assert known.flops_fwd == 2 * 8 * 8


def test_amp_and_dtype() -> None:
    model = mlp().to(torch.bfloat16)
    x = torch.randn(4, 32, dtype=torch.bfloat16)
    assert describe_quietly(model, (x,)).dtype == "bfloat16"
    assert describe_quietly(model, (x,), amp=True).amp is True
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert describe_quietly(mlp(), (torch.randn(4, 32),)).amp is True


def test_result_is_cached_per_model_and_input_shape() -> None:
    clear_cache()
    model = small_cnn()
    first = describe_quietly(model, (torch.randn(4, 3, 16, 16),))
    again = describe_quietly(model, (torch.randn(4, 3, 16, 16),))
    assert again is first
    assert describe_quietly(model, (torch.randn(2, 3, 16, 16),)) is not first
    model[-1] = nn.Linear(16, 3)  # a new head: a new answer
    changed = describe_quietly(model, (torch.randn(4, 3, 16, 16),))
    assert changed is not first
    assert changed.params == first.params - 16 * 7 - 7
    clear_cache()
    assert describe_quietly(model, (torch.randn(4, 3, 16, 16),)) is not changed


def test_bad_arguments_raise_clear_errors() -> None:
    with pytest.raises(TypeError, match=r"torch\.nn\.Module"):
        describe(lambda x: x)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown FLOP method"):
        describe(mlp(), methods=("exact",))
    with pytest.raises(ValueError, match="positive"):
        describe(mlp(), batch_size=0)


def test_autocast_is_seen_on_torch_without_the_device_argument(monkeypatch) -> None:
    from gpuperf_magics.architecture import summary

    def old_is_autocast_enabled(*args: object) -> bool:  # torch < 2.4
        if args:
            raise TypeError("is_autocast_enabled() takes 0 positional arguments")
        return False

    monkeypatch.setattr(torch, "is_autocast_enabled", old_is_autocast_enabled)
    monkeypatch.setattr(torch, "is_autocast_cpu_enabled", lambda: True, raising=False)
    assert summary._autocast_enabled() is True

"""Tests for gpuperf_magics.architecture: counts, FLOPs, weighted depth, isolation, caching."""

from __future__ import annotations

import dataclasses
import random
import warnings
from typing import Any

import pytest
import torch
from torch import nn

from gpuperf_magics.architecture import Architecture, clear_cache, describe
from gpuperf_magics.columns import names

torch.set_num_threads(1)

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
]


def describe_quietly(model: nn.Module, *args: Any, **kwargs: Any) -> Architecture:
    """describe(), asserting that it emits no warning at all."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        arch = describe(model, *args, **kwargs)
    assert [str(w.message) for w in caught] == []
    return arch


# --- test models, plain torch.nn -------------------------------------------------------------


def mlp() -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)
    )


def small_cnn() -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    )


# Forward FLOPs per sample of small_cnn on 3x16x16: two convolutions and the classifier.
SMALL_CNN_FWD = 2 * 3 * 9 * 8 * 16 * 16 + 2 * 8 * 9 * 16 * 8 * 8 + 2 * 16 * 10


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class ResNet18(nn.Module):
    """torchvision's resnet18, rebuilt with plain torch.nn."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        widths = [64, 128, 256, 512]
        cin = 64
        for i, width in enumerate(widths):
            stride = 1 if i == 0 else 2
            layer = nn.Sequential(BasicBlock(cin, width, stride), BasicBlock(width, width, 1))
            setattr(self, f"layer{i + 1}", layer)
            cin = width
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


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


class ItemModel(nn.Module):
    """Data-dependent control flow: meta and fake tracing cannot follow it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.abs().max().item() > 1e6:
            x = x / 1e6
        return self.fc(x)


class MaskModel(nn.Module):
    """A data-dependent output shape (boolean mask)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kept = x[x.sum(dim=1) > -1e9]
        return self.fc(kept)


class LstmTagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)
        self.head = nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out)


@dataclasses.dataclass
class Output:
    logits: torch.Tensor
    loss: torch.Tensor | None = None


class HfStyle(nn.Module):
    """Called with keyword arguments, returns an object with .logits/.loss (HF style)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        self.head = nn.Linear(16, 100)
        self.extra = nn.Linear(16, 16)  # output not used by the loss

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None) -> Output:
        logits = self.head(self.embed(input_ids))
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
        return Output(logits=logits, loss=loss)


# --- tests -----------------------------------------------------------------------------------


def test_feature_keys_are_the_agreed_columns() -> None:
    arch = describe_quietly(mlp(), (torch.randn(4, 32),))
    assert list(names(producer="architecture")) == SPEC_KEYS
    assert list(arch.as_features()) == SPEC_KEYS


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


def test_single_linear_layer() -> None:
    arch = describe_quietly(nn.Linear(32, 64), torch.randn(5, 32))  # a bare tensor is args
    assert arch.flops_fwd == 2 * 32 * 64
    assert arch.layers_linear == 1
    assert arch.module_depth == 0


def test_small_cnn_per_sample_figures_do_not_depend_on_batch_or_method() -> None:
    model = small_cnn()
    results = [
        describe_quietly(model, (torch.randn(batch, 3, 16, 16),), methods=(method,))
        for batch in (1, 8)
        for method in ("meta", "fake", "real")
    ]
    assert {r.flops_method for r in results} == {"meta", "fake", "real"}
    for r in results:
        assert r.flops_fwd == SMALL_CNN_FWD, r
        assert r.flops_fwd_bwd == results[0].flops_fwd_bwd
        assert r.depth == 3
        assert r.input_shape == "3x16x16"
    first = results[0]
    assert first.flops_fwd_bwd is not None and first.flops_fwd_bwd > 2 * SMALL_CNN_FWD
    assert (first.layers_conv, first.layers_norm, first.layers_linear) == (2, 1, 1)
    assert (first.layers_activation, first.layers_pool, first.layers_dropout) == (2, 2, 1)
    assert first.layers_other == 1  # Flatten
    assert first.layers_total == 10


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


def test_resnet18_channels_last() -> None:
    model = ResNet18(num_classes=10).to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 32, 32).to(memory_format=torch.channels_last)
    assert describe_quietly(model, (x,)).channels_last is True
    # Channels-last weights make the convolutions run channels-last whatever the input.
    assert describe_quietly(model, (torch.randn(2, 3, 32, 32),)).channels_last is True
    assert describe_quietly(ResNet18(10), (x,)).channels_last is True


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


def test_transformer_encoder_called_with_kwargs() -> None:
    layer = nn.TransformerEncoderLayer(128, 4, 256, batch_first=True)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    src = torch.randn(4, 64, 128)
    arch = describe_quietly(model, (), {"src": src})
    seq, d, ff = 64, 128, 256
    per_layer = (
        2 * seq * d * 3 * d  # in_proj
        + 2 * 2 * seq * seq * d  # QK^T and AV
        + 2 * seq * d * d  # out_proj
        + 2 * 2 * seq * d * ff  # feed-forward
    )
    assert arch.flops_fwd == 2 * per_layer
    assert arch.flops_method == "meta"
    assert arch.input_shape == "64x128"
    assert arch.batch_size == 4
    assert arch.layers_attention == 2
    assert arch.layers_linear == 4  # linear1/linear2; out_proj belongs to the attention layer
    assert arch.layers_norm == 4
    assert arch.layers_dropout == 6
    # Per layer: in_proj, QK^T, AV, out_proj, linear1, linear2.
    assert arch.depth == 2 * 6
    real = describe_quietly(model, (), {"src": src}, methods=("real",))
    assert (real.flops_fwd, real.flops_fwd_bwd, real.depth) == (
        arch.flops_fwd,
        arch.flops_fwd_bwd,
        arch.depth,
    )


def test_lstm_flops_visible_on_meta_and_real() -> None:
    model = LstmTagger()
    x = torch.randn(4, 10, 16)
    arch = describe_quietly(model, (x,))
    gates = 4 * 32
    per_step = 2 * gates * (16 + 32) + 2 * gates * (32 + 32)
    assert arch.flops_fwd == 10 * per_step + 10 * 2 * 32 * 5
    assert arch.layers_recurrent == 1
    assert arch.layers_linear == 1
    assert arch.depth == 10 * 2 + 1  # one gate matmul per step and layer, then the head
    real = describe_quietly(model, (x,), methods=("real",))
    assert real.flops_fwd == arch.flops_fwd
    assert real.flops_fwd_bwd == arch.flops_fwd_bwd
    assert real.depth == arch.depth
    assert torch.backends.mkldnn.enabled  # switched off only during the real run


def test_compiled_model_is_unwrapped_without_compiling() -> None:
    model = mlp()
    compiled = torch.compile(model, backend="eager")
    from torch._dynamo.utils import counters

    graphs = counters["stats"]["unique_graphs"]
    arch = describe_quietly(compiled, (torch.randn(4, 32),))
    assert counters["stats"]["unique_graphs"] == graphs
    assert arch.compiled is True
    assert arch.class_name == "Sequential"
    assert arch.params == 6922
    assert arch.flops_fwd == 13_568
    assert describe_quietly(model, (torch.randn(4, 32),)).compiled is False
    assert describe_quietly(model, (torch.randn(4, 32),), compiled=True).compiled is True


def test_compiled_submodule_runs_eagerly() -> None:
    model = nn.Sequential(torch.compile(mlp(), backend="eager"), nn.ReLU())
    from torch._dynamo.utils import counters

    graphs = counters["stats"]["unique_graphs"]
    arch = describe_quietly(model, (torch.randn(4, 32),))
    assert counters["stats"]["unique_graphs"] == graphs
    assert arch.flops_fwd == 13_568
    assert arch.flops_method == "meta"
    assert arch.layers_linear == 3 and arch.layers_activation == 3
    assert arch.module_depth == 2  # the compile wrapper is not a level of its own


def test_distributed_job_never_runs_the_forward_for_real(monkeypatch: pytest.MonkeyPatch) -> None:
    # Stand-in for a multi-process job: a real run could block in a collective.
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda group=None: 4)
    arch = describe_quietly(ItemModel(), (torch.randn(6, 8),))
    assert arch.flops_method is None
    assert sum("distributed" in e for e in arch.errors) == 2
    assert describe_quietly(mlp(), (torch.randn(4, 32),)).flops_method == "meta"


def test_data_parallel_is_unwrapped() -> None:
    inner = small_cnn()
    arch = describe_quietly(nn.DataParallel(inner), (torch.randn(2, 3, 16, 16),))
    assert arch.class_name == "Sequential"
    assert arch.params == sum(p.numel() for p in inner.parameters())
    assert arch.flops_fwd == SMALL_CNN_FWD


@pytest.mark.parametrize("model_cls", [ItemModel, MaskModel])
def test_data_dependent_forward_falls_back_to_a_real_run(model_cls: type[nn.Module]) -> None:
    model = model_cls()
    arch = describe_quietly(model, (torch.randn(6, 8),))
    assert arch.flops_method == "real"
    assert arch.flops_fwd == 2 * 8 * 4
    assert arch.flops_fwd_bwd == 2 * 2 * 8 * 4
    assert arch.depth == 1
    assert [e.split(":")[0] for e in arch.errors] == ["flops[meta]", "flops[fake]"]


def test_data_dependent_forward_without_real_fallback() -> None:
    arch = describe_quietly(ItemModel(), (torch.randn(6, 8),), methods="meta")
    assert arch.flops_method is None
    assert arch.flops_fwd is None and arch.flops_fwd_bwd is None and arch.depth is None
    assert arch.params == 36
    assert "item()" in arch.errors[0]


def snapshot(model: nn.Module) -> dict[str, Any]:
    return {
        "state": {k: v.clone() for k, v in model.state_dict().items()},
        "grads": {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None},
        "modes": [m.training for m in model.modules()],
        "rng": torch.get_rng_state(),
        "py_rng": random.getstate(),
        "hooks": [
            (len(m._forward_hooks), len(m._forward_pre_hooks), len(m._backward_hooks))
            for m in model.modules()
        ],
        "global_hooks": (
            len(nn.modules.module._global_forward_hooks),
            len(nn.modules.module._global_forward_pre_hooks),
            len(nn.modules.module._global_backward_hooks),
        ),
    }


def assert_same(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert before["state"].keys() == after["state"].keys()
    for k in before["state"]:
        assert torch.equal(before["state"][k], after["state"][k]), k
    assert before["grads"].keys() == after["grads"].keys()
    for k in before["grads"]:
        assert torch.equal(before["grads"][k], after["grads"][k]), k
    assert before["modes"] == after["modes"]
    assert torch.equal(before["rng"], after["rng"])
    assert before["py_rng"] == after["py_rng"]
    assert before["hooks"] == after["hooks"]
    assert before["global_hooks"] == after["global_hooks"] == (0, 0, 0)


@pytest.mark.parametrize("methods", [("meta",), ("fake",), ("real",)])
def test_model_is_left_untouched(methods: tuple[str, ...]) -> None:
    model = small_cnn()
    x = torch.randn(4, 3, 16, 16)
    model(x).sum().backward()  # real gradients and BatchNorm statistics to protect
    model[6].eval()  # a mixed train/eval tree
    before = snapshot(model)
    arch = describe_quietly(model, (x,), methods=methods)
    assert arch.flops_method == methods[0]
    assert_same(before, snapshot(model))


def test_model_in_eval_mode_under_no_grad() -> None:
    model = small_cnn().eval()
    with torch.no_grad():
        arch = describe_quietly(model, (torch.randn(2, 3, 16, 16),))
    assert arch.flops_fwd == SMALL_CNN_FWD
    assert arch.flops_fwd_bwd is not None
    assert not model.training


@pytest.mark.parametrize("method", ["meta", "fake", "real"])
def test_called_in_inference_mode(method: str) -> None:
    model = small_cnn()
    with torch.inference_mode():
        x = torch.randn(2, 3, 16, 16)
        arch = describe_quietly(model, (x,), methods=(method,))
    assert arch.flops_method == method
    assert arch.flops_fwd == SMALL_CNN_FWD
    assert arch.flops_fwd_bwd is not None


def test_frozen_model_has_no_backward_figures() -> None:
    model = mlp().requires_grad_(False)
    arch = describe_quietly(model, (torch.randn(4, 32),))
    assert arch.trainable_params == 0
    assert arch.flops_fwd == 13_568
    assert arch.flops_fwd_bwd is None
    assert arch.depth is None
    assert any(e.startswith("flops_fwd_bwd") for e in arch.errors)


def test_integer_output_has_no_backward_figures() -> None:
    class Classify(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x).argmax(dim=1)

    arch = describe_quietly(Classify(), (torch.randn(4, 8),))
    assert arch.flops_fwd == 2 * 8 * 3
    assert arch.flops_fwd_bwd is None


def test_output_object_with_loss_and_logits() -> None:
    model = HfStyle()
    ids = torch.randint(0, 100, (4, 12))
    with_loss = describe_quietly(model, (), {"input_ids": ids, "labels": ids})
    logits_only = describe_quietly(model, (), {"input_ids": ids})
    assert with_loss.flops_fwd == logits_only.flops_fwd == 12 * 2 * 16 * 100
    assert with_loss.flops_fwd_bwd == logits_only.flops_fwd_bwd
    assert with_loss.layers_embedding == 1
    assert with_loss.depth == 2  # embedding, then head
    assert with_loss.input_shape == "12"


def test_tuple_and_dict_outputs_are_summed() -> None:
    class TwoHeads(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(8, 2)
            self.b = nn.Linear(8, 3)

        def forward(self, xs: list[torch.Tensor]) -> dict[str, Any]:
            return {"a": self.a(xs[0]), "rest": (self.b(xs[0]), 7)}

    arch = describe_quietly(TwoHeads(), ([torch.randn(4, 8)],))  # a list as the argument
    assert arch.flops_fwd == 2 * 8 * 5
    assert arch.flops_fwd_bwd == 2 * 8 * 5 * 2
    assert arch.input_shape == "8"


def test_forward_that_always_fails_keeps_the_static_figures() -> None:
    class Broken(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("broken on purpose")

    arch = describe_quietly(Broken(), (torch.randn(4, 8),))
    assert arch.params == 27
    assert arch.flops_fwd is None and arch.flops_method is None
    assert len(arch.errors) == 3
    assert all("broken on purpose" in e for e in arch.errors)


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


def test_out_proj_is_counted_once_as_part_of_attention() -> None:
    arch = describe_quietly(nn.MultiheadAttention(16, 2), (torch.randn(5, 3, 16),) * 3)
    assert arch.layers_attention == 1
    assert arch.layers_linear == 0
    assert arch.layers_total == 1
    assert arch.depth is not None and arch.depth >= 3


def test_layer_buckets() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Lazy modules are a new feature" at construction
        lazy = nn.LazyLinear(4)
    model = nn.Sequential(
        nn.ConvTranspose2d(3, 3, 2),
        lazy,
        nn.GroupNorm(1, 3),
        nn.RMSNorm(4),
        nn.GRUCell(4, 4),
        nn.EmbeddingBag(10, 4),
        nn.GELU(),
        nn.AvgPool1d(2),
        nn.AlphaDropout(),
        nn.Identity(),
        nn.Unflatten(1, (2, 2)),
    )
    arch = describe_quietly(model)  # not callable as a whole: only the static figures
    assert (arch.layers_conv, arch.layers_linear, arch.layers_norm) == (1, 1, 2)
    assert (arch.layers_recurrent, arch.layers_embedding, arch.layers_activation) == (1, 1, 1)
    assert (arch.layers_pool, arch.layers_dropout, arch.layers_other) == (1, 1, 1)
    assert arch.layers_total == 10  # Identity is not a layer
    assert arch.params is None  # LazyLinear not materialised yet
    assert any(e.startswith("params") for e in arch.errors)


def test_bad_arguments_raise_clear_errors() -> None:
    with pytest.raises(TypeError, match=r"torch\.nn\.Module"):
        describe(lambda x: x)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown FLOP method"):
        describe(mlp(), methods=("exact",))
    with pytest.raises(ValueError, match="positive"):
        describe(mlp(), batch_size=0)


def test_deep_graph_does_not_hit_the_recursion_limit() -> None:
    model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(1500)])
    arch = describe_quietly(model, (torch.randn(2, 4),))
    assert arch.depth == 1500
    assert arch.layers_linear == 1500


def test_tensor_created_in_forward_falls_back_to_fake() -> None:
    class AddRange(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x) + torch.arange(8)  # a CPU tensor next to meta ones

    arch = describe_quietly(AddRange(), (torch.randn(4, 8),))
    assert arch.flops_method == "fake"
    assert arch.flops_fwd == 2 * 8 * 8
    assert arch.errors[0].startswith("flops[meta]: RuntimeError")


class CausalSelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(32, 96)
        self.out = nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        q, k, v = self.qkv(x).view(batch, seq, 3, 4, 8).permute(2, 0, 3, 1, 4)
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(batch, seq, width))


def test_fused_attention_counted_alike_by_every_method() -> None:
    x = torch.randn(2, 16, 32)
    results = [
        describe_quietly(CausalSelfAttention(), (x,), methods=(m,))
        for m in ("meta", "fake", "real")
    ]
    seq = 16
    attention = 2 * 2 * 4 * seq * seq * 8  # QK^T and AV for 4 heads of width 8
    expected = 2 * seq * 32 * 96 + attention + 2 * seq * 32 * 32
    for r in results:
        assert r.flops_fwd == expected, r.flops_method
        assert r.flops_fwd_bwd == results[0].flops_fwd_bwd
        assert r.depth == 4  # qkv, QK^T, AV, out: the fused kernel counts as two matmuls


def test_tied_weights_count_once() -> None:
    class TiedLm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(100, 16)
            self.head = nn.Linear(16, 100, bias=False)
            self.head.weight = self.embed.weight

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.head(self.embed(ids))

    for method in ("meta", "fake", "real"):
        arch = describe_quietly(TiedLm(), (torch.randint(0, 100, (2, 6)),), methods=method)
        assert arch.params == 100 * 16
        assert arch.flops_fwd == 6 * 2 * 16 * 100, method
        assert arch.depth == 2


def test_older_torch_without_set_stance_or_sdpa_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch 2.1-2.5: no torch.compiler.set_stance, no torch.nn.attention.sdpa_kernel (< 2.3)."""
    import contextlib

    import torch.nn.attention

    monkeypatch.delattr(torch.compiler, "set_stance")
    model = nn.Sequential(torch.compile(mlp(), backend="eager"), nn.ReLU())
    assert describe_quietly(model, (torch.randn(4, 32),)).flops_fwd == 13_568
    # Torch 2.13's old switch is built on the new one, so the old switch is faked here.
    calls = []

    @contextlib.contextmanager
    def sdp_kernel(**flags: bool):
        calls.append(flags)
        yield

    monkeypatch.delattr(torch.nn.attention, "sdpa_kernel")  # "cannot import name"
    monkeypatch.setattr(torch.backends.cuda, "sdp_kernel", sdp_kernel)
    real = describe_quietly(CausalSelfAttention(), (torch.randn(2, 16, 32),), methods=("real",))
    assert real.flops_fwd is not None
    assert calls and calls[0] == {"enable_flash": False, "enable_math": True,
                                  "enable_mem_efficient": False}


def test_autocast_is_seen_on_torch_without_the_device_argument(monkeypatch) -> None:
    from gpuperf_magics.architecture import summary

    def old_is_autocast_enabled(*args: object) -> bool:  # torch < 2.4
        if args:
            raise TypeError("is_autocast_enabled() takes 0 positional arguments")
        return False

    monkeypatch.setattr(torch, "is_autocast_enabled", old_is_autocast_enabled)
    monkeypatch.setattr(torch, "is_autocast_cpu_enabled", lambda: True, raising=False)
    assert summary._autocast_enabled() is True


# ------------------------------------------------------------------------------ unwrap
def test_unwrap_peels_compile_and_data_parallel_wrappers() -> None:
    from gpuperf_magics.architecture.unwrap import Unwrapped, unwrap

    inner = mlp()
    assert unwrap(inner) == Unwrapped(inner, False)
    assert unwrap(nn.DataParallel(inner)) == (inner, False)
    compiled = torch.compile(inner, backend="eager")
    module, was_compiled = unwrap(nn.DataParallel(compiled))
    assert module is inner and was_compiled
    assert unwrap(compiled).module is inner


def test_unwrap_stops_on_a_wrapper_that_wraps_itself() -> None:
    from gpuperf_magics.architecture.unwrap import MAX_DEPTH, unwrap

    class Loop(nn.Module):
        pass

    loop = Loop()
    loop._orig_mod = loop  # a compile-like wrapper around itself
    assert unwrap(loop) == (loop, True)
    chain: nn.Module = mlp()
    for _ in range(MAX_DEPTH + 3):
        chain = nn.DataParallel(chain)
    assert isinstance(unwrap(chain).module, nn.DataParallel)  # gave up, did not hang


def test_unwrap_does_not_import_dynamo() -> None:
    import subprocess
    import sys

    code = ("import sys; from torch import nn\n"
            "from gpuperf_magics.architecture.unwrap import unwrap\n"
            "unwrap(nn.DataParallel(nn.Linear(2, 2)))\n"
            "assert 'torch._dynamo' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)

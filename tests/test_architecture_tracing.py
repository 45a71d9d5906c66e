"""Tests for gpuperf_magics.architecture.tracing: FLOPs by meta, fake and real runs, the
fallbacks between them, and the user's model left untouched."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
import torch
from assertions import describe_quietly
from tiny_models import SMALL_CNN_FWD, small_cnn
from tiny_models import mlp_two_hidden_layers as mlp
from torch import nn


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

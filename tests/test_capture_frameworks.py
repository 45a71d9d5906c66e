"""Framework training loops, unchanged: Lightning ``Trainer.fit``, Hugging Face
``Trainer.train()`` and an ``accelerate`` loop, with gradient accumulation and bf16 autocast on
the CPU. Tiny models (built from configs, nothing downloaded); iterations, batch sizes and
FLOPs are checked against counts written out here, not against the project's own counter.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gpuperf_magics as gm

pytestmark = pytest.mark.timeout(120)

# A Linear(8, 16) -> ReLU -> Linear(16, 4) network: one multiply-add is 2 FLOPs.
MLP_FWD = 2 * (8 * 16 + 16 * 4)
# Backward: weight gradients for both layers, an input gradient only for the second (the data
# needs none): 2x the forward of the second layer, 1x the first.
MLP_FWD_BWD = MLP_FWD + 2 * (2 * 16 * 4) + 2 * 8 * 16


def tiny_mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def classification_data(samples: int) -> torch.utils.data.TensorDataset:
    g = torch.Generator().manual_seed(0)
    return torch.utils.data.TensorDataset(torch.randn(samples, 8, generator=g),
                                          torch.randint(0, 4, (samples,), generator=g))


@pytest.mark.parametrize(("accumulate", "precision", "steps", "batch"), [
    (1, "32-true", 16, 4),      # 64 samples, batch 4, 1 epoch: 16 steps
    (2, "bf16-mixed", 16, 8),   # 2 epochs of 16 micro-batches of 4, two per step
])
def test_lightning_trainer_fit(tmp_path, accumulate, precision, steps, batch):
    L = pytest.importorskip("lightning")

    class Classifier(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = tiny_mlp()

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return nn.functional.cross_entropy(self(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    loader = torch.utils.data.DataLoader(classification_data(64), batch_size=4)
    trainer = L.Trainer(
        max_epochs=accumulate, accelerator="cpu", devices=1, precision=precision,
        accumulate_grad_batches=accumulate, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path,
    )
    model = Classifier()
    with gm.profile_training(store=tmp_path / "runs.sqlite") as run:
        trainer.fit(model, loader)
    assert run.status == "ok" and run.run_id is not None
    assert len(run.iterations) == steps
    assert run.batch_size == batch
    assert run.hyper["micro_batches"] == accumulate and run.hyper["micro_batch_size"] == 4
    assert run.hyper["optimizer"] == "SGD"
    assert run.network == "Classifier-212"
    assert run.architecture["arch_params"] == 8 * 16 + 16 + 16 * 4 + 4
    assert run.architecture["arch_flops_fwd"] == MLP_FWD
    assert run.architecture["arch_flops_fwd_bwd"] == MLP_FWD_BWD
    assert run.architecture["arch_amp"] is (precision == "bf16-mixed")


# A one-layer BERT: sequence L, hidden H, 2 heads, feed-forward I, C classes, vocabulary V.
L_SEQ, H, I_FF, C, V = 8, 16, 32, 3, 50
BERT_FWD = (
    4 * 2 * L_SEQ * H * H        # query, key, value and output projections
    + 2 * 2 * L_SEQ * L_SEQ * H  # scores (Q K^T) and their weighted sum of V, over all heads
    + 2 * 2 * L_SEQ * H * I_FF   # feed-forward up and down
    + 2 * H * H                  # pooler (first token)
    + 2 * H * C                  # classifier
)
# Every matrix product's input needs a gradient (embeddings are trained): backward = 2x.
BERT_FWD_BWD = 3 * BERT_FWD


class TokenData(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 40

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(i)
        return {"input_ids": torch.randint(0, V, (L_SEQ,), generator=g),
                "labels": torch.tensor(i % C)}


@pytest.mark.parametrize(("accumulate", "bf16"), [(1, False), (2, True)])
def test_hugging_face_trainer_train(tmp_path, fresh_accelerate_state, accumulate, bf16):
    transformers = pytest.importorskip("transformers")

    config = transformers.BertConfig(
        vocab_size=V, hidden_size=H, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=I_FF, max_position_embeddings=L_SEQ, num_labels=C,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=4, max_steps=10,
        gradient_accumulation_steps=accumulate, bf16=bf16, use_cpu=True, report_to="none",
        save_strategy="no", logging_strategy="no", disable_tqdm=True,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=TokenData())
    with gm.profile_training(store=tmp_path / "runs.sqlite") as run:
        trainer.train()
    assert run.status == "ok" and run.run_id is not None
    assert len(run.iterations) == 10
    assert run.batch_size == 4 * accumulate
    assert run.hyper["micro_batches"] == accumulate
    assert run.hyper["optimizer"] == "AdamW"
    assert run.network.startswith("BertForSequenceClassification-")
    assert run.architecture["arch_params"] == sum(p.numel() for p in model.parameters())
    assert run.architecture["arch_flops_fwd"] == BERT_FWD
    assert run.architecture["arch_flops_fwd_bwd"] == BERT_FWD_BWD
    # accelerate enters autocast inside the model's forward: still seen.
    assert run.architecture["arch_amp"] is bf16


def test_accelerate_loop_with_accumulation_and_bf16(tmp_path, fresh_accelerate_state):
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True, mixed_precision="bf16", gradient_accumulation_steps=2)
    model = tiny_mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(classification_data(48), batch_size=4)
    model, opt, loader = accelerator.prepare(model, opt, loader)
    with gm.profile_training(store=tmp_path / "runs.sqlite") as run:
        for x, y in loader:
            with accelerator.accumulate(model):
                loss = nn.functional.cross_entropy(model(x), y)
                accelerator.backward(loss)
                opt.step()  # accelerate skips the inner step between accumulation ends
                opt.zero_grad()
    assert run.status == "ok" and run.run_id is not None
    assert len(run.iterations) == 48 // 4 // 2
    assert run.batch_size == 8 and run.hyper["micro_batches"] == 2
    assert run.hyper["dataset_size"] == 48 and run.hyper["iterations_per_epoch"] == 6
    assert run.architecture["arch_flops_fwd"] == MLP_FWD
    assert run.architecture["arch_flops_fwd_bwd"] == MLP_FWD_BWD
    assert run.architecture["arch_amp"] is True

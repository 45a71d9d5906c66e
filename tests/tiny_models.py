"""Small torch networks and a training loop that the capture and architecture tests share.

Two MLPs live here because the tests rely on two different ones: the capture tests on
:func:`mlp_one_hidden_layer` (seeded; its runs are named ``Sequential-2.76K``), the
architecture tests on :func:`mlp_two_hidden_layers` (exact counts: 6922 parameters).
"""

from __future__ import annotations

import torch
from torch import nn


# ---------------------------------------------------------------- the capture tests' models
def mlp_one_hidden_layer() -> nn.Module:
    """A seeded 32-64-10 MLP (2.76K parameters): the capture tests' ``mlp``."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))


class KwargsModel(nn.Module):
    """A linear model that takes its batch only as the keyword ``inputs``."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(32, 10)

    def forward(self, *, inputs: torch.Tensor) -> torch.Tensor:
        return self.lin(inputs)


def train(model, opt, steps=12, batch=16, shape=(32,), loss_fn=None, keyword=None):
    """``steps`` SGD steps on random data; ``keyword`` passes the batch as ``model(**{k: x})``."""
    loss_fn = loss_fn or nn.CrossEntropyLoss()
    for _ in range(steps):
        x = torch.randn(batch, *shape)
        y = torch.randint(0, 10, (batch,))
        opt.zero_grad()
        out = model(**{keyword: x}) if keyword else model(x)
        loss_fn(out, y).backward()
        opt.step()


# ---------------------------------------------------------------- the architecture tests' models
def mlp_two_hidden_layers() -> nn.Sequential:
    """An unseeded 32-64-64-10 MLP (6922 parameters): the architecture tests' ``mlp``."""
    return nn.Sequential(
        nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)
    )


def small_cnn() -> nn.Sequential:
    """A sequential CNN for 3x16x16 inputs whose forward FLOPs are :data:`SMALL_CNN_FWD`."""
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


#: Forward FLOPs per sample of small_cnn on 3x16x16: two convolutions and the classifier.
SMALL_CNN_FWD = 2 * 3 * 9 * 8 * 16 * 16 + 2 * 8 * 9 * 16 * 8 * 8 + 2 * 16 * 10


class BasicBlock(nn.Module):
    """ResNet's basic residual block (two 3x3 convolutions), as in torchvision."""

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

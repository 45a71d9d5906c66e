"""What a run says about its model and machine: default names, TF32 flags under both of torch's
precision APIs."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gpuperf_magics as gm


def test_default_names_tell_models_of_one_class_apart():
    from gpuperf_magics.capture.context import default_name

    small = nn.Sequential(nn.Linear(8, 4))
    big = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 10))
    names = []
    for model in (small, big):
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        with gm.profile_training(save=False) as run:
            for _ in range(3):
                opt.zero_grad()
                model(torch.randn(4, model[0].in_features)).sum().backward()
                opt.step()
        names.append(run.network)
    assert names == ["Sequential-36", "Sequential-1.07M"]
    assert default_name("ResNet", 25_557_032) == "ResNet-25.6M"
    assert default_name("Big", 1_500_000_000) == "Big-1.5B"
    assert default_name("Unknown", None) == "Unknown"


def test_tf32_flags_under_the_newer_precision_api(monkeypatch):
    from gpuperf_magics.capture import context

    class Refusing:
        fp32_precision = "tf32"

        @property
        def allow_tf32(self) -> bool:
            raise RuntimeError("mix of the legacy and new APIs")

    class Inherit:
        fp32_precision = "none"

    assert context._tf32_allowed(lambda: Refusing().allow_tf32, [Refusing()]) is True
    assert context._tf32_allowed(lambda: Refusing().allow_tf32, [Inherit(), Refusing()]) is True
    assert context._tf32_allowed(lambda: Refusing().allow_tf32, [Inherit()]) is None
    assert context._tf32_allowed(lambda: False, [Refusing()]) is False  # legacy read wins


def test_default_names_never_print_exponents():
    from gpuperf_magics.capture.context import default_name

    assert default_name("Net", 999_600) == "Net-1M"
    assert default_name("Net", 999_600_000) == "Net-1B"
    assert default_name("Net", 999_499) == "Net-999K"
    assert default_name("Net", 999) == "Net-999"


def test_a_run_under_torchs_newer_tf32_api_is_saved(tmp_path):
    """torch >= 2.9: once fp32_precision is set, reading allow_tf32 raises (own process)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import torch
        from torch import nn
        import gpuperf_magics as gm

        torch.backends.fp32_precision = "tf32"
        model = nn.Sequential(nn.Linear(8, 4))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        with gm.profile_training(name="m", store={str(tmp_path / 'r.sqlite')!r}) as run:
            for _ in range(3):
                opt.zero_grad()
                model(torch.randn(4, 8)).sum().backward()
                opt.step()
        print(run.run_id, run.architecture["arch_tf32_matmul"])
    """)
    if not hasattr(torch.backends, "fp32_precision"):
        pytest.skip("this torch has no fp32_precision API")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1", "True"]


def test_the_live_line_and_the_saved_run_name_a_wrapped_model_alike():
    from gpuperf_magics.capture.context import model_name

    model = nn.Sequential(nn.Linear(8, 4))
    session = gm.profile_training(save=False)
    with session as run:
        wrapped = nn.DataParallel(model)
        opt = torch.optim.SGD(wrapped.parameters(), lr=0.01)
        for _ in range(3):
            wrapped(torch.randn(2, 8)).sum().backward()
            opt.step()
            opt.zero_grad()
        seen = session.configuration()
    assert seen is not None and seen[0] == run.network == model_name(wrapped) == "Sequential-36"

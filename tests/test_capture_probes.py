"""What torch says, on older torch too: global forward hooks without keyword inputs."""

from __future__ import annotations

import torch
from tiny_models import KwargsModel, train
from tiny_models import mlp_one_hidden_layer as mlp

import gpuperf_magics as gm


def test_older_torch_global_hooks_without_kwargs(monkeypatch):
    """Before torch 2.6 global forward hooks take no with_kwargs: discovery still works."""
    from torch.nn.modules import module as module_mod

    real = module_mod.register_module_forward_hook

    def register(hook, *, always_call=False):  # the torch 2.1-2.5 signature
        return real(hook, always_call=always_call)

    monkeypatch.setattr(module_mod, "register_module_forward_hook", register)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    import contextlib

    with gm.profile_training(save=False) as run:
        with contextlib.suppress(RuntimeError):
            model(torch.randn(4, 7))  # a forward that raises: the hook gets no output
        train(model, opt, steps=6)
    assert len(run.iterations) == 6 and run.batch_size == 16
    assert run.architecture["arch_params"] == 2762
    assert not module_mod._global_forward_hooks


def test_older_torch_keyword_inputs_still_give_flops(monkeypatch):
    from torch.nn.modules import module as module_mod

    real = module_mod.register_module_forward_hook
    monkeypatch.setattr(module_mod, "register_module_forward_hook",
                        lambda hook, *, always_call=False: real(hook, always_call=always_call))

    model = KwargsModel()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False) as run:
        train(model, opt, steps=4, keyword="inputs")
    assert run.batch_size == 16
    assert run.architecture["arch_flops_fwd"] == 2 * 32 * 10

"""The recorder on real tiny torch training loops (CPU): which calls are iterations, which
module is the model, and that every hook leaves with the block."""

from __future__ import annotations

import contextlib

import pytest
import torch
from assertions import assert_no_hooks_left
from tiny_models import mlp_one_hidden_layer as mlp
from tiny_models import train
from torch import nn

import gpuperf_magics as gm


def test_mlp_steps_batch_and_statistics():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    with gm.profile_training(save=False) as run:
        train(model, opt, steps=20)
    assert run.status == "ok"
    assert len(run.iterations) == 20
    assert run.batch_size == 16
    assert all(it.samples == 16 for it in run.iterations)
    assert run.network == "Sequential-2.76K"
    assert run.quality["detection"] == "optimizer_step"
    assert run.quality["timing_method"] == "perf_counter"
    assert run.hyper["optimizer"] == "SGD" and run.hyper["lr"] == 0.05
    assert 1 <= run.warmup_iterations <= 4
    assert run.iterations[0].warmup
    assert run.median_s > 0 and run.p90_s >= run.median_s
    assert run.time_s == pytest.approx(sum(it.duration_s for it in run.steady))
    assert run.architecture["arch_params"] == sum(p.numel() for p in model.parameters())
    assert run.hardware["cpu_threads"] == 1
    assert run.device == "cpu" and run.gpu is None and run.gpu_count == 0
    line = run.summary_line()
    assert "Sequential-2.76K · 20 it" in line and "batch 16" in line
    assert "samples/s" in run.details()
    assert_no_hooks_left(model)


def test_reentrant_optimizer_subclass_counts_one_step():
    class MyAdam(torch.optim.Adam):
        def step(self, closure=None):
            return super().step(closure)

    torch.optim.Adam([nn.Parameter(torch.zeros(1))])  # patches Adam.step too (see notes)
    model = mlp()
    opt = MyAdam(model.parameters(), lr=1e-3)
    with gm.profile_training(save=False) as run:
        train(model, opt, steps=5)
    assert len(run.iterations) == 5
    assert run.hyper["optimizer"] == "MyAdam"


def test_compiled_model_is_captured_without_recompilation():
    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    model = mlp()
    compiled = torch.compile(model, backend="eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False) as run:
        train(compiled, opt, steps=6)
    graphs = counters["stats"]["unique_graphs"]
    train(compiled, opt, steps=2)  # after the hooks are gone
    assert counters["stats"]["unique_graphs"] == graphs
    assert len(run.iterations) == 6
    assert run.batch_size == 16
    assert run.network == "Sequential-2.76K"
    assert run.architecture["arch_compiled"] is True
    assert_no_hooks_left(compiled, model)


def test_dataparallel_wrapper_on_cpu():
    model = nn.DataParallel(mlp())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False) as run:
        train(model, opt, steps=5)
    assert len(run.iterations) == 5
    assert run.network == "Sequential-2.76K"


def test_manual_sgd_falls_back_to_backward_passes():
    model = mlp()
    loss_fn = nn.CrossEntropyLoss()
    with gm.profile_training(save=False) as run:
        for _ in range(15):
            x, y = torch.randn(8, 32), torch.randint(0, 10, (8,))
            loss_fn(model(x), y).backward()
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.01 * p.grad
                    p.grad = None
    assert run.quality["detection"] == "backward"
    assert len(run.iterations) == 15
    assert run.batch_size == 8
    assert_no_hooks_left(model)


def test_forward_only_loop_falls_back_to_forward_calls():
    model = mlp()
    with gm.profile_training(save=False) as run:
        for _ in range(12):
            model(torch.randn(4, 32))
    assert run.quality["detection"] == "forward"
    assert len(run.iterations) == 11
    assert run.batch_size == 4


def test_eval_passes_inside_the_loop_are_not_iterations():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    with gm.profile_training(save=False) as run:
        for _ in range(6):
            model.train()
            opt.zero_grad()
            loss_fn(model(torch.randn(16, 32)), torch.randint(0, 10, (16,))).backward()
            opt.step()
            model.eval()
            with torch.no_grad():
                model(torch.randn(100, 32))
    assert len(run.iterations) == 6
    assert run.batch_size == 16


def test_compiled_optimizer_step_is_seen_without_warnings():
    import warnings

    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    @torch.compile(backend="eager")
    def step() -> None:
        opt.step()

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        with gm.profile_training(save=False) as run:
            for _ in range(5):
                opt.zero_grad()
                loss_fn(model(torch.randn(8, 32)), torch.randint(0, 10, (8,))).backward()
                step()
    assert len(run.iterations) == 5
    assert run.batch_size == 8


def test_distributed_data_parallel_wrapper(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0,
                            world_size=1)
    try:
        model = nn.parallel.DistributedDataParallel(mlp())
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        with gm.profile_training(save=False) as run:
            train(model, opt, steps=6)
    finally:
        dist.destroy_process_group()
    assert len(run.iterations) == 6
    assert run.batch_size == 16
    assert run.network == "Sequential-2.76K"
    assert run.architecture["arch_params"] == sum(p.numel() for p in model.module.parameters())
    assert_no_hooks_left(model)


def test_model_hook_leaves_after_the_batch_is_known():
    """Steps-only capture reads the batch on the first 32 steps, then keeps only step hooks."""
    from gpuperf_magics.capture.recorder import BATCH_SAMPLE_STEPS

    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    hooked = []
    with gm.profile_training(save=False) as run:
        for _ in range(BATCH_SAMPLE_STEPS + 8):
            hooked.append(bool(model._forward_pre_hooks))
            train(model, opt, steps=1)
    assert hooked[1:BATCH_SAMPLE_STEPS] == [True] * (BATCH_SAMPLE_STEPS - 1)
    assert not any(hooked[BATCH_SAMPLE_STEPS:])
    assert len(run.iterations) == BATCH_SAMPLE_STEPS + 8
    assert all(it.samples == 16 for it in run.iterations)
    assert run.quality["batch_sampled_steps"] == BATCH_SAMPLE_STEPS


def test_starting_a_capture_does_not_import_dynamo():
    """Importing torch._dynamo costs about a second: a first profiled cell must not pay it for
    the hooks (a cell that compiles imports it itself, and its traced steps still count)."""
    import subprocess
    import sys

    code = ("import sys, torch, gpuperf_magics as gm\n"
            "s = gm.profile_training(save=False); s.__enter__()\n"
            "print('torch._dynamo' in sys.modules); s.stop()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.split() == ["False"]



def test_a_first_capture_starts_without_the_flop_counter_or_the_database(tmp_path):
    """The first profiled cell of a kernel: before the loop, neither the FLOP counter nor
    SQLAlchemy (a store file not made yet) nor pandas is imported; after it, the same run is
    recorded as before: its FLOPs counted, the run saved."""
    import subprocess
    import sys

    store = tmp_path / "new" / "runs.sqlite"
    code = ("import sys, torch, gpuperf_magics as gm\n"
            "m = torch.nn.Linear(8, 2); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "x = torch.randn(4, 8)\n"
            f"s = gm.profile_training(store={str(store)!r}); run = s.__enter__()\n"
            "print([n for n in ('torch.utils.flop_counter', 'sqlalchemy', 'pandas') "
            "if n in sys.modules])\n"
            "for _ in range(3):\n"
            "    opt.zero_grad(); m(x).sum().backward(); opt.step()\n"
            "s.stop(); print(run.architecture['arch_flops_fwd'], run.run_id)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.splitlines() == ["[]", f"{2.0 * 8 * 2} 1"]

class FlakySGD(torch.optim.SGD):
    """An optimizer whose ``step`` raises once, as a NaN guard or a custom check would."""

    fail_at = -1
    calls = 0

    def step(self, closure=None):
        self.calls += 1
        if self.calls == self.fail_at:
            raise FloatingPointError("non-finite gradient")
        return super().step(closure)


def test_a_caught_exception_inside_step_leaves_every_later_step_counted():
    model = mlp()
    opt = FlakySGD(model.parameters(), lr=0.01)
    opt.fail_at = 11
    caught = 0
    with gm.profile_training(save=False) as run:
        for _ in range(50):
            try:
                train(model, opt, steps=1, batch=8)
            except FloatingPointError:
                caught += 1
    assert caught == 1
    # 50 steps, one raised: its forward and backward belong to the next iteration.
    assert run.status == "ok" and len(run.iterations) == 49
    assert run.batch_size == 8
    assert run.quality["raised_steps"] == 1
    assert any("raised" in note for note in run.notes)
    assert_no_hooks_left(model)


def test_a_closure_that_raises_inside_step_is_not_a_nested_step():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    with gm.profile_training(save=False) as run:
        for i in range(20):
            x, y = torch.randn(8, 32), torch.randint(0, 10, (8,))

            def closure(i=i, x=x, y=y):
                opt.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                if i == 4:
                    raise FloatingPointError("nan loss")
                return loss

            with contextlib.suppress(FloatingPointError):  # the loop skips a bad batch
                opt.step(closure)
    assert len(run.iterations) == 19
    assert run.quality["raised_steps"] == 1


def test_the_timed_hooks_walk_the_arguments_for_a_device_only_until_the_clock_exists(
        monkeypatch):
    from gpuperf_magics.capture import recorder

    walks = []
    device_of = recorder.device_of
    monkeypatch.setattr(recorder, "device_of", lambda *a: walks.append(a) or device_of(*a))
    model, loss_fn = mlp(), nn.CrossEntropyLoss()
    with gm.profile_training(save=False, phases=True) as run:
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(12):
            loss_fn(model(torch.randn(8, 32)), torch.randint(0, 10, (8,))).backward()
            opt.step()
            opt.zero_grad()
    assert len(run.iterations) == 12
    assert len(walks) <= 2  # the first forward and the optimizer's adoption, not one a step

"""Iteration capture on real tiny torch training loops (CPU), through the Python API."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gpuperf_magics as gm
from gpuperf_magics.capture.clock import CudaEventClock, SyncedClock
from gpuperf_magics.capture.session import auto_warmup


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


class Tempered(nn.Module):
    """A model whose first input is a scalar, not the batch."""

    def __init__(self) -> None:
        super().__init__()
        self.body = mlp()

    def forward(self, temperature: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) / temperature


class KwargsModel(nn.Module):
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


def assert_no_hooks_left(*models: nn.Module) -> None:
    from torch.nn.modules import module as module_mod
    from torch.optim import optimizer as optim_mod

    assert not module_mod._global_forward_pre_hooks
    assert not module_mod._global_forward_hooks
    assert not module_mod._has_any_global_hook()
    assert not optim_mod._global_optimizer_pre_hooks
    assert not optim_mod._global_optimizer_post_hooks
    assert torch.utils.data.DataLoader.__iter__.__module__ == "torch.utils.data.dataloader"
    assert torch.amp.GradScaler.update.__module__ == "torch.amp.grad_scaler"
    for m in models:
        for sub in m.modules():
            assert not sub._forward_pre_hooks and not sub._forward_hooks


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


def test_cnn_with_dataloader_and_scheduler_records_epochs():
    model = SmallCNN()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    data = torch.utils.data.TensorDataset(torch.randn(40, 3, 16, 16), torch.randint(0, 10, (40,)))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    loss_fn = nn.CrossEntropyLoss()
    with gm.profile_training(name="cnn", save=False, warmup=2) as run:
        for _epoch in range(2):
            for x, y in loader:
                opt.zero_grad()
                loss_fn(model(x), y).backward()
                opt.step()
            sched.step()
    assert len(run.iterations) == 10
    assert run.warmup_iterations == 2
    assert run.network == "cnn"
    assert run.hyper["epochs_seen"] == 2
    assert run.hyper["dataset_size"] == 40
    assert run.hyper["iterations_per_epoch"] == 5
    assert run.hyper["lr_last"] < run.hyper["lr"]
    assert run.architecture["arch_layers_conv"] == 2
    assert run.architecture["arch_flops_fwd"] > 0
    assert_no_hooks_left(model)


def test_gradient_accumulation_counts_micro_batches():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    with gm.profile_training(save=False) as run:
        for _ in range(6):
            for _micro in range(4):
                x, y = torch.randn(8, 32), torch.randint(0, 10, (8,))
                (loss_fn(model(x), y) / 4).backward()
            opt.step()
            opt.zero_grad()
    assert len(run.iterations) == 6
    assert run.batch_size == 32
    assert run.hyper["micro_batches"] == 4
    assert run.hyper["micro_batch_size"] == 8
    assert "(4×8)" in run.summary_line()


def test_two_optimizers_primary_is_first_to_step():
    gen, disc = mlp(), nn.Sequential(nn.Linear(10, 1))
    opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
    with gm.profile_training(save=False) as run:
        for _ in range(8):
            fake = gen(torch.randn(4, 32))
            opt_d.zero_grad()
            disc(fake.detach()).mean().backward()
            opt_d.step()
            opt_g.zero_grad()
            (-disc(fake).mean()).backward()
            opt_g.step()
    assert len(run.iterations) == 8
    assert run.hyper["other_optimizer_steps"] == "Adam×8"
    # The model is the discriminator (its optimizer stepped first); it sees two passes of 4
    # samples per iteration, which the run reports as 2 micro-batches of 4.
    assert run.hyper["micro_batch_size"] == 4 and run.hyper["micro_batches"] == 2
    assert_no_hooks_left(gen, disc)


def test_kwargs_only_forward_reads_batch():
    model = KwargsModel()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False) as run:
        for _ in range(10):
            opt.zero_grad()
            model(inputs=torch.randn(12, 32)).sum().backward()
            opt.step()
    assert len(run.iterations) == 10
    assert run.batch_size == 12
    assert run.network == "KwargsModel-330"


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


def test_lbfgs_closure_forwards_are_not_extra_samples():
    model = mlp()
    opt = torch.optim.LBFGS(model.parameters(), max_iter=3)
    loss_fn = nn.CrossEntropyLoss()
    with gm.profile_training(save=False) as run:
        for _ in range(4):
            x, y = torch.randn(16, 32), torch.randint(0, 10, (16,))

            def closure(x=x, y=y):
                opt.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                return loss

            opt.step(closure)
    assert len(run.iterations) == 4
    assert run.batch_size == 16


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


def test_amp_gradscaler_skipped_step_is_noted():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**4)
    loss_fn = nn.CrossEntropyLoss()
    with gm.profile_training(save=False) as run:
        for i in range(6):
            x, y = torch.randn(8, 32), torch.randint(0, 10, (8,))
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = loss_fn(model(x), y)
            if i == 3:
                loss = loss * float("inf")
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    assert len(run.iterations) == 6
    assert [it.skipped_step for it in run.iterations].count(True) == 1
    assert run.iterations[3].skipped_step
    assert run.hyper["skipped_steps"] == 1
    assert any("skipped by AMP" in n for n in run.notes)
    assert run.architecture["arch_amp"] is True
    assert_no_hooks_left(model)


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


def test_phases_split_each_iteration():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False, phases=True) as run:
        train(model, opt, steps=8)
    for it in run.iterations[1:]:
        assert set(it.phases) == {"data", "forward", "loss", "backward", "other", "optimizer"}
        assert all(v >= 0 for v in it.phases.values())
        assert sum(it.phases.values()) == pytest.approx(it.duration_s, rel=1e-6, abs=1e-9)
        assert it.phases["forward"] > 0 and it.phases["backward"] > 0
    assert set(run.phase_medians()) >= {"forward", "backward", "optimizer"}


def test_exception_at_iteration_k_keeps_partial_run():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    session = gm.profile_training(save=False)
    with pytest.raises(ValueError, match="boom"), session as run:
        for i in range(10):
            if i == 7:
                raise ValueError("boom")
            train(model, opt, steps=1)
    assert run.status == "failed"
    assert run.error == "ValueError: boom"
    assert len(run.iterations) == 7
    assert "[failed]" in run.summary_line()
    assert_no_hooks_left(model)


def test_keyboard_interrupt_is_interrupted_status():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with pytest.raises(KeyboardInterrupt), gm.profile_training(save=False) as run:
        train(model, opt, steps=4)
        raise KeyboardInterrupt
    assert run.status == "interrupted"
    assert len(run.iterations) == 4
    assert_no_hooks_left(model)


def test_no_iteration_says_why_and_stores_nothing(tmp_path):
    store = tmp_path / "s.sqlite"
    with gm.profile_training(store=store) as run:
        x = torch.ones(3) * 2
    assert x.sum() == 6
    assert run.iterations == []
    assert run.run_id is None
    assert "no training iteration detected" in run.summary_line()
    assert not store.exists() or gm.Store(store).runs().empty


def test_invalid_arguments_are_clear():
    with pytest.raises(ValueError, match="warmup"):
        gm.profile_training(warmup=-1)
    with pytest.raises(ValueError, match="epochs"):
        gm.profile_training(epochs=0)


def test_auto_warmup():
    assert auto_warmup([]) == 0
    assert auto_warmup([1.0]) == 1
    assert auto_warmup([5.0, 1.0, 1.0, 1.0, 1.0, 1.0]) == 1
    assert auto_warmup([9.0, 4.0, 3.0] + [1.0] * 12) == 3
    assert auto_warmup([9.0] * 3 + [1.0] * 7) == 2  # at most a fifth of the run


# ---------------------------------------------------------------------- clocks (GPU seam)
class FakeEvent:
    """A CUDA event on a fake device whose timeline is a counter advanced by the test."""

    def __init__(self, cuda: FakeCuda, enable_timing: bool = False) -> None:
        self.cuda, self.t = cuda, None

    def record(self, stream: object = None) -> None:
        self.t = self.cuda.now

    def query(self) -> bool:
        return self.t is not None and self.t <= self.cuda.done

    def elapsed_time(self, other: FakeEvent) -> float:
        assert self.query() and other.query(), "elapsed_time on an unfinished event"
        return (other.t - self.t) * 1.0  # ms


class FakeCuda:
    def __init__(self) -> None:
        self.now = 0.0
        self.done = 0.0
        self.syncs = 0
        self.allocated = 0  # bytes the fake allocator holds now and at its peak
        self.peak = 0
        self.resets = 0

    def reset_peak_memory_stats(self, device: object = None) -> None:
        self.resets += 1
        self.peak = self.allocated

    def max_memory_allocated(self, device: object = None) -> int:
        return self.peak

    def Event(self, enable_timing: bool = False) -> FakeEvent:
        return FakeEvent(self, enable_timing)

    def current_stream(self, device: object = None) -> object:
        return object()

    def synchronize(self, device: object = None) -> None:
        self.syncs += 1
        self.done = self.now


def test_cuda_event_clock_times_the_gpu_timeline_and_drains():
    cuda = FakeCuda()
    clock = CudaEventClock(cuda)
    clock.drain_every = 4
    clock.start()
    tokens = []
    for _ in range(10):
        cuda.now += 2.0  # the GPU spends 2 ms per iteration
        tokens.append(clock.mark())
        cuda.done = cuda.now - 2.0  # the GPU lags one iteration behind the host
    assert cuda.syncs == 1  # no synchronisation on the timed path
    assert len(clock._pending) < 10  # finished events were converted on the way
    clock.finish()
    assert cuda.syncs == 2
    assert [clock.seconds(t) for t in tokens] == pytest.approx([0.002 * (i + 1) for i in range(10)])


def test_synced_clock_synchronises_every_mark():
    calls = []
    clock = SyncedClock(lambda: calls.append(1))
    clock.start()
    a = clock.mark()
    b = clock.mark()
    clock.finish()
    assert len(calls) == 3
    assert clock.seconds(b) >= clock.seconds(a) >= 0


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


class WallClockCuda(FakeCuda):
    """A fake device whose timeline is the host's clock and whose events finish at once."""

    @property
    def now(self) -> float:
        import time

        return time.perf_counter() * 1e3

    @now.setter
    def now(self, value: float) -> None:
        pass

    @property
    def done(self) -> float:
        return float("inf")

    @done.setter
    def done(self, value: float) -> None:
        pass


def test_session_on_the_cuda_event_path(monkeypatch):
    """The recorder and session with CUDA event timing (the GPU seam faked)."""
    from gpuperf_magics.capture import recorder as recorder_mod

    cuda = WallClockCuda()
    monkeypatch.setattr(recorder_mod, "make_clock", lambda device, sync: CudaEventClock(cuda))
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False, phases=True) as run:
        train(model, opt, steps=8)
    assert run.quality["timing_method"] == "cuda_events"
    assert cuda.syncs == 2  # once at the start, once at the end: none per iteration
    assert len(run.iterations) == 8
    assert all(it.duration_s > 0 for it in run.iterations)
    for it in run.iterations[1:]:
        assert sum(it.phases.values()) == pytest.approx(it.duration_s, rel=1e-6)


def test_the_peak_gpu_memory_is_reset_before_the_loop_and_kept_with_the_run(monkeypatch,
                                                                             tmp_path):
    """Peak memory at the CUDA seam: reset when timing starts, read once at the end, saved."""
    from gpuperf_magics.capture import recorder as recorder_mod
    from gpuperf_magics.capture.clock import CudaPeakMemory

    cuda = WallClockCuda()
    cuda.allocated = cuda.peak = 9 * 2**30  # left over from an earlier cell: not this run's
    monkeypatch.setattr(recorder_mod, "make_clock", lambda device, sync: CudaEventClock(cuda))
    monkeypatch.setattr(recorder_mod, "make_peak_memory",
                        lambda device: CudaPeakMemory(cuda, device))
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    store = tmp_path / "runs.sqlite"
    with gm.profile_training(store=store) as run:
        cuda.allocated = 2**30  # the first cell's tensors were freed before this loop
        assert cuda.resets == 0
        for step in range(6):
            opt.zero_grad()
            loss_fn(model(torch.randn(16, 32)), torch.randint(0, 10, (16,))).backward()
            opt.step()
            assert cuda.resets == 1  # once, when timing began; never per iteration
            cuda.peak = max(cuda.peak, int(1.5 * 2**30) + step)
    assert run.peak_memory_gb == pytest.approx(1.5)
    assert gm.Store(store).runs()["peak_memory_gb"].tolist() == pytest.approx([1.5])
    assert gm.Store(store).get_run(run.run_id).peak_memory_gb == pytest.approx(1.5)


def test_a_failing_peak_memory_reader_costs_only_the_figure(monkeypatch):
    from gpuperf_magics.capture import recorder as recorder_mod
    from gpuperf_magics.capture.clock import CudaPeakMemory

    class Broken(WallClockCuda):
        def max_memory_allocated(self, device: object = None) -> int:
            raise RuntimeError("CUDA error: device lost")

    cuda = Broken()
    monkeypatch.setattr(recorder_mod, "make_clock", lambda device, sync: CudaEventClock(cuda))
    monkeypatch.setattr(recorder_mod, "make_peak_memory",
                        lambda device: CudaPeakMemory(cuda, device))
    model = mlp()
    with gm.profile_training(save=False) as run:
        train(model, torch.optim.SGD(model.parameters(), lr=0.01), steps=4)
    assert len(run.iterations) == 4 and run.peak_memory_gb is None


def test_on_the_cpu_the_peak_gpu_memory_stays_unknown():
    model = mlp()
    with gm.profile_training(save=False) as run:
        train(model, torch.optim.SGD(model.parameters(), lr=0.01), steps=4)
    assert run.peak_memory_gb is None
    assert run.to_record()["peak_memory_gb"] is None


def test_the_running_configuration_is_known_after_the_first_step():
    """What the live line asks the store's model with, read while the loop runs."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    session = gm.profile_training(save=False)
    seen = []
    with session as run:
        for _ in range(40):  # past the steps whose model calls are watched
            seen.append(session.configuration())
            for _ in range(4):  # accumulation: 4 micro-batches of 8 per step
                loss_fn(model(torch.randn(8, 32)), torch.randint(0, 10, (8,))).backward()
            opt.step()
            opt.zero_grad()
    assert seen[0] is None  # no complete step yet
    assert set(seen[2:]) == {("Sequential-2.76K", 32, None, 0)}
    assert run.network == "Sequential-2.76K" and run.batch_size == 32
    named = gm.profile_training("mine", save=False)
    with named:
        train(model, opt, steps=3)
        assert named.configuration() == ("mine", 16, None, 0)


def test_accumulation_counts_epochs_in_optimizer_steps():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    data = torch.utils.data.TensorDataset(torch.randn(128, 32), torch.randint(0, 10, (128,)))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    with gm.profile_training(save=False, epochs=10) as run:
        for i, (x, y) in enumerate(loader):
            loss_fn(model(x), y).backward()
            if i % 4 == 3:
                opt.step()
                opt.zero_grad()
    assert len(run.iterations) == 4 and run.batch_size == 32
    assert run.hyper["iterations_per_epoch"] == 4  # 16 micro-batches = 4 optimizer steps
    assert run.hyper["total_iterations"] == 40


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


@pytest.mark.parametrize("kind, samples, steps, drop", [
    ("subset", 100, 10, False),  # a sampler over part of the dataset: its length counts
    ("drop_last", 640, 6, True),  # 640 samples, batch 100: the partial 7th batch is dropped
])
def test_an_epoch_is_what_the_loader_visits(kind, samples, steps, drop, tmp_path):
    from torch.utils.data import DataLoader, SubsetRandomSampler, TensorDataset

    from gpuperf_magics import predict

    data = TensorDataset(torch.randn(640, 32), torch.randint(0, 10, (640,)))
    if kind == "subset":
        loader = DataLoader(data, batch_size=10, sampler=SubsetRandomSampler(range(100)))
    else:
        loader = DataLoader(data, batch_size=100, drop_last=True)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    path = tmp_path / "runs.sqlite"
    with gm.profile_training(name="m", store=path) as run:
        for _ in range(2):
            for x, y in loader:
                opt.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
    assert run.hyper["dataset_size"] == samples and run.hyper["drop_last"] is drop
    assert run.hyper["iterations_per_epoch"] == steps and len(run.iterations) == 2 * steps
    batch = loader.batch_size
    frame = predict.predict_time(path, batch_sizes=[batch], epochs=1).frame
    assert int(frame["iterations"].iloc[0]) == steps


def test_a_leading_scalar_argument_is_not_the_batch():
    model = Tempered()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False) as run:
        for _ in range(5):
            opt.zero_grad()
            model(torch.tensor(2.0), torch.randn(12, 32)).sum().backward()
            opt.step()
    assert run.batch_size == 12 and len(run.iterations) == 5


def test_a_model_left_in_eval_mode_still_gives_batch_and_architecture():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model.eval()  # a validation pass before, and no model.train() after it
    with gm.profile_training(save=False) as run:
        for _ in range(6):
            opt.zero_grad()
            model(torch.randn(16, 32)).sum().backward()
            opt.step()
    assert len(run.iterations) == 6 and run.batch_size == 16
    assert run.architecture.get("arch_params") == 2762
    assert any("eval() mode" in note for note in run.notes)


def test_eval_calls_with_gradients_do_not_count_when_the_model_trains():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False) as run:
        for _ in range(6):
            model.train()
            opt.zero_grad()
            model(torch.randn(16, 32)).sum().backward()
            opt.step()
            model.eval()
            model(torch.randn(64, 32))  # validation without no_grad
    assert len(run.iterations) == 6 and run.batch_size == 16
    assert run.hyper.get("micro_batches") == 1
    assert not any("eval() mode" in note for note in run.notes)


def test_a_single_iteration_says_its_time_includes_warm_up():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False) as run:
        opt.zero_grad()
        model(torch.randn(16, 32)).sum().backward()
        opt.step()
    assert len(run.iterations) == 1
    assert any("only 1 iteration" in note for note in run.notes)


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


def test_an_eval_call_before_training_does_not_describe_the_run():
    """Validation before the loop (another input, no autocast) must not stand for training."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False) as run:
        model.eval()
        model(torch.randn(64, 32))  # gradients on, eval mode: a validation pass
        model.train()
        for _ in range(4):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(torch.randn(16, 32)).float().sum()
            loss.backward()
            opt.step()
    assert run.batch_size == 16
    assert run.architecture["arch_amp"] is True
    assert not any("eval() mode" in note for note in run.notes)


def test_phases_of_a_model_left_in_eval_mode():
    model = mlp()
    model.eval()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False, phases=True) as run:
        train(model, opt, steps=8)
    medians = run.phase_medians()
    assert medians["forward"] > 0 and medians["backward"] > 0


def test_a_leading_scalar_with_keyword_inputs_keeps_the_batch():
    model = Tempered()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False) as run:
        for _ in range(6):
            opt.zero_grad()
            model(torch.tensor(2.0), x=torch.randn(16, 32)).sum().backward()
            opt.step()
    assert run.batch_size == 16
    assert all(it.samples == 16 for it in run.iterations)


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

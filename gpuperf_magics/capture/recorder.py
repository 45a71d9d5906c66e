"""Find the training iterations of unchanged user code and timestamp them.

How (each point verified with torch 2.13 and IPython 9):

1. Global optimizer step hooks mark iteration boundaries. A re-entrancy counter ignores nested
   ``step`` calls (subclasses calling ``super().step()``); the first optimizer to finish a step
   is the *primary* one, the others are only counted.
2. Until the first step (the *discovery* phase), global module forward hooks see the top-level
   training calls (outermost module, ``training`` mode, grad enabled) and their batch. At the
   first step the model is the module owning the stepping optimizer's parameters
   (:mod:`.discovery`); the global module hooks are then removed (they slow every module call
   and split ``torch.compile`` graphs) and replaced by hooks on that one module, the outermost
   wrapper. A compiled (``OptimizedModule``) model is adopted at its first call, before
   Dynamo traces it, so the global hooks are never part of its guards.
3. Without any ``torch.optim`` step, the end of each backward pass marks iterations; without a
   backward pass, each top-level training forward call does.

Everything on the per-iteration path is a few attribute updates and one clock mark; all
interpretation happens in :meth:`Recorder.iterations` after the cell (:mod:`.events`).
"""

from __future__ import annotations

import logging
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from gpuperf_magics.architecture.unwrap import is_compiled, unwrap
from gpuperf_magics.capture import events as _events
from gpuperf_magics.capture.batch import batch_of, first_tensor
from gpuperf_magics.capture.clock import Clock, make_clock, make_peak_memory
from gpuperf_magics.capture.discovery import ADOPT_AFTER_CALLS, Candidate, choose_model
from gpuperf_magics.capture.events import (
    BWD_END,
    BWD_START,
    FWD,
    FWD_END,
    FWD_END_EVAL,
    FWD_EVAL,
    SKIPPED,
    STEP_END,
    STEP_START,
    SYNC_END,
)
from gpuperf_magics.capture.patches import (
    LoaderUse,
    loader_hyper,
    longest_loader,
    patch_dataloader,
    patch_grad_scaler,
    patch_process_start,
    quiet_compile_hook_warning,
)
from gpuperf_magics.capture.probes import (
    autocast_on,
    device_of,
    dynamo_disabled,
    global_forward_hook,
    lr_of,
    opt_device,
    output_grad_fn,
    remove_global_hooks,
)
from gpuperf_magics.hardware.busy import device_busy_reader
from gpuperf_magics.run import IterationRecord

_log = logging.getLogger(__name__)

#: Optimizer steps during which the model's forward calls are watched for the batch size and
#: micro-batches (steps-only mode); later steps reuse the last pattern.
BATCH_SAMPLE_STEPS = 32

_is_grad_enabled = torch.is_grad_enabled
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)
_Tensor = torch.Tensor


class Recorder:
    """Context manager that installs the hooks, logs marks and removes every hook on exit.

    The hooks only append small tuples to an event log (:mod:`.events`); :meth:`iterations`
    interprets it after the cell, so the timed path stays a few microseconds per iteration.

    Parameters
    ----------
    phases : bool
        Also timestamp forward, backward and optimizer phases (~30 µs per iteration).
    sync : bool
        Synchronise the accelerator at every mark (exact wall time, loses CPU/GPU overlap).
    """

    def __init__(self, *, phases: bool = False, sync: bool = False) -> None:
        self.phases = phases
        self.sync = sync
        self.clock: Clock | None = None
        self._memory: Any = None  # peak-memory reader of the clock's device (CUDA only)
        #: Peak GPU memory of the run's tensors (GiB), read when the recorder closes.
        self.peak_memory_gb: float | None = None
        self._busy: Any = None  # NVML utilization reader of the clock's device (CUDA only)
        #: Share of the run the GPU was busy (0-1, NVML's samples), read when it closes.
        self.device_busy: float | None = None
        self.model: nn.Module | None = None
        self.primary: Any = None
        self.other_steps: Counter[str] = Counter()
        self.optimizer_info: dict[str, Any] = {}
        self.example: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        self._example_from_eval = False  # the example came from an eval() call
        self.autocast = False
        self.loaders: dict[int, LoaderUse] = {}
        #: Functions of the worker processes the cell started (not DataLoader workers).
        self.workers: list[str] = []
        self.events: list[tuple[Any, ...]] = []
        self._handles: list[Any] = []
        self._global_handles: list[Any] = []
        self._model_handles: list[Any] = []
        self._restore: list[Callable[[], None]] = []
        self._step_depth = 0
        self._step_frame: Any = None
        #: Optimizer steps that raised (caught by the loop): not iterations of their own.
        self.raised_steps = 0
        self._depth = 0
        self._top: nn.Module | None = None
        self._inner_autocast = False  # autocast seen inside the current top-level call
        self._top_token: int | None = None
        self._seen: dict[int, Candidate] = {}  # by id() of the module
        self._steps_since_update = 0
        self._steps_seen = 0
        #: Steps after which the batch was no longer read (None: read at every step).
        self.batch_sampled_steps: int | None = None
        self._timed_hooks = False
        self._active = False

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> Recorder:
        from torch.nn.modules import module as module_mod
        from torch.optim import optimizer as optim_mod

        self._active = True
        # Our global hooks are gone before a compiled model's inner call (see _g_pre), so
        # torch's warning that they would fire twice for it does not apply.
        self._restore.append(quiet_compile_hook_warning())
        try:
            # When a user compiles around opt.step(), Dynamo would trace our hooks and break
            # the graph with a warning at the clock read; under tracing the hooks hand over
            # to a Dynamo-disabled twin (a silent break). A disable wrapper on every eager
            # call would cost ~3 µs per step, so the eager path stays plain.
            # Made now only if Dynamo is loaded already: importing it costs about 1 s, the
            # whole start-up cost of a first profiled cell. A cell that compiles for the first
            # time makes them at its first traced step (_untraced).
            self._untraced_hooks: tuple[Callable[..., None], Callable[..., None]] | None = None
            if "torch._dynamo" in sys.modules:
                self._untraced()
            self._handles.append(optim_mod.register_optimizer_step_pre_hook(self._opt_pre_hook))
            self._handles.append(optim_mod.register_optimizer_step_post_hook(self._opt_post_hook))
            self._global_handles = [
                module_mod.register_module_forward_pre_hook(self._g_pre),
                global_forward_hook(module_mod, self._g_post),
            ]
            self._restore += patch_grad_scaler(self._on_scaler_update)
            self._restore.append(patch_dataloader(self.loaders))
            self._restore.append(patch_process_start(self.workers))
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove every hook and patch; finish the clock. Safe to call twice."""
        if not self._active:
            return
        self._active = False
        self._global_off()
        for h in (*self._handles, *self._model_handles):
            h.remove()
        self._handles, self._model_handles = [], []
        for undo in reversed(self._restore):
            undo()
        self._restore.clear()
        if self.clock is not None:
            self.clock.finish()
        if self._memory is not None:
            try:
                self.peak_memory_gb = self._memory.peak_gib()
            except Exception:  # a figure for the offers table is not worth the run
                _log.debug("peak memory unreadable", exc_info=True)
                self.peak_memory_gb = None
            self._memory = None
        if self._busy is not None:
            try:
                self.device_busy = self._busy.fraction()
            except Exception:  # a figure for moves to other GPUs is not worth the run
                _log.debug("GPU utilization unreadable", exc_info=True)
            self._busy = None

    @property
    def steps_seen(self) -> int:
        """Optimizer steps of the primary optimizer so far (read from another thread by the
        live line: one int, no lock on the timed path)."""
        return self._steps_seen

    def recent_batch(self) -> int | None:
        """Samples per optimizer step seen so far (the model's training calls between two
        steps, micro-batches summed), or None before a complete step. Read from another
        thread by the live line; looks only at the start of the event log, where the model's
        calls are logged (they stop being logged after :data:`BATCH_SAMPLE_STEPS` steps)."""
        model = self.model
        ids = {id(model), id(unwrap(model).module)} if model is not None else None
        # A copy of the head: the training thread appends meanwhile.
        return _events.recent_batch(self.events[:4096], ids)

    def loader_length(self) -> int | None:
        """Batches per pass of the longest sized DataLoader iterated so far (None: none)."""
        return longest_loader(self.loaders)

    def _ensure_clock(self, device: torch.device | None) -> Clock:
        if self.clock is None:
            # Before the first timed call: the peak then counts the model, its gradients,
            # the optimizer state and the activations of the batch, and nothing earlier.
            try:
                self._memory = make_peak_memory(device)
                if self._memory is not None:
                    self._memory.start()
            except Exception:  # the peak is a figure for the offers table, not the run
                _log.debug("peak memory not measured", exc_info=True)
                self._memory = None
            try:
                self._busy = device_busy_reader(device)
                if self._busy is not None:
                    self._busy.start()
            except Exception:  # like the peak: a figure for the predictor, not the run
                _log.debug("GPU utilization not measured", exc_info=True)
                self._busy = None
            self.clock = make_clock(device, self.sync)
            self.clock.start()
        return self.clock

    def _on_scaler_update(self) -> None:
        if self.primary is not None and self.clock is not None and self._active:
            if self._steps_since_update == 0:
                self.events.append((SKIPPED, self.clock.mark()))
            self._steps_since_update = 0

    # ------------------------------------------------------------------ optimizer hooks
    def _opt_pre_hook(self, opt: Any, args: Any, kwargs: Any) -> None:
        if _is_compiling():
            return self._untraced()[0](opt, args, kwargs)
        if self._step_depth and not self._outer_step_running():
            # The outer step raised (and the loop caught it): torch skips post-hooks then,
            # so the counter stayed up and every later step would look nested.
            self._step_depth = 0
            self.raised_steps += 1
        if not self._step_depth:
            # torch's step wrapper, alive for exactly as long as the outer step runs.
            self._step_frame = sys._getframe(1)
        self._opt_pre(opt, args, kwargs)

    def _untraced(self) -> tuple[Callable[..., None], Callable[..., None]]:
        if self._untraced_hooks is None:
            self._untraced_hooks = (dynamo_disabled(self._opt_pre),
                                    dynamo_disabled(self._opt_post))
        return self._untraced_hooks

    def _outer_step_running(self) -> bool:
        """Whether the outer ``step`` call seen by the pre-hook is still on the stack
        (only asked for nested calls, so its few µs never touch a plain step)."""
        outer = self._step_frame
        frame: Any = sys._getframe(2)
        while frame is not None:
            if frame is outer:
                return True
            frame = frame.f_back
        return False

    def _opt_post_hook(self, opt: Any, args: Any, kwargs: Any) -> None:
        if _is_compiling():
            return self._untraced()[1](opt, args, kwargs)
        self._opt_post(opt, args, kwargs)

    def _opt_pre(self, opt: Any, args: Any, kwargs: Any) -> None:
        self._step_depth += 1
        if self.phases and self._step_depth == 1 and self.clock is not None and (
            self.primary is None or opt is self.primary
        ):
            self.events.append((STEP_START, self.clock.mark()))

    def _opt_post(self, opt: Any, args: Any, kwargs: Any) -> None:
        self._step_depth = max(self._step_depth - 1, 0)
        if self._step_depth:
            return  # a nested super().step(): the outer call ends the step
        self._step_frame = None  # do not keep the step's locals alive
        if self.primary is None:
            self._choose_primary(opt)
        elif opt is not self.primary:
            self.other_steps[type(opt).__name__] += 1
            return
        self._steps_since_update += 1
        self.events.append((STEP_END, self.clock.mark()))  # type: ignore[union-attr]
        self._steps_seen += 1
        if self._steps_seen == BATCH_SAMPLE_STEPS and not self._timed_hooks:
            # The batch pattern is known by now; without the model hook torch calls the model
            # on its fast path again, and an iteration costs only the two step hooks.
            for h in self._model_handles:
                h.remove()
            self._model_handles = []
            self.batch_sampled_steps = self._steps_seen

    def _choose_primary(self, opt: Any) -> None:
        self.primary = opt
        self.optimizer_info = {"optimizer": type(opt).__name__, "lr": lr_of(opt)}
        best = choose_model(opt, self._seen.values(), self.model)
        if best is not None and best is not self.model:
            self._adopt(best)
        elif self.model is not None and self._timed_hooks and not self.phases:
            self._install_model_hooks(self.model, timed=False)  # steps now mark iterations
        self._global_off()
        self._ensure_clock(device_of(self.model) or opt_device(opt))

    # ------------------------------------------------------------------ discovery (global)
    def _g_pre(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        depth = self._depth
        self._depth = depth + 1
        if depth:
            if self._top is not None and not self._inner_autocast:
                # accelerate (and so the HF Trainer) enters autocast inside the model's
                # forward, after any hook on the model itself: look one call deeper.
                self._inner_autocast = autocast_on()
            return
        if not _is_grad_enabled():
            return
        self._inner_autocast = False
        if not any(p.requires_grad for p in module.parameters()):
            # A loss, a transform or a frozen extractor is never the model; it must not pick
            # the clock either (a CPU transform would time a CUDA model on the host).
            return
        self._top = module
        clock = self.clock
        if clock is None:  # the device walk only picks the first clock
            clock = self._ensure_clock(device_of(module, args))
        self._top_token = clock.mark()
        if is_compiled(module):
            # Adopt at once, before Dynamo traces the inner module with global hooks present:
            # otherwise removing them later would force a recompilation.
            self._depth = 0
            self._top = None
            self._adopt(module, timed=True)
            self._log_forward(module, args, {}, self._top_token)

    def _g_post(self, module: nn.Module, args: Any, *rest: Any) -> None:
        # (kwargs, output) normally; torch calls always_call hooks with (output,) only when
        # the forward raised, e.g. an OOM probe caught by the user.
        self._depth = max(self._depth - 1, 0)
        if self._depth or module is not self._top:
            return
        self._top = None
        if len(rest) != 2:
            return
        kwargs, output = rest
        entry = self._seen.get(id(module))
        if entry is None or (entry.from_eval and module.training):
            # A training call's inputs and autocast state describe the model, not an eval
            # call's (a validation pass before the loop).
            calls = entry.calls if entry is not None else 0
            entry = self._seen[id(module)] = Candidate(
                module, calls, (tuple(args), dict(kwargs)),
                autocast_on() or self._inner_autocast, not module.training)
        if not module.training:
            # Only a fallback (see FWD_EVAL); never enough to adopt a model by its calls.
            self.events.append((FWD_EVAL, self._top_token, batch_of(args, kwargs),
                                self._step_depth > 0, id(module)))
            self._after_forward(output)
            return
        entry.calls += 1
        self.events.append((FWD, self._top_token, batch_of(args, kwargs),
                            self._step_depth > 0, id(module)))
        self._after_forward(output)
        if self.primary is None and self.model is None and entry.calls >= ADOPT_AFTER_CALLS:
            self._adopt(module, timed=True)

    def _global_off(self) -> None:
        remove_global_hooks(self._global_handles)
        self._global_handles = []

    def _adopt(self, module: nn.Module, timed: bool = False) -> None:
        """Make ``module`` the model: per-model hooks on it, global module hooks removed."""
        self.model = module
        entry = self._seen.get(id(module))
        if entry is not None and (entry.example[0] or entry.example[1]):
            # (Global hooks of torch < 2.6 see no keyword inputs: an empty example is left
            # for the model's own hooks to fill.)
            self.example, self.autocast = entry.example, entry.autocast
            self._example_from_eval = entry.from_eval
        self._global_off()
        self._seen.clear()
        self._install_model_hooks(module, timed=timed or self.phases)

    # ------------------------------------------------------------------ per-model hooks
    def _install_model_hooks(self, module: nn.Module, timed: bool) -> None:
        for h in self._model_handles:
            h.remove()
        self._timed_hooks = timed
        if timed:
            self._model_handles = [
                module.register_forward_pre_hook(self._m_pre_timed, with_kwargs=True),
                module.register_forward_hook(self._m_post, with_kwargs=True, always_call=True),
            ]
        elif self.example is not None and first_tensor(self.example[0], 1) is not None:
            # The model takes its batch positionally: a hook without kwargs costs half as much
            # (torch builds no kwargs path for it): ~1.6 µs instead of ~3.5 µs per call.
            self._model_handles = [module.register_forward_pre_hook(self._m_pre_positional)]
        else:
            self._model_handles = [module.register_forward_pre_hook(self._m_pre,
                                                                    with_kwargs=True)]

    def _log_forward(self, module: nn.Module, args: Any, kwargs: Any, token: int | None) -> None:
        if self.example is None or (self._example_from_eval and module.training):
            self.example = (tuple(args), dict(kwargs or {}))
            self.autocast = autocast_on()
            self._example_from_eval = not module.training
        self.events.append((FWD if module.training else FWD_EVAL, token,
                            batch_of(args, kwargs), self._step_depth > 0, id(module)))

    def _m_pre(self, module: nn.Module, args: Any, kwargs: Any) -> None:
        # Steps-only path: the cheapest hook that still sees every micro-batch.
        if _is_grad_enabled():
            self._log_forward(module, args, kwargs, None)

    def _m_pre_positional(self, module: nn.Module, args: Any) -> None:
        if _is_grad_enabled():
            first = args[0] if args else None
            # Fast path for the common call model(x): no container walk.
            batch = first.shape[0] if type(first) is _Tensor and first.dim() else (
                batch_of(args, None))
            self.events.append((FWD if module.training else FWD_EVAL, None, batch,
                                self._step_depth > 0, id(module)))

    def _m_pre_timed(self, module: nn.Module, args: Any, kwargs: Any) -> None:
        if _is_grad_enabled():
            clock = self.clock
            if clock is None:  # the device walk only picks the first clock
                clock = self._ensure_clock(device_of(module, args))
            self._log_forward(module, args, kwargs, clock.mark())

    def _m_post(self, module: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        if _is_grad_enabled() and self.clock is not None:
            if self.phases:
                code = FWD_END if module.training else FWD_END_EVAL
                self.events.append((code, self.clock.mark()))
            self._after_forward(output)

    def _after_forward(self, output: Any) -> None:
        grad_fn = output_grad_fn(output)
        if grad_fn is not None:
            grad_fn.register_prehook(self._bwd_start)

    def _bwd_start(self, grad_outputs: Any) -> None:
        if self.clock is None or not self._active:
            return
        self.events.append((BWD_START, self.clock.mark()))
        # Runs when the whole backward pass is done: the trick DDP and FSDP rely on.
        torch.autograd.Variable._execution_engine.queue_callback(self._bwd_end)

    def _bwd_end(self) -> None:
        if self.clock is not None and self._active:
            self.events.append((BWD_END, self.clock.mark()))
            if self.phases and isinstance(self.model, nn.parallel.DistributedDataParallel):
                # DDP queues the wait for its all-reduce when the last bucket is ready, after
                # this callback; one queued now runs after it: the un-hidden sync time.
                torch.autograd.Variable._execution_engine.queue_callback(self._sync_end)

    def _sync_end(self) -> None:
        if self.clock is not None and self._active:
            self.events.append((SYNC_END, self.clock.mark()))

    # ------------------------------------------------------------------ results
    @property
    def detection(self) -> str:
        """What marked the iterations: optimizer_step, backward, forward or none."""
        return _events.detection(self.events, id(self.model))

    @property
    def eval_mode_training(self) -> bool:
        """The model only ran in eval() mode with gradients on (its calls stand in)."""
        return _events.eval_mode_training(self.events, id(self.model))

    def iterations(self) -> list[IterationRecord]:
        """Iteration records interpreted from the event log (call after :meth:`close`)."""
        if self.clock is None:
            return []
        return _events.iterations(self.events, id(self.model), self.clock.seconds,
                                  phases=self.phases,
                                  batch_sampled=self.batch_sampled_steps is not None)

    def hyper(self) -> dict[str, Any]:
        """Hyper-parameters seen in the loop (optimizer, lr, DataLoader passes and size)."""
        out: dict[str, Any] = dict(self.optimizer_info)
        if self.primary is not None:
            out["lr_last"] = lr_of(self.primary)
        if self.other_steps:
            out["other_optimizer_steps"] = ", ".join(
                f"{name}×{count}" for name, count in self.other_steps.items()
            )
        out["skipped_steps"] = sum(1 for e in self.events if e[0] == SKIPPED)
        out.update(loader_hyper(self.loaders))
        return out



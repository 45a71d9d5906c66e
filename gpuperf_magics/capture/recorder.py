"""Find the training iterations of unchanged user code and timestamp them.

How (verified facts in ``shared/notes/capture.md``):

1. Global optimizer step hooks mark iteration boundaries. A re-entrancy counter ignores nested
   ``step`` calls (subclasses calling ``super().step()``); the first optimizer to finish a step
   is the *primary* one, the others are only counted.
2. Until the first step (the *discovery* phase), global module forward hooks see the top-level
   training calls (outermost module, ``training`` mode, grad enabled) and their batch. At the
   first step the model is the module owning the stepping optimizer's parameters; the global
   module hooks are then removed (they slow every module call and split ``torch.compile``
   graphs) and replaced by hooks on that one module, the outermost wrapper. A compiled
   (``OptimizedModule``) model is adopted at its first call, before Dynamo traces it, so the
   global hooks are never part of its guards.
3. Without any ``torch.optim`` step, the end of each backward pass marks iterations; without a
   backward pass, each top-level training forward call does.

Everything on the per-iteration path is a few attribute updates and one clock mark; all
interpretation happens in :meth:`Recorder.iterations` after the cell.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import sys
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from gpuperf_magics.capture.clock import Clock, make_clock, make_peak_memory
from gpuperf_magics.run import IterationRecord

__all__ = ["Recorder"]

#: Optimizer steps during which the model's forward calls are watched for the batch size and
#: micro-batches (steps-only mode); later steps reuse the last pattern.
BATCH_SAMPLE_STEPS = 32

#: Top-level calls of one module seen before any optimizer step, after which it is adopted
#: as the model even though nothing stepped yet (manual SGD loops, custom optimizers).
_ADOPT_AFTER_CALLS = 8

_is_grad_enabled = torch.is_grad_enabled
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)
_Tensor = torch.Tensor


def _first_tensor(obj: Any, min_dim: int = 0) -> torch.Tensor | None:
    """The first tensor (of at least ``min_dim`` dimensions) in args/kwargs-like containers,
    one level deep (cheap on purpose)."""
    if isinstance(obj, _Tensor):
        return obj if obj.dim() >= min_dim else None
    if isinstance(obj, (list, tuple)):
        for item in obj:
            if isinstance(item, _Tensor):
                if item.dim() >= min_dim:
                    return item
            elif isinstance(item, (list, tuple, dict)):
                found = _first_tensor(item, min_dim)
                if found is not None:
                    return found
    elif isinstance(obj, dict):
        return _first_tensor(tuple(obj.values()), min_dim)
    return None


def _batch_of(args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> int | None:
    """Dim 0 of the first input with a batch dimension (a leading scalar such as a
    temperature ``model(torch.tensor(2.0), x)`` is not the batch)."""
    t = _first_tensor(args, 1)
    if t is None and kwargs:
        t = _first_tensor(kwargs, 1)
    return None if t is None else int(t.shape[0])


def _output_grad_fn(output: Any) -> Any:
    """grad_fn of the first differentiable tensor of a forward's output (tensor/tuple/dict/obj)."""
    if isinstance(output, _Tensor):
        return output.grad_fn
    if isinstance(output, dict):
        items: Any = output.values()
    elif isinstance(output, (list, tuple)):
        items = output
    else:
        items = (getattr(output, k, None) for k in ("loss", "logits", "last_hidden_state"))
    for item in items:
        if isinstance(item, _Tensor) and item.grad_fn is not None:
            return item.grad_fn
    return None


def unwrap_model(module: nn.Module) -> nn.Module:
    """The user's network inside ``torch.compile``/DataParallel/DDP wrappers."""
    seen = 0
    while seen < 8:
        inner = getattr(module, "_orig_mod", None)
        if inner is None and isinstance(
            module, (nn.DataParallel, nn.parallel.DistributedDataParallel)
        ):
            inner = module.module
        if not isinstance(inner, nn.Module):
            return module
        module, seen = inner, seen + 1
    return module


def _is_compiled_wrapper(module: nn.Module) -> bool:
    return isinstance(getattr(module, "_orig_mod", None), nn.Module)


# Event codes of the log. One tuple per event: (code, token, batch, inside_step, module_id).
# FWD_EVAL: a call of the model in eval() mode with gradients on; it stands for FWD only when
# the model never ran in train() mode (a loop that forgot model.train() after validation).
# FWD_END_EVAL ends such a call (with --phases) and stands for FWD_END on the same terms.
# SYNC_END (DistributedDataParallel with --phases): DDP's gradient all-reduce has been waited
# for, at the end of its own end-of-backward callback, queued after the one marking BWD_END.
(FWD, FWD_END, BWD_START, BWD_END, STEP_START, STEP_END, SKIPPED, FWD_EVAL, FWD_END_EVAL,
 SYNC_END) = range(10)


class Recorder:
    """Context manager that installs the hooks, logs marks and removes every hook on exit.

    The hooks only append small tuples to an event log; :meth:`iterations` interprets it after
    the cell, so the timed path stays a few microseconds per iteration.

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
        self.model: nn.Module | None = None
        self.primary: Any = None
        self.other_steps: Counter[str] = Counter()
        self.optimizer_info: dict[str, Any] = {}
        self.example: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        self._example_from_eval = False  # the example came from an eval() call
        self.autocast = False
        self.loaders: dict[int, list[Any]] = {}  # id -> [loader, passes]
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
        self._seen: dict[int, list[Any]] = {}  # id -> [module, calls, example, autocast]
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
        warnings.filterwarnings(
            "ignore", message=r"Using `torch\.compile\(module\)` when there are global hooks",
            category=UserWarning,
        )
        self._warning_filter = warnings.filters[0]
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
                _global_forward_hook(module_mod, self._g_post),
            ]
            self._patch_grad_scaler()
            self._patch_dataloader()
            self._patch_process_start()
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
        with contextlib.suppress(ValueError):
            warnings.filters.remove(self._warning_filter)  # type: ignore[attr-defined]
            warnings._filters_mutated()  # type: ignore[attr-defined]
        if self.clock is not None:
            self.clock.finish()
        if self._memory is not None:
            try:
                self.peak_memory_gb = self._memory.peak_gib()
            except Exception:  # a figure for the offers table is not worth the run
                self.peak_memory_gb = None
            self._memory = None

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
        ids = {id(model), id(unwrap_model(model))} if model is not None else None
        head = self.events[:4096]  # a copy: the training thread appends meanwhile
        batch, found = 0, None
        for event in head:
            code = event[0]
            if code == STEP_END:
                if batch:
                    found = batch
                batch = 0
            elif code == FWD and not event[3] and (ids is None or event[4] in ids):
                batch += event[2] or 0
        return found

    def loader_length(self) -> int | None:
        """Batches per pass of the longest sized DataLoader iterated so far (None: none)."""
        try:
            lengths = [_safe_len(entry[0]) for entry in list(self.loaders.values())]
        except RuntimeError:  # the training thread added a loader meanwhile
            return None
        known = [n for n in lengths if n]
        return max(known) if known else None

    def _ensure_clock(self, device: torch.device | None) -> Clock:
        if self.clock is None:
            # Before the first timed call: the peak then counts the model, its gradients,
            # the optimizer state and the activations of the batch, and nothing earlier.
            try:
                self._memory = make_peak_memory(device)
                if self._memory is not None:
                    self._memory.start()
            except Exception:
                self._memory = None
            self.clock = make_clock(device, self.sync)
            self.clock.start()
        return self.clock

    # ------------------------------------------------------------------ patches
    def _patch_grad_scaler(self) -> None:
        """Notice AMP steps skipped by GradScaler: ``update()`` with no optimizer step before."""
        classes = [getattr(getattr(torch, "amp", None), "GradScaler", None)]
        classes.append(getattr(getattr(torch.cuda, "amp", None), "GradScaler", None))
        for cls in dict.fromkeys(c for c in classes if c is not None and "update" in vars(c)):
            original = cls.update

            def update(scaler: Any, *args: Any, _orig: Any = original, **kwargs: Any) -> Any:
                self._on_scaler_update()
                return _orig(scaler, *args, **kwargs)

            cls.update = update

            def restore(c: Any = cls, o: Any = original) -> None:
                c.update = o

            self._restore.append(restore)

    def _patch_dataloader(self) -> None:
        """Count passes over DataLoaders (epochs, dataset size): once per epoch, not per step."""
        loader_cls = torch.utils.data.DataLoader
        original = loader_cls.__iter__
        loaders = self.loaders

        def __iter__(loader: Any) -> Any:
            entry = loaders.setdefault(id(loader), [loader, 0])
            entry[1] += 1
            return original(loader)

        loader_cls.__iter__ = __iter__  # type: ignore[method-assign]
        self._restore.append(lambda: setattr(loader_cls, "__iter__", original))

    def _patch_process_start(self) -> None:
        """Notice worker processes the cell starts (``torch.multiprocessing.spawn``,
        accelerate's ``notebook_launcher``, Lightning's ``ddp_notebook``): their training
        happens where these hooks cannot see it. DataLoader workers are not counted."""
        import multiprocessing.process as mp_process

        cls = mp_process.BaseProcess
        original = cls.start
        workers = self.workers

        def start(proc: Any) -> None:
            target = getattr(proc, "_target", None)
            if getattr(target, "__name__", "") != "_worker_loop":  # a DataLoader worker
                args = getattr(proc, "_args", ())
                if getattr(target, "__module__", "") == "torch.multiprocessing.spawn" and args:
                    target = args[0]  # torch's _wrap(fn, rank, ...): the user's function
                workers.append(_callable_name(target))
            return original(proc)

        cls.start = start  # type: ignore[method-assign,assignment]
        self._restore.append(lambda: setattr(cls, "start", original))

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
            self._untraced_hooks = (_dynamo_disabled(self._opt_pre),
                                    _dynamo_disabled(self._opt_post))
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
        self.optimizer_info = {"optimizer": type(opt).__name__, "lr": _lr_of(opt)}
        owned = {id(p) for g in opt.param_groups for p in g["params"]}
        best, best_overlap = None, 0
        for module, *_ in self._seen.values():
            overlap = sum(1 for p in module.parameters() if id(p) in owned)
            if overlap > best_overlap:
                best, best_overlap = module, overlap
        if best is None and self.model is None and self._seen:
            best = max(self._seen.values(), key=lambda e: e[1])[0]
        if best is not None and best is not self.model:
            self._adopt(best)
        elif self.model is not None and self._timed_hooks and not self.phases:
            self._install_model_hooks(self.model, timed=False)  # steps now mark iterations
        self._global_off()
        self._ensure_clock(_device_of(self.model) or _opt_device(opt))

    # ------------------------------------------------------------------ discovery (global)
    def _g_pre(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        depth = self._depth
        self._depth = depth + 1
        if depth:
            if self._top is not None and not self._inner_autocast:
                # accelerate (and so the HF Trainer) enters autocast inside the model's
                # forward, after any hook on the model itself: look one call deeper.
                self._inner_autocast = _autocast_on()
            return
        if not _is_grad_enabled():
            return
        self._inner_autocast = False
        if not any(p.requires_grad for p in module.parameters()):
            # A loss, a transform or a frozen extractor is never the model; it must not pick
            # the clock either (a CPU transform would time a CUDA model on the host).
            return
        self._top = module
        self._top_token = self._ensure_clock(_device_of(module, args)).mark()
        if _is_compiled_wrapper(module):
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
        if entry is None or (entry[4] and module.training):
            # A training call's inputs and autocast state describe the model, not an eval
            # call's (a validation pass before the loop).
            calls = entry[1] if entry is not None else 0
            entry = self._seen[id(module)] = [module, calls, (tuple(args), dict(kwargs)),
                                              _autocast_on() or self._inner_autocast,
                                              not module.training]
        if not module.training:
            # Only a fallback (see FWD_EVAL); never enough to adopt a model by its calls.
            self.events.append((FWD_EVAL, self._top_token, _batch_of(args, kwargs),
                                self._step_depth > 0, id(module)))
            self._after_forward(output)
            return
        entry[1] += 1
        self.events.append((FWD, self._top_token, _batch_of(args, kwargs),
                            self._step_depth > 0, id(module)))
        self._after_forward(output)
        if self.primary is None and self.model is None and entry[1] >= _ADOPT_AFTER_CALLS:
            self._adopt(module, timed=True)

    def _global_off(self) -> None:
        from torch.nn.modules import module as module_mod

        for h in self._global_handles:
            h.remove()
            # torch's handle forgets this dict (2.13): a stale id would keep every module
            # off its fast path and make torch.compile'd modules warn for the process's life.
            getattr(module_mod, "_global_forward_hooks_with_kwargs", {}).pop(h.id, None)
        self._global_handles = []

    def _adopt(self, module: nn.Module, timed: bool = False) -> None:
        """Make ``module`` the model: per-model hooks on it, global module hooks removed."""
        self.model = module
        entry = self._seen.get(id(module))
        if entry is not None and (entry[2][0] or entry[2][1]):
            # (Global hooks of torch < 2.6 see no keyword inputs: an empty example is left
            # for the model's own hooks to fill.)
            self.example, self.autocast = entry[2], entry[3]
            self._example_from_eval = entry[4]
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
        elif self.example is not None and _first_tensor(self.example[0], 1) is not None:
            # The model takes its batch positionally: a hook without kwargs costs half as much
            # (torch builds no kwargs path for it): ~1.6 µs instead of ~3.5 µs per call.
            self._model_handles = [module.register_forward_pre_hook(self._m_pre_positional)]
        else:
            self._model_handles = [module.register_forward_pre_hook(self._m_pre,
                                                                    with_kwargs=True)]

    def _log_forward(self, module: nn.Module, args: Any, kwargs: Any, token: int | None) -> None:
        if self.example is None or (self._example_from_eval and module.training):
            self.example = (tuple(args), dict(kwargs or {}))
            self.autocast = _autocast_on()
            self._example_from_eval = not module.training
        self.events.append((FWD if module.training else FWD_EVAL, token,
                            _batch_of(args, kwargs), self._step_depth > 0, id(module)))

    def _m_pre(self, module: nn.Module, args: Any, kwargs: Any) -> None:
        # Steps-only path: the cheapest hook that still sees every micro-batch.
        if _is_grad_enabled():
            self._log_forward(module, args, kwargs, None)

    def _m_pre_positional(self, module: nn.Module, args: Any) -> None:
        if _is_grad_enabled():
            first = args[0] if args else None
            # Fast path for the common call model(x): no container walk.
            batch = first.shape[0] if type(first) is _Tensor and first.dim() else (
                _batch_of(args, None))
            self.events.append((FWD if module.training else FWD_EVAL, None, batch,
                                self._step_depth > 0, id(module)))

    def _m_pre_timed(self, module: nn.Module, args: Any, kwargs: Any) -> None:
        if _is_grad_enabled():
            token = self._ensure_clock(_device_of(module, args)).mark()
            self._log_forward(module, args, kwargs, token)

    def _m_post(self, module: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        if _is_grad_enabled() and self.clock is not None:
            if self.phases:
                code = FWD_END if module.training else FWD_END_EVAL
                self.events.append((code, self.clock.mark()))
            self._after_forward(output)

    def _after_forward(self, output: Any) -> None:
        grad_fn = _output_grad_fn(output)
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
        codes = {e[0] for e in self.events}
        if STEP_END in codes:
            return "optimizer_step"
        if BWD_END in codes:
            return "backward"
        model_id = id(self.model)
        if sum(1 for e in self.events if e[0] == FWD and e[4] == model_id and e[1] is not None) > 1:
            return "forward"
        return "none"

    @property
    def eval_mode_training(self) -> bool:
        """The model only ran in eval() mode with gradients on (its calls stand in)."""
        model_id = id(self.model)
        codes = {e[0] for e in self.events if e[0] in (FWD, FWD_EVAL) and e[4] == model_id}
        return codes == {FWD_EVAL} and bool({STEP_END, BWD_END} & {e[0] for e in self.events})

    def _model_events(self) -> list[tuple[Any, ...]]:
        """The log with other modules' forward calls left out, and eval() calls of the model
        standing for training calls only when it never ran in train() mode."""
        model_id = id(self.model)
        stand_in = self.eval_mode_training
        out = []
        for e in self.events:
            if e[0] == FWD_END_EVAL:
                if not stand_in:
                    continue
                e = (FWD_END, *e[1:])
            elif e[0] == FWD_EVAL:
                if not stand_in or e[4] != model_id:
                    continue
                e = (FWD, *e[1:])
            elif e[0] == FWD and e[4] != model_id:
                continue
            out.append(e)
        return out

    def iterations(self) -> list[IterationRecord]:
        """Iteration records interpreted from the event log (call after :meth:`close`)."""
        clock = self.clock
        detection = self.detection
        if clock is None or detection == "none":
            return []
        sec = clock.seconds
        events = self._model_events()
        if detection == "forward":
            starts = [e for e in events if e[0] == FWD and e[1] is not None]
            return [
                IterationRecord(i, max(sec(b[1]) - sec(a[1]), 0.0), a[2])
                for i, (a, b) in enumerate(itertools.pairwise(starts))
            ]
        ends = {STEP_END, SKIPPED} if detection == "optimizer_step" else {BWD_END}
        records: list[IterationRecord] = []
        first_fwd = next((e[1] for e in events if e[0] == FWD and e[1] is not None), None)
        prev: int | None = first_fwd
        chunk: list[tuple[Any, ...]] = []
        for e in events:
            if e[0] not in ends:
                chunk.append(e)
                continue
            start_s = sec(prev) if prev is not None else 0.0
            fwds = [c for c in chunk if c[0] == FWD]
            if fwds:
                # Forwards inside step() run in a closure (LBFGS, Lightning): one batch
                # however often the closure is evaluated. Forwards outside are micro-batches
                # of their own (Lightning's accumulation runs the last one in the closure).
                batches = [c[2] for c in fwds if not c[3]]
                batches += [c[2] for c in fwds if c[3]][:1]
                samples = sum(b or 0 for b in batches) or None
                micro = len(batches)
            elif self.batch_sampled_steps is not None and records:
                # After the sampled steps the model hook is gone: same batch as before.
                samples, micro = records[-1].samples, records[-1].micro_batches or 0
            else:
                samples, micro = None, 0
            phases = _phases(chunk, start_s, sec(e[1]), sec) if self.phases else None
            records.append(IterationRecord(
                len(records), max(sec(e[1]) - start_s, 0.0), samples, False, phases,
                e[0] == SKIPPED, micro,
            ))
            prev, chunk = e[1], []
        return records

    def hyper(self) -> dict[str, Any]:
        """Hyper-parameters seen in the loop (optimizer, lr, DataLoader passes and size)."""
        out: dict[str, Any] = dict(self.optimizer_info)
        if self.primary is not None:
            out["lr_last"] = _lr_of(self.primary)
        if self.other_steps:
            out["other_optimizer_steps"] = ", ".join(
                f"{name}×{count}" for name, count in self.other_steps.items()
            )
        out["skipped_steps"] = sum(1 for e in self.events if e[0] == SKIPPED)
        if self.loaders:
            loader, passes = max(
                self.loaders.values(), key=lambda e: (e[1], _safe_len(e[0].dataset) or 0)
            )
            out["epochs_seen"] = passes
            out["dataset_size"] = _samples_per_epoch(loader)
            out["iterations_per_epoch"] = _safe_len(loader)
            out["drop_last"] = bool(getattr(loader, "drop_last", False))
            out["loader_batch_size"] = loader.batch_size
            out["dataloader_workers"] = loader.num_workers
        return out


def _callable_name(fn: Any) -> str:
    """``fn``'s name as a user wrote it (``train_worker``), through ``functools.partial``."""
    fn = getattr(fn, "func", fn)
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or fn)


def _samples_per_epoch(loader: Any) -> int | None:
    """Samples one pass of ``loader`` visits: its sampler's length (a subset, a distributed
    shard), else the dataset's. A custom batch sampler is asked for its own sampler."""
    sampler = getattr(loader, "sampler", None)
    if getattr(loader, "batch_size", None) is None:  # a custom batch_sampler
        sampler = getattr(getattr(loader, "batch_sampler", None), "sampler", None)
    size = _safe_len(sampler) if sampler is not None else None
    return size if size is not None else _safe_len(loader.dataset)


def _phases(
    chunk: list[tuple[Any, ...]], start: float, end: float, sec: Callable[[int], float]
) -> dict[str, float]:
    """Split one iteration into data / forward / loss / backward / other / optimizer seconds.

    ``data`` is the gap before each forward (loading, zero_grad), ``loss`` the gap from the
    forward's end to its backward, ``other`` from the last backward to the optimizer step.
    A DDP model adds ``sync``: the gradient all-reduce wait after the backward pass.
    """
    out = dict.fromkeys(("data", "forward", "loss", "backward", "other", "optimizer"), 0.0)
    if any(e[0] == SYNC_END for e in chunk):
        out["sync"] = 0.0
    cursor, state = start, "other"
    gap_kind = {FWD: "data", BWD_START: "loss", STEP_START: "other"}
    span_kind = {FWD_END: "forward", BWD_END: "backward", SYNC_END: "sync"}
    for e in chunk:
        code, token = e[0], e[1]
        if token is None:
            continue
        t = sec(token)
        if code in gap_kind:
            out[gap_kind[code] if state != "step" else "optimizer"] += max(t - cursor, 0.0)
            state = "step" if code == STEP_START else "span"
        elif code in span_kind:
            out[span_kind[code]] += max(t - cursor, 0.0)
            state = "other"
        cursor = t
    out["optimizer" if state == "step" else "other"] += max(end - cursor, 0.0)
    return out


def _global_forward_hook(module_mod: Any, hook: Callable[..., None]) -> Any:
    """Register ``hook(module, args, kwargs, output)`` as a global always-called forward hook.

    Global hooks take ``with_kwargs`` from torch 2.6 on; before, the hook sees ``(module, args,
    output)`` and the keyword arguments of the call are not visible (the per-model hooks
    installed at adoption see them on every torch >= 2.0). A forward that raised gives the hook
    no output, which ``hook`` receives as ``(module, args, output)`` either way.
    """
    register = module_mod.register_module_forward_hook
    if "with_kwargs" in inspect.signature(register).parameters:
        return register(hook, with_kwargs=True, always_call=True)

    def without_kwargs(module: nn.Module, args: Any, output: Any) -> None:
        if output is None:  # the forward raised (or returned nothing)
            hook(module, args, output)
        else:
            hook(module, args, {}, output)

    return register(without_kwargs, always_call=True)


def _dynamo_disabled(fn: Callable[..., None]) -> Callable[..., None]:
    disable = getattr(getattr(torch, "compiler", None), "disable", None)
    return disable(fn) if disable is not None else fn


def _device_of(module: nn.Module | None, args: Any = None) -> torch.device | None:
    if module is not None:
        for p in module.parameters():
            return p.device
    t = _first_tensor(args) if args is not None else None
    return t.device if t is not None else None


def _lr_of(opt: Any) -> float | None:
    try:
        lr = opt.param_groups[0].get("lr")
        return float(lr) if lr is not None else None
    except (AttributeError, IndexError, TypeError, ValueError):
        return None


def _opt_device(opt: Any) -> torch.device | None:
    for g in opt.param_groups:
        for p in g["params"]:
            return p.device
    return None


def _safe_len(obj: Any) -> int | None:
    try:
        return len(obj)
    except TypeError:
        return None


def _autocast_on() -> bool:
    try:
        return bool(torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("cpu"))
    except TypeError:  # torch < 2.4: no device argument
        return bool(torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled())

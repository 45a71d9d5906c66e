"""The recorder's event log and what it means: iterations, their phases, what marked them.

The hooks append plain tuples (the cheapest record on the timed path):
``(code, token)`` for a clock mark and ``(code, token, batch, inside_step, module_id)`` for a
forward call. Everything here runs after the cell, where each tuple becomes an :class:`Event`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from gpuperf_magics.run import IterationRecord

# Event codes. FWD_EVAL: a call of the model in eval() mode with gradients on; it stands for
# FWD only when the model never ran in train() mode (a loop that forgot model.train() after
# validation). FWD_END_EVAL ends such a call (with --phases) and stands for FWD_END on the
# same terms. SYNC_END (DistributedDataParallel with --phases): DDP's gradient all-reduce has
# been waited for, at the end of its own end-of-backward callback, queued after the one
# marking BWD_END.
(FWD, FWD_END, BWD_START, BWD_END, STEP_START, STEP_END, SKIPPED, FWD_EVAL, FWD_END_EVAL,
 SYNC_END) = range(10)


class Event(NamedTuple):
    """One entry of the log.

    Attributes
    ----------
    code : int
        One of the event codes (``FWD``, ``STEP_END`` ..).
    token : int or None
        The clock mark; None for a forward call seen by an untimed hook.
    batch : int or None
        Samples of a forward call's input (dim 0 of its first batched tensor).
    inside_step : bool
        The forward ran inside ``optimizer.step()`` (a closure: LBFGS, Lightning).
    module_id : int or None
        ``id()`` of the module called.
    """

    code: int
    token: int | None
    batch: int | None = None
    inside_step: bool = False
    module_id: int | None = None


def recent_batch(events: Sequence[tuple[Any, ...]], model_ids: set[int] | None) -> int | None:
    """Samples of the last complete optimizer step in ``events`` (the model's training calls
    between two steps, micro-batches summed; ``model_ids``: the model and what it wraps, None
    while not known), or None before a complete step."""
    batch, found = 0, None
    for event in events:
        code = event[0]
        if code == STEP_END:
            if batch:
                found = batch
            batch = 0
        elif code == FWD and not event[3] and (model_ids is None or event[4] in model_ids):
            batch += event[2] or 0
    return found


def detection(events: Sequence[tuple[Any, ...]], model_id: int) -> str:
    """What marked the iterations: optimizer_step, backward, forward or none."""
    codes = {e[0] for e in events}
    if STEP_END in codes:
        return "optimizer_step"
    if BWD_END in codes:
        return "backward"
    if sum(1 for e in events if e[0] == FWD and e[4] == model_id and e[1] is not None) > 1:
        return "forward"
    return "none"


def eval_mode_training(events: Sequence[tuple[Any, ...]], model_id: int) -> bool:
    """The model only ran in eval() mode with gradients on (its calls stand in)."""
    codes = {e[0] for e in events if e[0] in (FWD, FWD_EVAL) and e[4] == model_id}
    return codes == {FWD_EVAL} and bool({STEP_END, BWD_END} & {e[0] for e in events})


def model_events(events: Iterable[tuple[Any, ...]], model_id: int,
                 stand_in: bool) -> list[Event]:
    """The log with other modules' forward calls left out, and eval() calls of the model
    standing for training calls only when ``stand_in`` (it never ran in train() mode)."""
    out = []
    for raw in events:
        e = Event(*raw)
        if e.code == FWD_END_EVAL:
            if not stand_in:
                continue
            e = e._replace(code=FWD_END)
        elif e.code == FWD_EVAL:
            if not stand_in or e.module_id != model_id:
                continue
            e = e._replace(code=FWD)
        elif e.code == FWD and e.module_id != model_id:
            continue
        out.append(e)
    return out


def iterations(events: Sequence[tuple[Any, ...]], model_id: int, sec: Callable[[int], float],
               *, phases: bool, batch_sampled: bool) -> list[IterationRecord]:
    """The iteration records of a raw log: marked by what :func:`detection` finds, from the
    events of the model ``model_id`` (``sec``: the clock's token → seconds; ``phases``: split
    each iteration; ``batch_sampled``: see :func:`step_iterations`)."""
    marked_by = detection(events, model_id)
    if marked_by == "none":
        return []
    mine = model_events(events, model_id, eval_mode_training(events, model_id))
    if marked_by == "forward":
        return forward_iterations(mine, sec)
    ends = {STEP_END, SKIPPED} if marked_by == "optimizer_step" else {BWD_END}
    return step_iterations(mine, sec, ends=ends, phases=phases, batch_sampled=batch_sampled)


def forward_iterations(events: Sequence[Event],
                       sec: Callable[[int], float]) -> list[IterationRecord]:
    """Iterations marked by the model's timed forward calls alone (no backward, no step)."""
    starts = [e for e in events if e.code == FWD and e.token is not None]
    return [
        IterationRecord(i, max(sec(b.token) - sec(a.token), 0.0), a.batch)  # type: ignore[arg-type]
        for i, (a, b) in enumerate(itertools.pairwise(starts))
    ]


def step_iterations(events: Sequence[Event], sec: Callable[[int], float], *, ends: set[int],
                    phases: bool, batch_sampled: bool) -> list[IterationRecord]:
    """Iterations ended by the events of ``ends`` (optimizer steps or backward passes).

    ``batch_sampled``: the model's calls were watched for the first steps only; a later step
    without calls had the batch of the step before.
    """
    records: list[IterationRecord] = []
    prev = next((e.token for e in events if e.code == FWD and e.token is not None), None)
    chunk: list[Event] = []
    for e in events:
        if e.code not in ends:
            chunk.append(e)
            continue
        end = e.token
        assert end is not None  # a step or backward end is always a clock mark
        start_s = sec(prev) if prev is not None else 0.0
        samples, micro = _samples(chunk, records, batch_sampled)
        split = _phases(chunk, start_s, sec(end), sec) if phases else None
        records.append(IterationRecord(
            len(records), max(sec(end) - start_s, 0.0), samples, False, split,
            e.code == SKIPPED, micro,
        ))
        prev, chunk = end, []
    return records


def _samples(chunk: Sequence[Event], records: Sequence[IterationRecord],
             batch_sampled: bool) -> tuple[int | None, int]:
    """Samples and micro-batches of one iteration from its forward calls."""
    fwds = [c for c in chunk if c.code == FWD]
    if fwds:
        # Forwards inside step() run in a closure (LBFGS, Lightning): one batch however
        # often the closure is evaluated. Forwards outside are micro-batches of their own
        # (Lightning's accumulation runs the last one in the closure).
        batches = [c.batch for c in fwds if not c.inside_step]
        batches += [c.batch for c in fwds if c.inside_step][:1]
        return sum(b or 0 for b in batches) or None, len(batches)
    if batch_sampled and records:
        # After the sampled steps the model hook is gone: same batch as before.
        return records[-1].samples, records[-1].micro_batches or 0
    return None, 0


def _phases(
    chunk: Sequence[Event], start: float, end: float, sec: Callable[[int], float]
) -> dict[str, float]:
    """Split one iteration into data / forward / loss / backward / other / optimizer seconds.

    ``data`` is the gap before each forward (loading, zero_grad), ``loss`` the gap from the
    forward's end to its backward, ``other`` from the last backward to the optimizer step.
    A DDP model adds ``sync``: the gradient all-reduce wait after the backward pass.
    """
    out = dict.fromkeys(("data", "forward", "loss", "backward", "other", "optimizer"), 0.0)
    if any(e.code == SYNC_END for e in chunk):
        out["sync"] = 0.0
    cursor, state = start, "other"
    gap_kind = {FWD: "data", BWD_START: "loss", STEP_START: "other"}
    span_kind = {FWD_END: "forward", BWD_END: "backward", SYNC_END: "sync"}
    for e in chunk:
        code, token = e.code, e.token
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

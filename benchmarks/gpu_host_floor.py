"""What small networks cost the host on a GPU: operators and kernels per iteration, and time.

    PYTHONPATH=. python benchmarks/gpu_host_floor.py --device cuda:0
    PYTHONPATH=. python benchmarks/gpu_host_floor.py --device cpu      # counts and plumbing only

For each network of the CPU→GPU zoo (``cpu_to_gpu_zoo.zoo``) at a small and a large batch:

- ``on-device``: the loop with its batch already on the device, synchronised once at the end:
  at a small batch the GPU idles between kernels and this is the host's time to issue one
  iteration (Python, dispatcher, autograd, launches);
- ``copy``: the batch copied from the CPU every step, as the zoo's loop and a loader's batches
  are (a copy from pageable memory waits for the GPU, so host and GPU no longer overlap);
- ``profiled``: ``copy`` under ``profile_training``, and its ratio to ``copy`` (the capture's
  overhead on a host-bound loop);
- per iteration, from ``torch.profiler``: ``aten::`` operators, kernel launches (runtime launch
  calls) and device kernels, beside what ``model.roofline.iteration_ops`` counts and the host
  seconds ``roofline.host_seconds`` gives.

``--zoo heldout`` measures the networks the host cost was not fitted to
(``cpu_to_gpu_zoo.heldout``).

Then the host's cost of one tiny operator, on a CPU tensor (dispatch only) and on the device
(dispatch and launch), with and without autograd. Medians of alternating rounds, one process.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _loop(model: Any, opt: Any, x: Any, y: Any, device: str, steps: int, copy: bool) -> None:
    from torch import nn

    for _ in range(steps):
        xb, yb = (x.to(device), y.to(device)) if copy else (x, y)
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()


def _timed(fn: Any, device: str, steps: int) -> float:
    _sync(device)
    t0 = time.perf_counter()
    fn(steps)
    _sync(device)
    return (time.perf_counter() - t0) / steps


def _counts(model: Any, opt: Any, x: Any, y: Any, device: str) -> dict[str, float]:
    """Per iteration over 5 profiled iterations: aten operators, launch calls, device kernels."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device.startswith("cuda"):
        activities.append(ProfilerActivity.CUDA)
    xd, yd = x.to(device), y.to(device)
    _loop(model, opt, xd, yd, device, 2, copy=False)
    _sync(device)
    with profile(activities=activities) as prof:
        _loop(model, opt, xd, yd, device, 5, copy=False)
        _sync(device)
    events = prof.events()
    aten = sum(1 for e in events if e.name.startswith("aten::"))
    top = sum(1 for e in events if e.name.startswith("aten::") and e.cpu_parent is None)
    launches = sum(1 for e in events if "LaunchKernel" in e.name or "LaunchCooperative" in e.name)
    kernels = sum(1 for e in events if e.device_type == torch.autograd.DeviceType.CUDA)
    return {"aten": aten / 5, "aten_top": top / 5, "launches": launches / 5,
            "kernels": kernels / 5}


def _tiny_op_us(device: str, grad: bool, n: int = 3000) -> float:
    import torch

    x = torch.ones(4, device=device, requires_grad=grad)
    with torch.set_grad_enabled(grad):
        for _ in range(200):
            y = x * 1.0001
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(n):
            y = x * 1.0001
        _sync(device)
    del y
    return (time.perf_counter() - t0) / n * 1e6


def _measure(net: Any, batch: int, device: str, steps: int, rounds: int,
             store: Path) -> tuple[dict[str, float], dict[str, float], dict[str, Any]]:
    """Median ms per iteration of the three loops, the profiler's counts, and the run's
    architecture (with its optimizer's name) for ``net`` at ``batch``."""
    import torch

    import gpuperf_magics as gm

    torch.manual_seed(0)
    model = net.build().to(device)
    opt = net.optimizer(model)
    x, y = net.inputs(batch)
    xd, yd = x.to(device), y.to(device)
    _loop(model, opt, xd, yd, device, 5, copy=False)  # warm-up: cuDNN, the allocator

    def on_device(n: int) -> None:
        _loop(model, opt, xd, yd, device, n, copy=False)

    def copied(n: int) -> None:
        _loop(model, opt, x, y, device, n, copy=True)

    times: dict[str, list[float]] = {"dev": [], "copy": [], "prof": []}
    arch: dict[str, Any] = {}
    for _ in range(rounds):
        times["dev"].append(_timed(on_device, device, steps))
        times["copy"].append(_timed(copied, device, steps))
        _sync(device)
        with gm.profile_training(name=net.name, store=store) as run:
            t0 = time.perf_counter()
            copied(steps)
            _sync(device)
            times["prof"].append((time.perf_counter() - t0) / steps)
        arch = dict(run.architecture)
    arch["optimizer"] = type(opt).__name__
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    return med, _counts(model, opt, x, y, device), arch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--batches", default="8,256")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--zoo", choices=("tuned", "heldout", "all"), default="tuned",
                        help="the zoo the host cost was fitted to, the held-out one, or both")
    args = parser.parse_args()
    import torch
    from cpu_to_gpu_zoo import heldout, zoo

    from gpuperf_magics.model.roofline import host_seconds, iteration_ops

    device = args.device
    name = torch.cuda.get_device_name(0) if device.startswith("cuda") else "CPU"
    print(f"torch {torch.__version__}, {name}, {torch.get_num_threads()} threads", flush=True)
    print("network batch | on-device copy profiled ms/it (profiled/copy) | aten top launches "
          "kernels per it | estimate: model kernels, optimizer kernels, all kernels, host ms",
          flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        nets = {"tuned": zoo(), "heldout": heldout(), "all": zoo() + heldout()}[args.zoo]
        for net in nets:
            for batch in (int(b) for b in args.batches.split(",")):
                med, counts, arch = _measure(net, batch, device, args.steps, args.rounds,
                                             Path(tmp) / "floor.sqlite")
                ops = iteration_ops(arch)
                print(f"{net.name:<16} {batch:>5} | {med['dev']:7.3f} {med['copy']:7.3f} "
                      f"{med['prof']:7.3f} ({med['prof'] / med['copy']:.3f}) | "
                      f"{counts['aten']:5.0f} {counts['aten_top']:4.0f} {counts['launches']:4.0f} "
                      f"{counts['kernels']:4.0f} | {ops['model']:4d} {ops['optimizer_kernels']:3d} "
                      f"{ops['kernels']:4d} {host_seconds(arch) * 1e3:6.3f}", flush=True)
    for dev in dict.fromkeys(["cpu", device]):
        for grad in (False, True):
            print(f"tiny op on {dev}, autograd {'on' if grad else 'off'}: "
                  f"{statistics.median(_tiny_op_us(dev, grad) for _ in range(5)):.2f} µs",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

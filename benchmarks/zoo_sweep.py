"""Profile the CPU→GPU zoo (``cpu_to_gpu_zoo.zoo``) over a grid of batch sizes on one device.

    PYTHONPATH=. python benchmarks/zoo_sweep.py --device cuda:0 --store sweep.sqlite

One run per network, batch and precision (``--precisions``: PyTorch's default, ``fp32`` with TF32
off, ``tf32``, autocast ``bf16`` or ``fp16``), stored like any profiled cell, one printed line
each. On a GPU the
small batches show the per-iteration floor (dispatch and kernel launches) that
``model/roofline.py`` estimates from the architecture; the large ones the compute-bound slope.
A batch that runs out of memory is noted and skipped.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from cpu_to_gpu_zoo import PRECISIONS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--batches", default="8,32,128,512,2048")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=0.0,
                        help="run each configuration at least this long (more steps than "
                        "--steps where needed): NVML's busy share needs about a second")
    parser.add_argument("--networks", default="",
                        help="comma-separated names from the zoo and the held-out zoo "
                        "(default: the zoo; 'all': the zoo and the held-out zoo; 'fresh': "
                        "the networks of cpu_to_gpu_zoo.fresh)")
    parser.add_argument("--precisions", default="default",
                        help="comma-separated from " + ", ".join(PRECISIONS))
    args = parser.parse_args()
    import torch
    from cpu_to_gpu_zoo import fresh, heldout, profile, zoo

    precisions = args.precisions.split(",")
    if not set(precisions) <= set(PRECISIONS):
        parser.error(f"--precisions: each one of {', '.join(PRECISIONS)}")

    batches = [int(b) for b in args.batches.split(",")]
    every = {net.name: net for net in zoo() + heldout() + fresh()}
    nets = (zoo() + heldout() if args.networks == "all" else fresh()
            if args.networks == "fresh"
            else [every[n] for n in args.networks.split(",")] if args.networks else zoo())
    print("network, batch, precision, median ms/it, warm-up it, GPU busy", flush=True)
    for net, batch, precision in itertools.product(nets, batches, precisions):
        try:
            steps = args.steps
            if args.seconds > 0:  # a short probe says how many steps fill the time
                probe = profile(net, args.store.with_suffix(".probe"), args.device,
                                batch, 10, precision)
                steps = max(steps, int(args.seconds / max(probe.median_s, 1e-4)))
            run = profile(net, args.store, args.device, batch, steps, precision)
        except torch.OutOfMemoryError:
            print(f"{net.name:<18} {batch:>6} {precision:<7}  out of memory", flush=True)
            torch.cuda.empty_cache()
            continue
        steady = [it.duration_s for it in run.iterations if not it.warmup]
        print(f"{net.name:<18} {batch:>6} {precision:<7} "
              f"{statistics.median(steady) * 1e3:9.3f} "
              f"{len(run.iterations) - len(steady):>4} {run.quality.get('device_busy')}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

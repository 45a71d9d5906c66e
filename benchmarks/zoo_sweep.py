"""Profile the CPU→GPU zoo (``cpu_to_gpu_zoo.zoo``) over a grid of batch sizes on one device.

    PYTHONPATH=. python benchmarks/zoo_sweep.py --device cuda:0 --store sweep.sqlite

One run per network and batch, stored like any profiled cell, one printed line each. On a GPU the
small batches show the per-iteration floor (dispatch and kernel launches) that
``model/roofline.py`` estimates from the architecture; the large ones the compute-bound slope.
A batch that runs out of memory is noted and skipped.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


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
                        "(default: the zoo)")
    args = parser.parse_args()
    import torch
    from cpu_to_gpu_zoo import heldout, profile, zoo

    batches = [int(b) for b in args.batches.split(",")]
    every = {net.name: net for net in zoo() + heldout()}
    nets = [every[n] for n in args.networks.split(",")] if args.networks else zoo()
    print("network, batch, median ms/it, warm-up it, GPU busy", flush=True)
    for net in nets:
        for batch in batches:
            try:
                steps = args.steps
                if args.seconds > 0:  # a short probe says how many steps fill the time
                    probe = profile(net, args.store.with_suffix(".probe"), args.device,
                                    batch, 10)
                    steps = max(steps, int(args.seconds / max(probe.median_s, 1e-4)))
                run = profile(net, args.store, args.device, batch, steps)
            except torch.OutOfMemoryError:
                print(f"{net.name:<18} {batch:>6}  out of memory", flush=True)
                torch.cuda.empty_cache()
                continue
            steady = [it.duration_s for it in run.iterations if not it.warmup]
            print(f"{net.name:<18} {batch:>6} {statistics.median(steady) * 1e3:9.3f} "
                  f"{len(run.iterations) - len(steady):>4} {run.quality.get('device_busy')}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

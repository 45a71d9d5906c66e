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
    args = parser.parse_args()
    import torch
    from cpu_to_gpu_zoo import profile, zoo

    batches = [int(b) for b in args.batches.split(",")]
    print("network, batch, median ms/it, warm-up it", flush=True)
    for net in zoo():
        for batch in batches:
            try:
                run = profile(net, args.store, args.device, batch, args.steps)
            except torch.OutOfMemoryError:
                print(f"{net.name:<18} {batch:>6}  out of memory", flush=True)
                torch.cuda.empty_cache()
                continue
            steady = [it.duration_s for it in run.iterations if not it.warmup]
            print(f"{net.name:<18} {batch:>6} {statistics.median(steady) * 1e3:9.3f} "
                  f"{len(run.iterations) - len(steady):>4}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Check the CUDA paths for real, on a machine with an NVIDIA GPU (under 5 minutes).

    python benchmarks/gpu_check.py

1. Profiles a small CNN on ``cuda:0`` (CUDA-event timing, then ``--sync`` timing) while the loop
   records its own reference CUDA events after every ``opt.step()``; the recorded iteration times
   must match the reference within 2 % in total and per steady iteration (median).
2. Checks that every hardware field of the run is filled (NVML + torch + catalog).
3. Checks the architecture description on CUDA and that no hook is left behind.
4. Writes the store to a temporary file and reads it back.

Prints one line per check and exits non-zero if any fails.
"""

from __future__ import annotations

import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

import gpuperf_magics as gm
from gpuperf_magics.hardware import detect

FAILURES: list[str] = []

#: detect() cannot measure these on the device; the capture fills them from the catalog.
CATALOG_ONLY = {"gpu_tf32_tflops", "gpu_fp16_tflops", "gpu_release_year"}


def check(ok: bool, label: str, detail: str = "") -> None:
    print(f"[{'ok' if ok else 'FAIL'}] {label}{': ' + detail if detail else ''}")
    if not ok:
        FAILURES.append(label)


def cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(128, 256, 3, padding=1), nn.BatchNorm2d(256), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 10),
    ).cuda()


def profiled_loop(store: Path, sync: bool, steps: int = 60) -> tuple[gm.Run, list[float]]:
    model = cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(128, 3, 64, 64, device="cuda")
    y = torch.randint(0, 10, (128,), device="cuda")
    marks = []
    with gm.profile_training(name="gpu-check-cnn", store=store, sync=sync) as run:
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            opt.step()
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            marks.append(ev)
    torch.cuda.synchronize()
    reference = [a.elapsed_time(b) / 1e3 for a, b in itertools.pairwise(marks)]
    return run, reference


def compare(run: gm.Run, reference: list[float], label: str) -> None:
    ours = [it.duration_s for it in run.iterations[1:]]  # iteration 0 has no reference start
    check(len(ours) == len(reference), f"{label}: iteration count", f"{len(ours)} vs {len(reference)}")
    n = min(len(ours), len(reference))
    total_ours, total_ref = sum(ours[:n]), sum(reference[:n])
    err = abs(total_ours - total_ref) / total_ref
    check(err <= 0.02, f"{label}: total vs CUDA events within 2 %",
          f"{total_ours * 1e3:.2f} ms vs {total_ref * 1e3:.2f} ms ({err:.2%})")
    steady = [abs(a - b) / b for a, b in zip(ours[5:n], reference[5:n])]
    med = statistics.median(steady) if steady else float("nan")
    check(med <= 0.02, f"{label}: median per-iteration deviation <= 2 %", f"{med:.2%}")
    print(f"       {run}")


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: this check needs a machine with an NVIDIA GPU")
        return 2
    t0 = time.time()
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}")
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "gpu.sqlite"
        run, ref = profiled_loop(store, sync=False)
        check(run.quality["timing_method"] == "cuda_events", "event timing selected",
              run.quality["timing_method"])
        compare(run, ref, "cuda events")
        run_sync, ref_sync = profiled_loop(store, sync=True)
        check(run_sync.quality["timing_method"] == "synchronize+perf_counter", "--sync timing")
        compare(run_sync, ref_sync, "--sync")

        missing = sorted(k for k, v in run.hardware.items() if k.startswith("gpu_") and v is None)
        check(not missing, "every gpu_* hardware field filled", ", ".join(missing) or "all")
        for key in ("gpu_name", "gpu_uuid", "gpu_sm_count", "gpu_cuda_cores", "gpu_clock_mhz",
                    "gpu_bandwidth_gbs", "gpu_fp32_tflops", "gpu_driver", "gpu_power_limit_w"):
            print(f"       {key} = {run.hardware.get(key)!r}")
        hw = detect("cuda:0", refresh=True)
        raw_missing = sorted(k for k, v in hw.as_features().items()
                             if k.startswith("gpu_") and v is None and k not in CATALOG_ONLY)
        check(not raw_missing, "detect(): NVML/torch fields filled", ", ".join(raw_missing) or "all")
        check(run.gpu == hw.gpu.name and run.gpu_count == 1 and run.device == "cuda:0",
              "run device fields", f"{run.gpu} × {run.gpu_count} on {run.device}")
        arch = run.architecture
        check(bool(arch.get("arch_flops_fwd_bwd")) and arch.get("arch_depth") == 4,
              "architecture on CUDA", f"flops/sample {arch.get('arch_flops_fwd_bwd')}, "
              f"depth {arch.get('arch_depth')}, method {arch.get('arch_flops_method')}")
        from torch.nn.modules import module as module_mod
        from torch.optim import optimizer as optim_mod

        check(not module_mod._has_any_global_hook()
              and not optim_mod._global_optimizer_post_hooks, "no hooks left")
        stored = gm.Store(store).runs()
        check(len(stored) == 2 and set(stored["gpu"]) == {run.gpu}, "store round trip",
              f"{len(stored)} runs")
    print(f"done in {time.time() - t0:.0f} s; {len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())

"""Check every CUDA path of the capture for real, on a machine with an NVIDIA GPU (~3 minutes).

    PYTHONPATH=. python benchmarks/gpu_check.py            # from a checkout, with its own torch
    PYTHONPATH=. python benchmarks/gpu_check.py --cpu      # the same plumbing on the CPU only

Runs with whatever torch the machine has; it says first which of the package's other
dependencies are missing (``pip install`` only those). One line per check, non-zero exit if any
fails. What it checks:

1. Event timing: a CNN on ``cuda:0`` profiled while the loop records its own independent CUDA
   events after every ``opt.step()``: recorded iteration times within 2 % of them (total and
   median per steady iteration); the same with ``--sync``; ``--phases`` on the event path
   (phases add up to the iteration).
2. Hardware: every ``gpu_*`` field filled (NVML + torch + catalog), the NVML device matched to
   torch's by UUID, memory and SM count agreeing with torch.
3. Precision: AMP (fp16 with ``GradScaler`` and one forced skipped step, bf16) recorded as
   ``arch_amp``; TF32 allowed or not recorded as ``arch_tf32_matmul``/``arch_tf32_conv``.
4. Data parallel: ``nn.DataParallel`` and a DDP job (NCCL, one rank per GPU) when there is more
   than one GPU, and always a 2-rank gloo DDP job sharing the one GPU: one run per job, rank 0
   writing it, ``world_size`` 2, ``gpu_count`` = distinct devices, global batch = 2 × batch.
5. Peak GPU memory: recorded per run (equal to ``torch.cuda.max_memory_allocated`` read by the
   check itself after the loop, and larger at a larger batch), stored, and the offers table's
   estimate for a batch between the two measured ones between their peaks; empty on the CPU.
6. The architecture on CUDA, no hook left behind, the store round trip; how busy the GPU was
   (``device_busy``, NVML's samples) in a host-bound and a GPU-bound loop, and batch moves from
   the host-bound run (``model/host_bound.py``) against measured batches.
7. CPU→GPU (``cpu_to_gpu_zoo.py``): a zoo of five small networks profiled on the CPU, the GPU
   predicted from those CPU runs alone (``gm.predict_time``), then measured on ``cuda:0``: the
   error per network and their MAPE; each within 5× passes. With ``--cpu``: predicted for a
   Tesla T4, plumbing only.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import itertools
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

FAILURES: list[str] = []

#: detect() cannot measure these on the device; the capture fills them from the catalog.
CATALOG_ONLY = {"gpu_tf32_tflops", "gpu_fp16_tflops", "gpu_bf16_tflops", "gpu_release_year"}
#: Modules the package needs besides torch (module -> pip name).
NEEDED = {"pandas": "pandas", "numpy": "numpy", "sklearn": "scikit-learn",
          "pynvml": "nvidia-ml-py", "IPython": "ipython"}


def preflight() -> None:
    missing = [pip for mod, pip in NEEDED.items() if importlib.util.find_spec(mod) is None]
    if importlib.util.find_spec("torch") is None:
        raise SystemExit("torch is not installed: this check runs with the machine's own torch")
    if missing:
        raise SystemExit("missing: pip install " + " ".join(missing))


def check(ok: bool, label: str, detail: str = "") -> None:
    print(f"[{'ok' if ok else 'FAIL'}] {label}{': ' + detail if detail else ''}", flush=True)
    if not ok:
        FAILURES.append(label)


def cnn(device: str):
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(128, 256, 3, padding=1), nn.BatchNorm2d(256), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 10),
    ).to(device)


def batch(device: str, n: int = 128, size: int = 64):
    import torch

    if not device.startswith("cuda"):  # --cpu checks the plumbing, not the speed
        n, size = min(n, 4), 16
    return (torch.randn(n, 3, size, size, device=device),
            torch.randint(0, 10, (n,), device=device))


def profiled_loop(store: Path, device: str, steps: int = 60, **options):
    """The CNN trained under the profiler, with reference CUDA events after every step."""
    import torch
    from torch import nn

    import gpuperf_magics as gm

    model = cnn(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x, y = batch(device)
    marks = []
    cuda = device.startswith("cuda")
    with gm.profile_training(name="gpu-check-cnn", store=store, **options) as run:
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            opt.step()
            if cuda:
                ev = torch.cuda.Event(enable_timing=True)
                ev.record()
                marks.append(ev)
            else:
                marks.append(time.perf_counter())
    if cuda:
        torch.cuda.synchronize()
        reference = [a.elapsed_time(b) / 1e3 for a, b in itertools.pairwise(marks)]
    else:
        reference = [b - a for a, b in itertools.pairwise(marks)]
    return run, reference


def compare(run, reference: list[float], label: str, tolerance: float = 0.02) -> None:
    ours = [it.duration_s for it in run.iterations[1:]]  # iteration 0 has no reference start
    check(len(ours) == len(reference), f"{label}: iteration count",
          f"{len(ours)} vs {len(reference)}")
    n = min(len(ours), len(reference))
    total_ours, total_ref = sum(ours[:n]), sum(reference[:n])
    err = abs(total_ours - total_ref) / total_ref
    check(err <= tolerance, f"{label}: total vs independent timing within {tolerance:.0%}",
          f"{total_ours * 1e3:.2f} ms vs {total_ref * 1e3:.2f} ms ({err:.2%})")
    steady = [abs(a - b) / b for a, b in zip(ours[5:n], reference[5:n], strict=True)]
    med = statistics.median(steady) if steady else float("nan")
    check(med <= tolerance, f"{label}: median per-iteration deviation <= {tolerance:.0%}",
          f"{med:.2%}")
    print(f"       {run.summary_line().splitlines()[0]}")


# ---------------------------------------------------------------------------- 1. timing
def check_timing(store: Path, device: str) -> object:
    run, ref = profiled_loop(store, device)
    cuda = device.startswith("cuda")
    expected = "cuda_events" if cuda else "perf_counter"
    check(run.quality["timing_method"] == expected, "event timing selected",
          run.quality["timing_method"])
    # On the CPU the reference is the host clock read after the hook: looser.
    compare(run, ref, "events" if cuda else "cpu", 0.02 if cuda else 0.10)
    if cuda:
        run_sync, ref_sync = profiled_loop(store, device, sync=True)
        check(run_sync.quality["timing_method"] == "synchronize+perf_counter", "--sync timing")
        compare(run_sync, ref_sync, "--sync")
    run_ph, _ = profiled_loop(store, device, steps=20, phases=True)
    sums = [abs(sum(it.phases.values()) - it.duration_s) / it.duration_s
            for it in run_ph.iterations[1:] if it.phases]
    check(bool(sums) and max(sums) < 1e-6, "--phases add up to each iteration",
          f"{len(sums)} iterations, phases {run_ph.phase_medians()}")
    return run


# ---------------------------------------------------------------------------- 2. hardware
def check_hardware(run, device: str) -> None:
    import torch

    from gpuperf_magics.hardware import detect

    if not device.startswith("cuda"):
        check(run.gpu is None and run.gpu_count == 0, "CPU run: no GPU fields",
              f"{run.gpu} × {run.gpu_count}")
        return
    missing = sorted(k for k, v in run.hardware.items() if k.startswith("gpu_") and v is None)
    check(not missing, "every gpu_* hardware field filled", ", ".join(missing) or "all")
    for key in ("gpu_name", "gpu_uuid", "gpu_architecture", "gpu_compute_capability",
                "gpu_sm_count", "gpu_cuda_cores", "gpu_clock_mhz", "gpu_mem_clock_mhz",
                "gpu_mem_bus_bits", "gpu_memory_gb", "gpu_bandwidth_gbs", "gpu_fp32_tflops",
                "gpu_tf32_tflops", "gpu_fp16_tflops", "gpu_driver", "gpu_cuda_driver",
                "gpu_power_limit_w", "gpu_mig", "gpu_l2_mb", "gpu_visible_count"):
        print(f"       {key} = {run.hardware.get(key)!r}")
    hw = detect("cuda:0", refresh=True)
    raw = hw.as_features()
    raw_missing = sorted(k for k, v in raw.items()
                         if k.startswith("gpu_") and v is None and k not in CATALOG_ONLY)
    check(not raw_missing, "detect(): NVML/torch fields filled", ", ".join(raw_missing) or "all")
    props = torch.cuda.get_device_properties(0)
    torch_uuid = str(getattr(props, "uuid", "")).lower()
    nvml_uuid = str(raw.get("gpu_uuid") or "").lower().removeprefix("gpu-")
    check(bool(torch_uuid) and nvml_uuid == torch_uuid, "NVML device matched to torch by UUID",
          f"NVML {nvml_uuid} / torch {torch_uuid}")
    check(raw.get("gpu_sm_count") == props.multi_processor_count, "SM count = torch's",
          f"{raw.get('gpu_sm_count')} vs {props.multi_processor_count}")
    mem = raw.get("gpu_memory_gb") or 0.0
    torch_mem = props.total_memory / 2**30  # the package's GB are GiB, as spec sheets mean
    check(abs(mem - torch_mem) / torch_mem < 0.05, "memory agrees with torch (5 %)",
          f"{mem:.1f} GiB vs {torch_mem:.1f} GiB")
    check(run.gpu == hw.gpu.name and run.gpu_count == 1 and run.device == "cuda:0",
          "run device fields", f"{run.gpu} × {run.gpu_count} on {run.device}")


# ---------------------------------------------------------------------------- 3. precision
def check_precision(store: Path, device: str) -> None:
    import torch
    from torch import nn

    import gpuperf_magics as gm

    kind = "cuda" if device.startswith("cuda") else "cpu"
    dtypes = [torch.bfloat16] + ([torch.float16] if kind == "cuda" else [])
    for dtype in dtypes:
        model = cnn(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        scaler = torch.amp.GradScaler(kind, init_scale=2.0**8) if dtype == torch.float16 else None
        x, y = batch(device, 64, 32)
        with gm.profile_training(name=f"gpu-check-amp-{dtype}", store=store) as run:
            for i in range(12):
                opt.zero_grad(set_to_none=True)
                with torch.autocast(kind, dtype=dtype):
                    loss = nn.functional.cross_entropy(model(x), y)
                if scaler is None:
                    loss.backward()
                    opt.step()
                    continue
                if i == 6:
                    loss = loss * float("inf")  # GradScaler skips this step
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
        check(run.architecture.get("arch_amp") is True, f"AMP {dtype} recorded",
              f"arch_amp={run.architecture.get('arch_amp')}, "
              f"flops/sample {run.architecture.get('arch_flops_fwd_bwd')}")
        if scaler is not None:
            skipped = sum(it.skipped_step for it in run.iterations)
            check(len(run.iterations) == 12 and skipped == 1, "GradScaler: skipped step noted",
                  f"{len(run.iterations)} it, {skipped} skipped")
    if kind != "cuda":
        return
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    saved = (matmul.allow_tf32, cudnn.allow_tf32)
    try:
        for allowed in (False, True):
            matmul.allow_tf32 = allowed
            cudnn.allow_tf32 = allowed
            run, _ = profiled_loop(store, device, steps=8)
            arch = run.architecture
            check(arch.get("arch_tf32_matmul") is allowed and arch.get("arch_tf32_conv") is allowed,
                  f"TF32 {'allowed' if allowed else 'off'} recorded",
                  f"matmul {arch.get('arch_tf32_matmul')}, conv {arch.get('arch_tf32_conv')}")
    finally:
        matmul.allow_tf32, cudnn.allow_tf32 = saved


# ---------------------------------------------------------------------------- 4. parallel
def check_peak_memory(store: Path, device: str) -> None:
    import torch
    from torch import nn

    import gpuperf_magics as gm
    from gpuperf_magics.prediction.memory import peak_memory

    cuda = device.startswith("cuda")
    peaks, own = {}, {}
    for n in (32, 128):
        model = cnn(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        loss_fn = nn.CrossEntropyLoss()
        x, y = batch(device, n=n)
        with gm.profile_training(name="gpu-check-memory", store=store) as run:
            for _ in range(8):
                opt.zero_grad(set_to_none=True)
                loss_fn(model(x), y).backward()
                opt.step()
        peaks[n] = run.peak_memory_gb
        if cuda:
            own[n] = torch.cuda.max_memory_allocated(torch.device(device)) / 2**30
        del model, opt, x, y
        if cuda:
            torch.cuda.empty_cache()
    if not cuda:
        check(all(p is None for p in peaks.values()), "CPU run: no peak GPU memory")
        return
    check(all(p is not None and abs(p - own[n]) <= 0.01 * own[n] for n, p in peaks.items()),
          "peak GPU memory = max_memory_allocated after the loop (1 %)",
          ", ".join(f"batch {n}: {peaks[n]} vs {own[n]:.3f} GiB" for n in peaks))
    check(peaks[128] is not None and peaks[32] is not None and peaks[128] > peaks[32],
          "peak grows with the batch")
    runs = gm.Store(store).runs(network="gpu-check-memory")
    model = peak_memory(runs)
    need = model.needed_gb(64) if model is not None else None
    check(need is not None and runs["peak_memory_gb"].notna().all()
          and min(peaks.values()) <= need <= max(peaks.values()),
          "stored peaks give the batch-64 need between the two", f"{need} GiB")


def check_device_busy(store: Path, device: str) -> None:
    """How busy the GPU was (NVML's samples over the run): low for a host-bound loop, high for
    one bound by the GPU; then batch moves from the host-bound run against measured ones."""
    from cpu_to_gpu_zoo import profile, zoo  # beside this script

    import gpuperf_magics as gm

    nets = {net.name: net for net in zoo()}
    cuda = device.startswith("cuda")
    small = profile(nets["zoo-small-cnn"], store, device, 64, 900 if cuda else 20)
    wide = profile(nets["zoo-wide-cnn"], store, device, 1024 if cuda else 8, 120 if cuda else 4)
    busy = (small.quality.get("device_busy"), wide.quality.get("device_busy"))
    if not cuda:
        check(busy == (None, None), "CPU runs: no GPU busy share", str(busy))
        return
    from gpuperf_magics.model.host_bound import BUSY_HOST

    check(busy[0] is not None and busy[1] is not None and busy[0] < BUSY_HOST <= busy[1],
          "GPU busy share: host-bound loop low, GPU-bound loop high",
          f"small CNN batch 64: {busy[0]}, wide CNN batch 1024: {busy[1]}")
    one = Path(str(store) + ".small")
    profile(nets["zoo-small-cnn"], one, device, 64, 900)
    asked = gm.predict_time(one, "zoo-small-cnn", batch_sizes=[8, 256, 1024],
                            iterations=1).frame.set_index("batch_size")["per_iteration_s"]
    errors = []
    for b in (8, 256, 1024):
        measured = profile(nets["zoo-small-cnn"], Path(str(store) + f".{b}"), device, b, 300)
        errors.append(asked[b] / measured.median_s - 1)
        print(f"       small CNN from batch 64: batch {b} predicted {asked[b] * 1e3:.3f} ms, "
              f"measured {measured.median_s * 1e3:.3f} ms ({100 * errors[-1]:+.0f}%)")
    check(all(abs(e) < 1.0 for e in errors), "host-bound batch moves within 2x",
          ", ".join(f"{100 * e:+.0f}%" for e in errors))


def check_data_parallel(store: Path) -> None:
    import torch
    from torch import nn

    import gpuperf_magics as gm

    count = torch.cuda.device_count()
    model = nn.DataParallel(cnn("cuda:0"))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = batch("cuda:0", 64 * count, 32)
    with gm.profile_training(name="gpu-check-dp", store=store) as run:
        for _ in range(10):
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    check(run.gpu_count == count and run.batch_size == x.shape[0],
          "DataParallel: gpu_count from its devices", f"{run.gpu_count} GPUs, batch "
          f"{run.batch_size}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ddp_worker(rank: int, world: int, backend: str, store: str, devices: list[str],
               port: int) -> None:
    """One rank of a DDP job (started by torch.multiprocessing.spawn)."""
    import torch
    import torch.distributed as dist
    from torch import nn

    import gpuperf_magics as gm

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    device = devices[rank]
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    dist.init_process_group(backend, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    model = cnn(device)
    ids = [torch.device(device).index] if device.startswith("cuda") else None
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x, y = batch(device, 32, 32)
    with gm.profile_training(name=f"gpu-check-ddp-{backend}", store=store):
        for _ in range(20):
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(ddp(x), y).backward()
            opt.step()
    dist.destroy_process_group()


def check_ddp(store: Path, backend: str, devices: list[str], label: str) -> None:
    import torch.multiprocessing as mp

    import gpuperf_magics as gm

    world = len(devices)
    t0 = time.time()
    try:
        mp.spawn(ddp_worker, args=(world, backend, str(store), devices, _free_port()),
                 nprocs=world, join=True)
    except Exception as exc:
        check(False, f"{label}: job ran", f"{type(exc).__name__}: {exc}"[:300])
        return
    runs = gm.Store(store).runs(network=f"gpu-check-ddp-{backend}")
    check(len(runs) == 1, f"{label}: one run for the job", f"{len(runs)} runs")
    if runs.empty:
        return
    row = runs.iloc[-1]
    gpus = len({d for d in devices if d.startswith("cuda")})
    check(row["world_size"] == world and row["gpu_count"] == gpus
          and row["global_batch_size"] == world * row["batch_size"] and row["status"] == "ok",
          f"{label}: world_size, gpu_count, global batch",
          f"world {row['world_size']}, {row['gpu_count']} GPU(s), batch {row['batch_size']} "
          f"/ global {row['global_batch_size']}, spread {row['rank_spread']:.1%}, "
          f"slowest rank {row['rank_slowest']}, {row['it_median_s'] * 1e3:.2f} ms/it, "
          f"{time.time() - t0:.0f} s")


# ---------------------------------------------------------------------------- main
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true",
                        help="run the same plumbing on the CPU (no CUDA checks)")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="write every store (SQLite) into DIR and keep it, so the runs "
                        "measured on this machine can be read afterwards")
    args = parser.parse_args()
    preflight()
    import torch

    import gpuperf_magics as gm

    if not args.cpu and not torch.cuda.is_available():
        print("no CUDA device: this check needs a machine with an NVIDIA GPU (or --cpu)")
        return 2
    device = "cpu" if args.cpu else "cuda:0"
    t0 = time.time()
    gpus = 0 if args.cpu else torch.cuda.device_count()
    name = "CPU" if args.cpu else torch.cuda.get_device_name(0)
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {name}, {gpus} GPU(s), "
          f"gpuperf_magics {gm.__version__}", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        store = Path(tmp) / "gpu.sqlite"
        run = check_timing(store, device)
        check_hardware(run, device)
        arch = run.architecture
        check(bool(arch.get("arch_flops_fwd_bwd")) and arch.get("arch_depth") == 4,
              "architecture", f"flops/sample {arch.get('arch_flops_fwd_bwd')}, "
              f"depth {arch.get('arch_depth')}, method {arch.get('arch_flops_method')}")
        check_precision(store, device)
        check_peak_memory(store, device)
        check_device_busy(store, device)
        from cpu_to_gpu_zoo import check_cpu_to_gpu  # beside this script

        check_cpu_to_gpu(check, device, args.cpu, keep=args.keep)
        if gpus > 1:
            check_data_parallel(store)
            check_ddp(Path(tmp) / "nccl.sqlite", "nccl",
                      [f"cuda:{i}" for i in range(gpus)], f"DDP nccl × {gpus} GPUs")
        check_ddp(Path(tmp) / "gloo.sqlite", "gloo", [device, device],
                  f"DDP gloo, 2 ranks on {device}")
        from torch.nn.modules import module as module_mod
        from torch.optim import optimizer as optim_mod

        check(not module_mod._has_any_global_hook()
              and not optim_mod._global_optimizer_post_hooks, "no hooks left")
        stored = gm.Store(store).runs()
        check(len(stored) >= 3 and set(stored["status"]) == {"ok"}, "store round trip",
              f"{len(stored)} runs")
    print(f"done in {time.time() - t0:.0f} s; {len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())

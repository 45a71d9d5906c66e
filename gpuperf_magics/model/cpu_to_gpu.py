"""Prediction rows for GPUs when a network was only measured on the CPU.

The estimate per iteration is :func:`~gpuperf_magics.model.roofline.cpu_to_gpu_seconds` (FLOPs
at a fraction of the GPU's peak, or the host's time to issue the iteration's kernels where that
is longer); this module turns it into the rows a prediction table holds,
with its own interval: a guess of :data:`~gpuperf_magics.model.roofline.EXPECTED_MAPE` either
way, wider above (a real job is more often slower than the peak suggests than faster).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: The label of these rows in a prediction's ``detail`` column.
DETAIL = "from CPU runs by FLOPs and the kernels an iteration launches, rough"
#: The label where the host's time to launch the iteration's kernels outlasts the GPU's work:
#: then every GPU answers about the same, and a faster one would not help.
HOST_BOUND = "from CPU runs, host-bound (its kernel launches outlast the GPU's work), rough"


def cpu_to_gpu_table(configs: pd.DataFrame, latest: pd.Series,
                     precision: str | None = None) -> pd.DataFrame:
    """One row per configuration (``network, gpu, batch_size, gpu_count, iterations``) with
    ``time_s``, its interval, ``per_iteration_s``, ``kind``, ``detail`` and
    ``expected_mape``, from the ``arch_*`` figures of the latest CPU run ``latest``; in
    ``precision`` (``"fp16"``: autocast) where given, else as that run ran.

    Raises
    ------
    ValueError
        The runs have no FLOPs count to estimate from.
    """
    import pandas as pd

    from gpuperf_magics.hardware.catalog import lookup
    from gpuperf_magics.model.roofline import (
        EXPECTED_MAPE,
        cpu_to_gpu_seconds,
        gpu_work_seconds,
        host_seconds,
    )

    # The optimizer's class says how many kernels its step launches (roofline.iteration_ops).
    arch = {k: latest[k] for k in latest.index if str(k).startswith("arch_") or k == "optimizer"}
    if precision is not None:
        arch["arch_amp"] = precision == "fp16"
    out = []
    for idx, row in configs.iterrows():
        gpu = lookup(row["gpu"])
        per_it = cpu_to_gpu_seconds(arch, gpu, int(row["batch_size"]), int(row["gpu_count"]))
        work = gpu_work_seconds(arch, gpu, int(row["batch_size"]), int(row["gpu_count"]))
        if per_it is None:
            raise ValueError(
                f"cannot estimate {row['gpu']} from CPU runs: the runs have no FLOPs count "
                "(arch_flops_fwd_bwd); profile one run on a GPU instead"
            )
        total = per_it * int(row["iterations"])
        out.append(pd.Series({
            "network": row["network"], "time_s": total,
            "time_low_s": total * (1 - EXPECTED_MAPE),
            "time_high_s": total * (1 + 2 * EXPECTED_MAPE),
            "per_iteration_s": per_it, "kind": "transfer",
            "detail": HOST_BOUND if work is not None and work < host_seconds(arch) else DETAIL,
            "expected_mape": EXPECTED_MAPE,
        }, name=idx))
    return pd.DataFrame(out)

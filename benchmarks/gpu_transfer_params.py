"""Regenerate ``gpuperf_magics/model/gpu_transfer.json`` (the learnt GPU move) from public data.

Run: ``GPUPERF_DATA_HOME=../shared/data .venv/bin/python benchmarks/gpu_transfer_params.py``
(``--check`` compares with the shipped file instead of writing it).

Learns from sia2023 (single-node placements: 5 GPU types over dense batch grids) and lambda2025
(single-GPU rows: 11 workloads on up to 34 GPUs in FP32/TF32 and AMP; pairs within one network,
precision and benchmark version, compared per sample because the batch differs by GPU).
gavel2020 is kept out: it is the data set the project looks at last, once the design is set.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))  # build_evidence, when imported from a test
os.environ.setdefault("GPUPERF_DATA_HOME", str(ROOT.parent / "shared" / "data"))

from shipped import check_or_write  # noqa: E402

from gpuperf_magics.model import gpu_move  # noqa: E402
from gpuperf_magics.model.inputs import prepare  # noqa: E402

SIA_CONFIG = ["network", "placement", "gpu_count", "local_batch_size"]
LAMBDA_CONFIG = ["network", "precision", "benchmark_version"]


def data_home() -> Path:
    return Path(os.environ["GPUPERF_DATA_HOME"])


def with_peaks(frame: pd.DataFrame) -> pd.DataFrame:
    """Add ``peak`` (effective), ``naive_peak`` and ``bandwidth`` per row from the catalog.

    Rows whose GPU the catalog cannot resolve are dropped (named on stderr).
    """
    parts, skipped = [], []
    for gpu, part in frame.groupby("gpu", sort=True):
        cols = ["gpu", *(["precision"] if "precision" in part else [])]
        try:
            prep = prepare(part[cols].reset_index(drop=True), prefer_catalog=True)
        except ValueError:
            skipped.append(str(gpu))
            continue
        parts.append(part.assign(
            peak=prep.features["gpu_fp32_tflops"].to_numpy(),
            bandwidth=prep.features["gpu_bandwidth_gbs"].to_numpy(),
            naive_peak=prep.naive_peak,
        ))
    if skipped:
        print(f"skipped {len(skipped)} GPUs the catalog lacks: {', '.join(skipped)}",
              file=sys.stderr)
    return pd.concat(parts, ignore_index=True)


#: Rows of a source whose quality (``build_evidence.QUALITY``, ``LOW_QUALITY``) is below this
#: carry to no other host, and no learnt move is taught by them: sia2023's host-bound V100 (ncf
#: 10x slower there), its deepspeech2 (slower on the A100) and ncf (input-bound) rows. With
#: them, the move learnt without the A100 took weight 1 and missed its CNNs by 1.3x more than
#: the plain ratio.
HOST_BOUND = 0.3


def quality(source: str, network: pd.Series, gpu: pd.Series) -> np.ndarray:
    """Each row's quality by the evidence base's rule (its source's, lowered where flagged)."""
    from build_evidence import LOW_QUALITY, QUALITY

    q = np.full(len(network), QUALITY[source])
    for (src, net, name), low in LOW_QUALITY.items():
        if src == source:
            hit = np.ones(len(network), bool)
            if net is not None:
                hit &= (network == net).to_numpy()
            if name is not None:
                hit &= (gpu == name).to_numpy()
            q[hit] = np.minimum(q[hit], low)
    return q


def sia_table() -> pd.DataFrame:
    from gpuperf_magics.datasets import fetch_sia2023

    sia = fetch_sia2023()
    sia = sia[sia["nodes"] == 1]
    sia = sia[quality("sia2023", sia["network"], sia["gpu"]) >= HOST_BOUND]
    table = sia.assign(t=sia["time_s"] / sia["iterations"], batch_size=sia["local_batch_size"])
    return with_peaks(table[[*SIA_CONFIG, "gpu", "t", "batch_size"]])


def lambda_table() -> pd.DataFrame:
    raw = pd.read_csv(data_home() / "lambda2025" / "lambda_pytorch.csv")
    raw = raw[raw["gpu_count"] == 1]
    table = raw.assign(t=raw["time_s"])
    return with_peaks(table[[*LAMBDA_CONFIG, "gpu", "t", "batch_size"]])


#: The data set each kind of move is learnt from.
KIND_SOURCE = {"recorded": "lambda2025", "unrecorded": "sia2023"}


@functools.lru_cache(maxsize=1)
def _all_pairs() -> dict[str, pd.DataFrame]:
    return {"recorded": gpu_move.pairs(lambda_table(), LAMBDA_CONFIG),
            "unrecorded": gpu_move.pairs(sia_table(), SIA_CONFIG)}


def public_pairs(exclude_gpus: tuple[str, ...] = (), exclude_families: tuple[str, ...] = (),
                 exclude_sources: tuple[str, ...] = ()) -> dict[str, pd.DataFrame]:
    """Pairs by kind: lambda2025 records the precision, sia2023 does not.

    Pairs touching ``exclude_gpus`` are left out (the benchmark's leave-one-GPU-out folds),
    and so are the pairs of networks of ``exclude_families`` (with their aliases: sia's
    ``imagenet`` is ResNet-50) and every pair of ``exclude_sources``: a fold that holds a
    network or a data set out learns its move without them.
    """
    from gpuperf_magics.model.evidence import family_of

    out = {}
    for k, p in _all_pairs().items():
        if KIND_SOURCE[k] in exclude_sources:
            p = p.iloc[:0]
        fam = p["config"].str.split("|").str[0].map(lambda n: family_of(n)[0])
        keep = (~p["gpu_src"].isin(exclude_gpus) & ~p["gpu_dst"].isin(exclude_gpus)
                & ~fam.isin(exclude_families))
        out[k] = p[keep].reset_index(drop=True)
    return out


SOURCES = {"recorded": "lambda2025 (precision recorded), GPUs held out in 6 groups",
           "unrecorded": "sia2023 (no precision; its host-bound rows left out), GPUs held out "
                             "in 4 groups"}


def build(exclude_gpus: tuple[str, ...] = (), exclude_families: tuple[str, ...] = (),
          exclude_sources: tuple[str, ...] = ()) -> dict[str, gpu_move.GpuMove]:
    """The learnt moves, without some GPUs, network families or data sets (see
    :func:`public_pairs`)."""
    return {k: gpu_move.learn(p, source=SOURCES[k]) for k, p in
            public_pairs(exclude_gpus, exclude_families, exclude_sources).items()}


def text() -> str:
    about = {
        "what": "the learnt GPU moves of gpuperf_magics.model.gpu_move, see its docstring",
        "written_by": "benchmarks/gpu_transfer_params.py",
        "data": "lambda2025 single-GPU rows (recorded), sia2023 single-node rows (unrecorded, "
                "less its host-bound V100, deepspeech2 and ncf rows); "
                "gavel2020 held out",
    }
    return gpu_move.to_json(build(), about)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped file")
    args = parser.parse_args()
    path = ROOT / "gpuperf_magics" / "model" / gpu_move.PARAMS_FILE
    check_or_write(path, text(), args.check, ROOT)


if __name__ == "__main__":
    main()

"""lattuada2022: training times of five networks on four GPU types, PyTorch and TensorFlow
(``aMLLibrary/aMLLibrary``, ``inputs/gpudata``), with the extrapolation splits of the paper."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from gpuperf_magics.datasets.pinned import PinnedDataset

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

DATASET = PinnedDataset(
    name="lattuada2022",
    repository="aMLLibrary/aMLLibrary",
    commit="34f4d19c4297335bca339f3fe43331a14fd3565b",
    folder="inputs/gpudata",
    files={
        "alexnet_pt.csv": "236a3ad81304aa86c43581f0a89ee0ff05e56775556192d5343ae6551dc2848b",
        "alexnet_tf.csv": "ad1bc6fbb7a02f66a20e9e2a7426ed73e5c71c41e1bb9083426bd37ff309a5ef",
        "deepspeech_tf.csv": "5233248ce9facaf412f94b4fb097fd0323112559143b724aceed6804c641a62e",
        "extrapolation_N_resnet_1.csv": (
            "666bd7bbbde51388487fddaaf7381716959b93a96b3fb5bc2ba67c94781764c4"
        ),
        "extrapolation_N_resnet_2.csv": (
            "f499c5813212a26790eebd39ed32626775c7a226a013799c3cb3d5d6f111c729"
        ),
        "extrapolation_N_resnet_4.csv": (
            "25d6b0095e060d8852778820d0ab406f03b6624b12d457e89544dec02f51eec6"
        ),
        "extrapolation_P_alexnet_pt.csv": (
            "64534ca9b02f1d3e35f3bf863e0180e29b160d5d59f119a3baa5ac1736c55026"
        ),
        "extrapolation_P_alexnet_tf.csv": (
            "ef69a730eb72114ee3b913c4cc0b236068c80376678593a7a855fec9af21dbe2"
        ),
        "extrapolation_P_deepspeech_tf.csv": (
            "829a3dc1a31435cfe807e1bc218503adcc97bcb144d8d73e61b05cf474059a81"
        ),
        "extrapolation_P_resnet50_pt.csv": (
            "05abf585611994c7d8fe970da930081cc656a5f7fd5407bdf83efc28dd3496f8"
        ),
        "extrapolation_P_resnet50_tf.csv": (
            "acd66e83d2996be008032470a074995bb1c22f04c6588d59708897545a2ea8d2"
        ),
        "extrapolation_P_vgg19_pt.csv": (
            "3d0f2c6406b1fe13174445ce611f95f666b70b09abd399f2c5156a3662534135"
        ),
        "extrapolation_P_vgg19_tf.csv": (
            "fd4830621cfcf54cc82a18ac0cb935c1c36feeec2fded134102bf9236af2306e"
        ),
        "resnet50_pt.csv": "7e94208bc75a23e7c03e330c2a8685d4f18c6028c2ceacd83e01eb5f7b1e766a",
        "resnet50_tf.csv": "bd9d48dd330134311c9afaecd2e2291aa9e19009c1584ed4d70569cd9a154cb7",
        "vgg19_pt.csv": "4414bd90763c849c9910dfba303858453baf4e6af4aaba3f6c37599dd5276eb6",
        "vgg19_tf.csv": "80bed87ceb07ab658714f9f25eb553effe56f570a91a34bdbd1206630dfd6fc7",
    },
)

# GFlops(7) of lattuada2022 -> the GPU (README of the data): the K80 and M60 figures are whole
# dual-GPU boards at base clock, which is what the paper's feature means.
GPUS = {
    742: "NVIDIA GeForce GT 750M",
    1195: "Quadro P600",
    5591: "Tesla K80",
    7365: "Tesla M60",
    11339: "NVIDIA GeForce GTX 1080 Ti",
}
COLUMNS = {
    "GFlops(7)": "gflops",
    "disk speed(8)": "disk_speed",
    "GPU number(9)": "gpu_count",
    "Network depth(11)": "depth",
    "batch size(13)": "batch_size",
    "Real Iterations Number(15)": "iterations",
    "CPU threads(19)": "dataloader_workers",
    "overall execution time(31)": "time_s",
}


def parse(paths: dict[str, Path]) -> pd.DataFrame:
    """The canonical table of the dataset's files (relative path -> local path)."""
    import pandas as pd

    frames = [_read(rel, paths[rel]) for rel in sorted(paths)]
    table = pd.concat(frames, ignore_index=True)
    table = table.astype(
        {
            "network": "str",
            "file": "str",
            "batch_size": "int64",
            "iterations": "int64",
            "time_s": "float64",
            "gpu_count": "int64",
            "gpu_fp32_tflops": "float64",
            "disk_speed": "float64",
            "dataloader_workers": "float64",
            "depth": "float64",
        }
    )
    table["status"] = "ok"
    table["source"] = DATASET.name
    return table


def _read(rel: str, path: Path) -> pd.DataFrame:
    """One file of the dataset in the columns of the table (the depth study's files hold
    no GPU figure)."""
    import numpy as np
    import pandas as pd

    stem = Path(rel).stem
    raw = pd.read_csv(path)
    unknown = set(raw.columns) - set(COLUMNS)
    if unknown:  # pragma: no cover - the files are checksummed
        raise ValueError(f"lattuada2022/{rel}: unexpected columns {sorted(unknown)}")
    frame = raw.rename(columns=COLUMNS)
    depth_files = re.fullmatch(r"extrapolation_N_resnet_(\d+)", stem)
    if depth_files:
        network, framework = "resnet_cifar", None
        frame["gpu_count"] = int(depth_files.group(1))
    else:
        parts = re.fullmatch(r"(?:extrapolation_P_)?([a-z0-9]+)_(pt|tf)", stem)
        if parts is None:  # pragma: no cover - the files are checksummed
            raise ValueError(f"lattuada2022/{rel}: unexpected file name")
        network, framework = parts.groups()
    if "gflops" in frame:
        unknown_gflops = set(frame["gflops"]) - set(GPUS)
        if unknown_gflops:  # pragma: no cover - the files are checksummed
            raise ValueError(f"lattuada2022/{rel}: unknown GFlops {sorted(unknown_gflops)}")
        gpu = frame["gflops"].map(GPUS)
        tflops = frame["gflops"] / 1000.0
    else:
        gpu = pd.Series(None, index=frame.index, dtype="str")
        tflops = pd.Series(np.nan, index=frame.index)
    return pd.DataFrame(
        {
            "network": network,
            "framework": pd.Series(framework, index=frame.index, dtype="str"),
            "file": stem,
            "batch_size": frame["batch_size"],
            "iterations": frame["iterations"],
            "time_s": frame["time_s"],
            "gpu": gpu.astype("str"),
            "gpu_count": frame["gpu_count"],
            "gpu_fp32_tflops": tflops,
            "disk_speed": frame.get("disk_speed", np.nan),
            "dataloader_workers": frame.get("dataloader_workers", np.nan),
            "depth": frame.get("depth", np.nan),
        }
    )

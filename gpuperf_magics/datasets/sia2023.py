"""sia2023: step times of data-parallel jobs on five GPU clusters, per placement
(``siasosp23/artifacts``, ``sia-simulator/traces``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gpuperf_magics.datasets.pinned import PinnedDataset

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

_SIA_HASHES = """
bert aws 982811b611bc8447a078289939a2ccafc1f76c06e1e8ebcc4f4866a8e8fcdc0f
bert azure e8e75855eae8f66ec80ce9dcd700dc65ac86b8424f4cd87f6a71aa1f4a55c994
bert dgx-ext f2c2508ff6f64f17a0526fcf5c779b4768a7baf567f6d6aba713973d74b59d4a
bert quad a39a3ad14d731d969f7ecb9665e78bed7daaa5411583fce55a88f7a97807e11b
bert rtx 9e685fef4df1a02deaef86e4b0aaabe8bd1a993a7cd82cc2271bf8d10adc0060
cifar10 aws e77d1d8781e2e48c3952580bdf705f3be4f27cbbdcd0a2087eb152224a271b6b
cifar10 azure 19a602e8d730b20f48cd896404aabd70697e118d1933c837272c259ca31d984d
cifar10 dgx-ext d01db208317cef3774a89f97f1d9f9de0d842f1324a86e94d99cf92a788c4abf
cifar10 quad 8215ea4e49991e93c06ad478da8798231e51754b6c34100a4178904e8372f5a6
cifar10 rtx 045de8f6fd5242a7b73452caa682f27ec26a829293e4228f620090f24ab7a59c
deepspeech2 aws 0908c53bfc20123ad60ad6c4984cfcdf53a623773f4e44e9f01d58305e5379b7
deepspeech2 azure a3f37a49db3c6a7468da0cf7e199106bfb9a1d78d73da778f5cb1a8c61ac1798
deepspeech2 dgx-ext ee7e1fbe8ea81c966171c33a6c480d5229b31e824009e0e614411ecbadfff5da
deepspeech2 quad ff9750732635c5204b094e5e25a18ec623beca5b22d9d415a2b45cdbee00538f
deepspeech2 rtx 5d8672639c614cb785336f1d4c998171733f2f9eaccc42bdc35b34364ddda6fe
imagenet aws ac3d88937f40680c367ec83c7610eda088b8d60806e15cf3a4699fa1d15cb1e8
imagenet azure 364652b5962d27df1046a40bc86c5ff48c7b9b7016912a2ad9c87b1af7f54a0b
imagenet dgx-ext d8bbaeb7de365e1060d21195cf180b47a562b95d6cb8f9e8fbfb02a797966a4b
imagenet quad 441736c8b0efdeb6c93ad1915f44fa719c63415c1173b057abd92163badd608d
imagenet rtx a8e1406a2b4d7c01d5ff1763dcd925bbe4a5ebb5df9906b53bb1902a1182a0b9
ncf aws 012f861bd2acc57f5f7d09c7878082905ba0150660b9f5aeae9291d025527874
ncf azure 18efd07c05eb8967ce6522ffda76e1f07dccd6f193f65099ed037d0656dbd604
ncf dgx-ext e8299ed413cfdd90db0db7fca4a943392c1afd96687f641b6959886a49104961
ncf quad 04d24c2f4d3cfd281bb6a94a06bd8c22723281e1d869015337f5adb4a8626c50
ncf rtx 82a6a11b79974e1eead2349d32dec3050e41bdd4b11fe4e675090202939a10bd
yolov3 aws 6ffceb8996e3fd57e47e550fdffc21eec7d7e34de1d806d8b3568734eaec0013
yolov3 azure 374c362fd81815db54af99d07fe975463a0ef05b65e7118f0114cc22288012f0
yolov3 dgx-ext 508a01c8fd5e8c7d22bd1159fb2f51f6d3e1ac30ff4abfb7e388c434226af368
yolov3 quad 113e7097a7d00e747b45f62af275881401f9e95e74e4a25a8acf08924930aa3b
yolov3 rtx 963d14f41728cef3c90618cb481591c982c8563d2d292a02a269f86a8e6c96ae
"""

DATASET = PinnedDataset(
    name="sia2023",
    repository="siasosp23/artifacts",
    commit="aaf7a0de7b6cb5eab06ea020467ede5d2fd18e70",
    folder="sia-simulator/traces",
    files={
        f"{workload}/placements-{cluster}.csv": digest
        for workload, cluster, digest in (line.split() for line in _SIA_HASHES.split("\n") if line)
    },
)

# sia2023 cluster -> the GPU (README of the data; aws and azure inferred from instance types).
GPUS = {
    "aws": "Tesla T4",
    "azure": "Tesla V100-SXM2-32GB",
    "dgx-ext": "NVIDIA A100-SXM4-40GB",
    "quad": "Quadro RTX 6000",
    "rtx": "NVIDIA GeForce RTX 2080 Ti",
}


def parse(paths: dict[str, Path]) -> pd.DataFrame:
    """The canonical table of the dataset's files (relative path -> local path)."""
    import pandas as pd

    frames = []
    for rel in sorted(paths):
        workload, filename = rel.split("/")
        cluster = filename.removeprefix("placements-").removesuffix(".csv")
        raw = pd.read_csv(paths[rel], dtype={"placement": "str"})
        placement = raw["placement"].str.strip()
        if not placement.str.fullmatch(r"[1-9]+").all():  # pragma: no cover - checksummed
            raise ValueError(f"sia2023/{rel}: placements must be digits 1-9, one per node")
        gpu_count = placement.map(lambda p: sum(int(d) for d in p))
        local = raw["local_bsz"].astype("int64")
        frames.append(
            pd.DataFrame(
                {
                    "network": workload,
                    "cluster": cluster,
                    "gpu": GPUS[cluster],
                    "placement": placement,
                    "nodes": placement.str.len(),
                    "gpu_count": gpu_count,
                    "local_batch_size": local,
                    "batch_size": local * gpu_count,
                    "iterations": 1,
                    "time_s": raw["step_time"],
                    "sync_time_s": raw["sync_time"],
                }
            )
        )
    table = pd.concat(frames, ignore_index=True)
    table = table.astype(
        {
            "network": "str",
            "cluster": "str",
            "gpu": "str",
            "placement": "str",
            "nodes": "int64",
            "gpu_count": "int64",
            "local_batch_size": "int64",
            "batch_size": "int64",
            "iterations": "int64",
            "time_s": "float64",
            "sync_time_s": "float64",
        }
    )
    table["status"] = "ok"
    table["source"] = DATASET.name
    return table

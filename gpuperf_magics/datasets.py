"""Public training-time measurements, as canonical tables for fitting and evaluating models.

Each ``fetch_*`` function returns one row per measured configuration with the columns of the
canonical table (``network``, ``batch_size``, ``iterations``, ``time_s``, ``gpu``,
``gpu_count``, ``status``, ``source``) plus the features the dataset records.

Where the files come from, in this order:

1. ``data_home`` if given, else the folder named by the environment variable
   ``GPUPERF_DATA_HOME``, else the per-user cache ``$XDG_CACHE_HOME/gpuperf_magics/datasets``
   (``~/.cache/gpuperf_magics/datasets``). The folder holds one subfolder per dataset, laid out
   as in the dataset's repository (``lattuada2022/alexnet_pt.csv``,
   ``sia2023/bert/placements-aws.csv``).
2. Files missing there are downloaded from the dataset's public repository at a pinned commit
   (``raw.githubusercontent.com``) and written there, unless ``download_if_missing=False``.

Every file, local or downloaded, is checked against the SHA-256 stored in this module before it
is read, so a table is always the published one. Parsed tables are cached per process.

Examples
--------
>>> from gpuperf_magics.datasets import fetch_sia2023
>>> sia = fetch_sia2023()                               # doctest: +SKIP
>>> sia.groupby(["network", "gpu"]).size()              # doctest: +SKIP
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "ChecksumError",
    "DatasetNotFoundError",
    "fetch_lattuada2022",
    "fetch_sia2023",
    "get_data_home",
]

#: Environment variable naming a local folder with the datasets (CI and tests use it).
DATA_HOME_ENV = "GPUPERF_DATA_HOME"


class DatasetNotFoundError(FileNotFoundError):
    """A dataset file is neither on disk nor downloadable."""


class ChecksumError(OSError):
    """A dataset file differs from the published one."""


@dataclass(frozen=True)
class _Dataset:
    name: str
    repository: str  # GitHub owner/name
    commit: str
    folder: str  # folder of the files inside the repository
    files: dict[str, str]  # path below ``folder`` -> SHA-256 of its bytes

    def url(self, path: str) -> str:
        return (
            f"https://raw.githubusercontent.com/{self.repository}/{self.commit}/"
            f"{self.folder}/{path}"
        )


_LATTUADA2022 = _Dataset(
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

_SIA2023 = _Dataset(
    name="sia2023",
    repository="siasosp23/artifacts",
    commit="aaf7a0de7b6cb5eab06ea020467ede5d2fd18e70",
    folder="sia-simulator/traces",
    files={
        f"{workload}/placements-{cluster}.csv": digest
        for workload, cluster, digest in (line.split() for line in _SIA_HASHES.split("\n") if line)
    },
)

# GFlops(7) of lattuada2022 -> the GPU (README of the data): the K80 and M60 figures are whole
# dual-GPU boards at base clock, which is what the paper's feature means.
_LATTUADA_GPUS = {
    742: "NVIDIA GeForce GT 750M",
    1195: "Quadro P600",
    5591: "Tesla K80",
    7365: "Tesla M60",
    11339: "NVIDIA GeForce GTX 1080 Ti",
}
_LATTUADA_COLUMNS = {
    "GFlops(7)": "gflops",
    "disk speed(8)": "disk_speed",
    "GPU number(9)": "gpu_count",
    "Network depth(11)": "depth",
    "batch size(13)": "batch_size",
    "Real Iterations Number(15)": "iterations",
    "CPU threads(19)": "dataloader_workers",
    "overall execution time(31)": "time_s",
}

# sia2023 cluster -> the GPU (README of the data; aws and azure inferred from instance types).
_SIA_GPUS = {
    "aws": "Tesla T4",
    "azure": "Tesla V100-SXM2-32GB",
    "dgx-ext": "NVIDIA A100-SXM4-40GB",
    "quad": "Quadro RTX 6000",
    "rtx": "NVIDIA GeForce RTX 2080 Ti",
}


def get_data_home(data_home: str | os.PathLike[str] | None = None) -> Path:
    """The folder datasets are read from and downloaded to.

    Parameters
    ----------
    data_home : str, path or None
        Used as given when not ``None``.

    Returns
    -------
    Path
        ``data_home``, else ``$GPUPERF_DATA_HOME``, else
        ``$XDG_CACHE_HOME/gpuperf_magics/datasets`` (``~/.cache/gpuperf_magics/datasets``).
        Not created here.
    """
    if data_home is not None:
        return Path(data_home).expanduser()
    local = os.environ.get(DATA_HOME_ENV)
    if local:
        return Path(local).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "gpuperf_magics" / "datasets"


def fetch_lattuada2022(
    *, data_home: str | os.PathLike[str] | None = None, download_if_missing: bool = True
) -> pd.DataFrame:
    """Training times of the paper by Lattuada, Gianniti, Ardagna and Zhang (2022).

    "Performance prediction of deep learning applications training in GPU as a service
    systems", Cluster Computing 25. Files ``inputs/gpudata/*.csv`` of github
    aMLLibrary/aMLLibrary at commit 34f4d19 (Apache-2.0): whole training runs of AlexNet,
    VGG-19, ResNet-50 (PyTorch and TensorFlow), DeepSpeech (TensorFlow) and a CIFAR-10 ResNet
    with 1-10 inner modules, on 1-8 GPUs of 4 types.

    Parameters
    ----------
    data_home : str, path or None
        Folder holding ``lattuada2022/*.csv``; see :func:`get_data_home`.
    download_if_missing : bool, default True
        Download missing files into ``data_home``; if ``False`` a missing file is an error.

    Returns
    -------
    pandas.DataFrame
        One row per CSV row of the 17 files, in file order (files sorted by name):

        - ``network``: alexnet, vgg19, resnet50, deepspeech, resnet_cifar (the
          ``extrapolation_N_resnet_*`` files);
        - ``framework``: ``"pt"`` or ``"tf"``; NA for resnet_cifar (not recorded);
        - ``file``: the file stem, e.g. ``"extrapolation_P_vgg19_pt"``;
        - ``batch_size`` (global), ``iterations`` (iterations run), ``time_s`` (wall-clock
          seconds of the whole run, the paper's target);
        - ``gpu``: catalog name from the GFlops column; NA in the ``extrapolation_N`` files;
        - ``gpu_count``: GPUs used; in ``extrapolation_N_resnet_<g>`` the ``g`` of the name;
        - ``gpu_fp32_tflops``: the data's GFlops / 1000, kept as the paper used it;
        - ``disk_speed``, ``dataloader_workers`` (CPU threads column), ``depth`` (inner
          modules; resnet_cifar only): features, NaN where a file lacks the column;
        - ``status`` (``"ok"``), ``source`` (``"lattuada2022"``).

    Notes
    -----
    Quirks kept as published (see the README next to the data):

    - ``gpu_fp32_tflops`` is the paper's figure, not the catalog's: for the Tesla K80 (5.591)
      and M60 (7.365) it is the whole dual-GPU board at base clock (4992 x 2 x 560 MHz,
      4096 x 2 x 899 MHz), while the catalog describes one GPU of the board at boost clock
      (4.37 and 4.83 TFLOPS). Hardware columns filled from the catalog (e.g. bandwidth) are
      per GPU.
    - Rows are not deduplicated: many repeat an earlier row's features (818 of 1238 in
      ``alexnet_pt``), so a random split leaks repetitions; split by configuration as well.
    - Every row of an ``extrapolation_P_*`` file is also a row of the main file of its network
      (they are subsets for the GPU-type extrapolation split: test on the GTX 1080 Ti), so
      using all files together counts those rows twice; select by ``file``.
    - ``extrapolation_N_*`` files have no GPU columns (the GPU type is not documented: ``gpu``
      and ``gpu_fp32_tflops`` are NA) and ``resnet_2``/``resnet_4`` no disk speed;
      ``resnet_1`` holds 21 rows of short runs (9-123 iterations) at N=10 from another
      campaign, and pairs such as 1221/1201 iterations carry the same time (the first 20
      iterations were skipped in one of them).
    - ``deepspeech_tf`` lacks the network width, so different networks share one feature
      vector (about 14% repeat noise).
    - The GT 750M (742 GFLOPS) of the README does not occur in these files.
    """
    home = get_data_home(data_home).resolve()
    return _load(_LATTUADA2022.name, home, download_if_missing).copy()


def fetch_sia2023(
    *, data_home: str | os.PathLike[str] | None = None, download_if_missing: bool = True
) -> pd.DataFrame:
    """Per-step training times of the Sia scheduler paper (SOSP 2023), 6 workloads x 5 GPUs.

    Files ``sia-simulator/traces/<workload>/placements-<cluster>.csv`` of github
    siasosp23/artifacts at commit aaf7a0d, recorded with AdaptDL: dense grids of per-GPU batch
    sizes on 1 to 16 GPUs across up to 4 nodes.

    Parameters
    ----------
    data_home : str, path or None
        Folder holding ``sia2023/<workload>/placements-<cluster>.csv``; see
        :func:`get_data_home`.
    download_if_missing : bool, default True
        Download missing files into ``data_home``; if ``False`` a missing file is an error.

    Returns
    -------
    pandas.DataFrame
        One row per CSV row of every workload x cluster file (workloads and clusters sorted):

        - ``network``: bert, cifar10 (ResNet-18), deepspeech2, imagenet (ResNet-50), ncf,
          yolov3;
        - ``cluster``: aws, azure, dgx-ext, quad, rtx;
        - ``gpu``: the cluster's GPU as the catalog names it: Tesla T4 (aws, g4dn.12xlarge),
          Tesla V100-SXM2-32GB (azure, ND40rs_v2), NVIDIA A100-SXM4-40GB (dgx-ext),
          Quadro RTX 6000 (quad), NVIDIA GeForce RTX 2080 Ti (rtx);
        - ``placement`` (str): GPUs used on each node, one digit per node (``"11"`` is one GPU
          on each of two nodes); ``nodes``: its length; ``gpu_count``: the sum of its digits;
        - ``local_batch_size``: per-GPU batch; ``batch_size``: global, local x gpu_count;
        - ``iterations``: 1 (``time_s`` is one step); ``time_s``: seconds per training step
          (forward, backward, optimizer, gradient sync; first batch excluded);
        - ``sync_time_s``: seconds of gradient synchronisation within the step (a part of the
          target, not a feature);
        - ``status`` (``"ok"``), ``source`` (``"sia2023"``).

    Notes
    -----
    Quirks kept as published: input-pipeline floors (imagenet about 150 ms per step on every
    GPU at small batches; ncf nearly flat), ncf on the V100 cluster about 10x slower than
    elsewhere, deepspeech2 slower on A100 than on V100; precision (TF32/AMP) not recorded.
    """
    home = get_data_home(data_home).resolve()
    return _load(_SIA2023.name, home, download_if_missing).copy()


@functools.lru_cache(maxsize=16)
def _load(name: str, home: Path, download_if_missing: bool) -> pd.DataFrame:
    dataset = {d.name: d for d in (_LATTUADA2022, _SIA2023)}[name]
    paths = {rel: _ensure(dataset, rel, home, download_if_missing) for rel in dataset.files}
    parse = _parse_lattuada2022 if name == _LATTUADA2022.name else _parse_sia2023
    return parse(paths)


def _ensure(dataset: _Dataset, rel: str, home: Path, download_if_missing: bool) -> Path:
    """The verified local path of one file, downloading it first if needed and allowed."""
    path = home / dataset.name / rel
    expected = dataset.files[rel]
    if path.is_file():
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
        if actual != expected:
            raise ChecksumError(
                f"{path} is not the published file (SHA-256 {actual}, expected {expected}); "
                f"delete it to download it again from {dataset.url(rel)}"
            )
        return path
    hint = (
        f"set {DATA_HOME_ENV} to a folder holding {dataset.name}/{rel} (laid out as the "
        f"dataset's repository), or connect to the internet"
    )
    if not download_if_missing:
        raise DatasetNotFoundError(
            f"{path} does not exist and download_if_missing=False: {hint} and pass "
            "download_if_missing=True"
        )
    url = dataset.url(rel)
    try:
        content = _download(url)
    except (urllib.error.URLError, OSError) as error:
        raise DatasetNotFoundError(
            f"{dataset.name}/{rel} is not in {home} and could not be downloaded from {url} "
            f"({error}): {hint}"
        ) from error
    actual = hashlib.sha256(content).hexdigest()
    if actual != expected:
        raise ChecksumError(
            f"download of {url} is not the published {dataset.name}/{rel} (SHA-256 {actual}, "
            f"expected {expected}); nothing was saved: try again later"
        )
    try:
        _write_atomically(path, content)
    except OSError as error:
        raise OSError(
            f"downloaded {dataset.name}/{rel} but cannot save it to {path} ({error}); pass "
            f"data_home= (or set {DATA_HOME_ENV} to) a folder you can write to"
        ) from error
    return path


def _download(url: str) -> bytes:
    """The bytes at ``url`` (the network seam: tests replace this function)."""
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.read()


def _write_atomically(path: Path, content: bytes) -> None:
    # A crash mid-write must not leave a truncated file that later fails its checksum.
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(content)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _parse_lattuada2022(paths: dict[str, Path]) -> pd.DataFrame:
    import numpy as np
    import pandas as pd

    frames = []
    for rel in sorted(paths):
        stem = Path(rel).stem
        raw = pd.read_csv(paths[rel])
        unknown = set(raw.columns) - set(_LATTUADA_COLUMNS)
        if unknown:  # pragma: no cover - the files are checksummed
            raise ValueError(f"lattuada2022/{rel}: unexpected columns {sorted(unknown)}")
        frame = raw.rename(columns=_LATTUADA_COLUMNS)
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
            unknown_gflops = set(frame["gflops"]) - set(_LATTUADA_GPUS)
            if unknown_gflops:  # pragma: no cover - the files are checksummed
                raise ValueError(f"lattuada2022/{rel}: unknown GFlops {sorted(unknown_gflops)}")
            gpu = frame["gflops"].map(_LATTUADA_GPUS)
            tflops = frame["gflops"] / 1000.0
        else:
            gpu = pd.Series(None, index=frame.index, dtype="str")
            tflops = pd.Series(np.nan, index=frame.index)
        frames.append(
            pd.DataFrame(
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
        )
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
    table["source"] = _LATTUADA2022.name
    return table


def _parse_sia2023(paths: dict[str, Path]) -> pd.DataFrame:
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
                    "gpu": _SIA_GPUS[cluster],
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
    table["source"] = _SIA2023.name
    return table

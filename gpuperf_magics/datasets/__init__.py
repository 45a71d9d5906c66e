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

Every file, local or downloaded, is checked against the SHA-256 stored with its dataset
(:mod:`.lattuada2022`, :mod:`.sia2023`: their pinned files and parsers) before it is read, so a
table is always the published one. Parsed tables are cached per process.

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
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from gpuperf_magics.datasets import lattuada2022, sia2023
from gpuperf_magics.datasets.pinned import PinnedDataset

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


def get_data_home(data_home: str | os.PathLike[str] | None = None) -> Path:
    """The folder datasets are read from and downloaded to.

    Parameters
    ----------
    data_home : str, path or None
        Used as given when not ``None``.

    Returns
    -------
    Path
        ``data_home``, else ``$GPUPERF_DATA_HOME``, else ``datasets`` in the per-user
        cache folder of the package as platformdirs gives it (the rule the store's folder
        follows, :func:`gpuperf_magics.store.paths.user_data_dir`): on Linux
        ``$XDG_CACHE_HOME/gpuperf_magics/datasets`` (``~/.cache/gpuperf_magics/datasets``),
        on macOS ``~/Library/Caches/gpuperf_magics/datasets``, on Windows
        ``%LOCALAPPDATA%\\gpuperf_magics\\Cache\\datasets``. Not created here.
    """
    if data_home is not None:
        return Path(data_home).expanduser()
    local = os.environ.get(DATA_HOME_ENV)
    if local:
        return Path(local).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("gpuperf_magics", appauthor=False)) / "datasets"


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
    return _load(lattuada2022.DATASET.name, home, download_if_missing).copy()


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
    return _load(sia2023.DATASET.name, home, download_if_missing).copy()


@functools.lru_cache(maxsize=16)
def _load(name: str, home: Path, download_if_missing: bool) -> pd.DataFrame:
    module = {m.DATASET.name: m for m in (lattuada2022, sia2023)}[name]
    dataset = module.DATASET
    paths = {rel: _ensure(dataset, rel, home, download_if_missing) for rel in dataset.files}
    return module.parse(paths)


def _ensure(dataset: PinnedDataset, rel: str, home: Path, download_if_missing: bool) -> Path:
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



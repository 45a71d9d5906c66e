"""Measured evidence for GPU moves: workloads timed on several GPUs (or precisions).

An :class:`EvidenceBase` is a long table, one row per (workload, device): a *workload* is one
network at one setting (a batch size, a software version) in one data set; a *device* is a
GPU and the precision its matrix products ran in (:func:`device_key`: ``"Tesla T4|fp32"``), so
a precision move (FP32 → AMP on one GPU) is a move between two devices like any other. Each
row holds the median seconds per iteration, the batch size, the network's family and kind
(:data:`FAMILIES`: sia2023's ``imagenet`` is ResNet-50), the source data set and a quality
weight (how far the row can be trusted to carry to another host: sia2023's host-bound V100 and
its deepspeech2 rows carry little).

Two bases serve a fit: the user's own (:func:`own_base`, built from the training data: other
networks measured on both GPUs, on the same machines) and the public one shipped in the package
(``evidence.json``, built by ``benchmarks/build_evidence.py`` from the public data sets, with
each source's commit and licence, and the residuals that calibrate its intervals). Reading it
never touches the network.

Cost: :meth:`EvidenceBase.pairs` intersects the workloads of two devices (dictionaries), so
a look-up grows with the workloads measured on those two devices, never with the square of
the rows.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from importlib import resources

import numpy as np
import pandas as pd

EVIDENCE_FILE = "evidence.json"
#: Version of the file's format; bump when its columns or meaning change.
FORMAT = 1
#: Columns of the base, in the file's order.
COLUMNS = ("source", "workload", "network", "family", "kind", "gpu", "precision", "batch_size",
           "t", "quality")

#: Network names of the public data sets (and common spellings) → (family, kind). A family is
#: one network however a data set names it: what a benchmark holding a network out drops.
FAMILIES: dict[str, tuple[str, str]] = {
    **{n: ("resnet50", "cnn") for n in ("resnet50", "imagenet", "resnet50_pt", "resnet50_tf",
                                        "resnet-50", "resnet_50")},
    **{n: ("resnet18", "cnn") for n in ("resnet18", "cifar10", "resnet-18")},
    **{n: ("bert", "transformer") for n in ("bert", "bert_base_squad", "bert_large_squad",
                                            "bert-base", "bert-large")},
    **{n: ("ncf", "recsys") for n in ("ncf", "ncf_neumf")},
    **{n: ("deepspeech", "rnn") for n in ("deepspeech2", "deepspeech_tf", "deepspeech")},
    **{n: ("alexnet", "cnn") for n in ("alexnet", "alexnet_pt", "alexnet_tf")},
    **{n: ("vgg19", "cnn") for n in ("vgg19", "vgg19_pt", "vgg19_tf")},
    "yolov3": ("yolov3", "cnn"), "ssd300_resnet50": ("ssd300", "cnn"),
    "maskrcnn_r50_fpn": ("maskrcnn", "cnn"), "cyclegan": ("cyclegan", "cnn"),
    "gnmt_v2": ("gnmt", "rnn"), "lstm_lm": ("lstm_lm", "rnn"), "tacotron2": ("tacotron2", "rnn"),
    "transformer": ("transformer", "transformer"),
    "transformerxl_base": ("transformerxl_base", "transformer"),
    "transformerxl_large": ("transformerxl_large", "transformer"),
    "waveglow": ("waveglow", "cnn"), "autoencoder_recsys": ("autoencoder_recsys", "recsys"),
    "resnet_cifar": ("resnet_cifar", "cnn"),
}
#: Architectures whose FP32 matrix products may run as TF32 (an FP32 run there is not an FP32
#: run elsewhere).
TF32_ARCHITECTURES = ("Ampere", "Ada Lovelace", "Ada", "Hopper", "Blackwell")
#: Precision spellings → the classes devices are keyed by ("unk": the table does not say).
PRECISION_CLASS = {"fp32": "fp32", "float32": "fp32", "tf32": "tf32", "fp16": "fp16",
                   "amp": "fp16", "bf16": "fp16", "bfloat16": "fp16", "float16": "fp16",
                   "half": "fp16", "mixed": "fp16"}


def family_of(network: str) -> tuple[str, str | None]:
    """(family, kind) of a network name; an unknown name is its own family, of unknown kind.

    A name such as ``"resnet50|fp16|v2"`` (a workload label) is read by its first part.
    """
    name = str(network).strip().lower()
    base = name.split("|")[0]
    if base in FAMILIES:
        return FAMILIES[base]
    return name, None


def device_key(gpu: str, precision: object, architecture: object = None) -> str:
    """``"<catalog name>|<precision class>"``; an FP32 or unrecorded precision on a GPU without
    TF32 is ``fp32`` (nothing else could have run there)."""
    cls = PRECISION_CLASS.get(str(precision).strip().lower(), "unk") \
        if isinstance(precision, str) and precision.strip() else "unk"
    if cls in ("tf32", "unk") and architecture not in TF32_ARCHITECTURES:
        cls = "fp32"
    return f"{gpu}|{cls}"


#: Other precision classes a device's evidence may stand in for, with their weight: an
#: unrecorded FP32 run on Ampere is TF32 or FP32 (PyTorch's defaults have changed).
ALTERNATES = {"unk": (("tf32", 0.5), ("fp32", 0.5)), "tf32": (("unk", 0.5), ("fp32", 0.5)),
              "fp32": (("unk", 0.5), ("tf32", 0.5)), "fp16": ()}


def alternates(key: str) -> list[tuple[str, float]]:
    """The device itself (weight 1) and the keys that may stand in for it."""
    gpu, _, cls = key.rpartition("|")
    return [(key, 1.0)] + [(f"{gpu}|{c}", w) for c, w in ALTERNATES.get(cls, ())]


@dataclass
class EvidenceBase:
    """Workloads measured on devices (see the module docstring)."""

    frame: pd.DataFrame
    sources: dict = field(default_factory=dict)  # source → repository, commit, licence
    calibration: dict = field(default_factory=dict)  # bucket → residual quantiles, MAPE, n
    settings: dict = field(default_factory=dict)  # the move's kernel widths, prior spread

    def __post_init__(self) -> None:
        f = self.frame.reset_index(drop=True)
        self.frame = f
        self.device = (f["gpu"].astype(str) + "|" + f["precision"].astype(str)).to_numpy()
        self.workload = f["workload"].astype(str).to_numpy()
        self.family = f["family"].astype(str).to_numpy()
        self.kind = f["kind"].astype(object).to_numpy()
        self.log_t = np.log(f["t"].to_numpy(float))
        self.log_b = np.log(f["batch_size"].to_numpy(float))
        self.quality = f["quality"].to_numpy(float)
        self.group = (f["family"].astype(str) + "@" + f["source"].astype(str)).to_numpy()
        #: Sources the base holds: how many a spread between sources was measured on.
        self.n_sources = int(f["source"].nunique())
        self._pairs: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
        self.by_device: dict[str, dict[str, int]] = {}
        self.by_workload: dict[str, list[int]] = {}  # workload → its rows, on every device
        for i, (d, w) in enumerate(zip(self.device, self.workload, strict=True)):
            self.by_device.setdefault(d, {})[w] = i
            self.by_workload.setdefault(w, []).append(i)

    @property
    def n(self) -> int:
        return len(self.frame)

    def devices(self) -> list[str]:
        return sorted(self.by_device)

    def pairs(self, src: str, dst: str) -> tuple[np.ndarray, np.ndarray]:
        """Row indices (on ``src``, on ``dst``) of the workloads measured on both devices."""
        hit = self._pairs.get((src, dst))
        if hit is not None:
            return hit
        a, b = self.by_device.get(src), self.by_device.get(dst)
        if not a or not b:
            hit = (np.zeros(0, int), np.zeros(0, int))
        else:
            common = [w for w in b if w in a] if len(b) < len(a) else [w for w in a if w in b]
            hit = (np.array([a[w] for w in common], dtype=int),
                   np.array([b[w] for w in common], dtype=int))
        self._pairs[(src, dst)] = hit
        return hit

    def neighbours(self, key: str) -> dict[str, int]:
        """Devices sharing workloads with ``key``, with how many they share (sorted by
        device). A pass over the rows of ``key``'s workloads (:attr:`by_workload`), not over
        the base: ``np.isin`` of the base's workload names against them had cost 0.2 s per
        device of a 10,000-configuration fit, half its time."""
        cache = self.__dict__.setdefault("_neighbours", {})
        if key not in cache:
            counts: dict[str, int] = {}
            for w in self.by_device.get(key, {}):
                for i in self.by_workload[w]:
                    d = str(self.device[i])
                    if d != key:
                        counts[d] = counts.get(d, 0) + 1
            cache[key] = dict(sorted(counts.items()))
        return dict(cache[key])

    def without(self, gpus: tuple[str, ...] = (), families: tuple[str, ...] = (),
                sources: tuple[str, ...] = ()) -> EvidenceBase:
        """The base less some GPUs (catalog names), network families and sources."""
        f = self.frame
        keep = ~(f["gpu"].isin(gpus) | f["family"].isin(families) | f["source"].isin(sources))
        return EvidenceBase(f[keep], dict(self.sources), dict(self.calibration),
                            dict(self.settings))


def empty_base() -> EvidenceBase:
    return EvidenceBase(pd.DataFrame({c: pd.Series(dtype=object if c in (
        "source", "workload", "network", "family", "kind", "gpu", "precision") else float)
        for c in COLUMNS}))


def own_base(rows: pd.DataFrame) -> EvidenceBase:
    """The user's training data as evidence (``rows``: workload, network, gpu, precision,
    batch_size, t; one row per configuration). Quality 1: same machines, same software."""
    if rows.empty:
        return empty_base()
    fam = [family_of(n) for n in rows["network"]]
    frame = rows.assign(source="own", family=[f for f, _ in fam], kind=[k for _, k in fam],
                        quality=1.0)
    return EvidenceBase(frame[list(COLUMNS)])


# ---------------------------------------------------------------------------- the file
def to_json(base: EvidenceBase) -> str:
    """The shipped file's text: stable (sorted rows, rounded figures, sorted keys), so that a
    rebuild from the same data gives the same bytes."""
    f = base.frame[list(COLUMNS)].copy()
    f["t"] = f["t"].map(lambda v: float(f"{v:.6g}"))
    f["quality"] = f["quality"].round(3)
    f = f.sort_values(["source", "workload", "gpu", "precision"], kind="mergesort")
    rows = [[None if (isinstance(v, float) and np.isnan(v)) else
             (int(v) if isinstance(v, float) and v.is_integer() and c == "batch_size" else v)
             for c, v in zip(COLUMNS, r, strict=True)]
            for r in f.itertuples(index=False, name=None)]
    head = json.dumps({"format": FORMAT, "columns": list(COLUMNS), "sources": base.sources,
                       "settings": base.settings, "calibration": base.calibration},
                      indent=1, sort_keys=True)
    body = ",\n".join(json.dumps(r, separators=(",", ":")) for r in rows)
    return head[:-2] + ',\n "rows": [\n' + body + "\n ]\n}\n"


def from_json(text: str) -> EvidenceBase:
    payload = json.loads(text)
    if payload.get("format") != FORMAT:
        raise ValueError(f"evidence file format {payload.get('format')!r}, expected {FORMAT}")
    frame = pd.DataFrame(payload["rows"], columns=payload["columns"])
    return EvidenceBase(frame, payload.get("sources", {}), payload.get("calibration", {}),
                        payload.get("settings", {}))


@functools.lru_cache(maxsize=1)
def shipped() -> EvidenceBase:
    """The public evidence base shipped with the package (empty if the file is missing)."""
    try:
        text = resources.files("gpuperf_magics.model").joinpath(EVIDENCE_FILE).read_text()
        return from_json(text)
    except (OSError, ValueError, KeyError, TypeError):
        return empty_base()

"""Spec sheets of NVIDIA GPUs, looked up by the names drivers and users give them.

The figures live in ``gpus.csv`` next to this module (one row per GPU as CUDA sees it, with the
datasheet each row comes from; its comment header says what every column means). Users add
GPUs the catalog lacks with :func:`add_gpus`.

Matching is tolerant, because the same GPU is spelled many ways (``"Tesla V100-SXM2-16GB"``,
``"V100 SXM2"``, ``"v100"``):

- case, spaces, hyphens and underscores do not matter (``"rtx4090"`` is ``"RTX 4090"``);
- vendor words are optional: ``NVIDIA``, ``Tesla``, ``GeForce``, and the words ``GPU``,
  ``Tensor Core``, ``Generation``, ``with`` and ``Design`` (``"RTX 2080 with Max-Q Design"`` is
  ``"RTX 2080 Max-Q"``). ``Quadro`` is not: it tells the Turing Quadro RTX 6000 from the
  RTX 6000 Ada;
- a memory size (``16GB``, ``80 GB``, ``40g``) and a form factor (``PCIe``, ``SXM``, ``SXM2`` ..
  ``SXM5``, ``NVL``) select among variants; memory types (``HBM3``, ``GDDR6X`` ..) are ignored;
  ``Mobile`` means ``Laptop`` (NVIDIA's name for its notebook GPUs since Ampere);
- a MIG suffix (``"NVIDIA A100-SXM4-40GB MIG 1g.5gb"``) resolves to the whole GPU;
- a model number alone finds the one GPU containing it (``"4090"``, ``"A6000"``); if several
  GPUs contain it (``"2080"``: RTX 2080, 2080 Ti and 2080 SUPER) the name is ambiguous. A name
  that says neither ``Laptop`` nor ``Max-Q`` means the desktop card when there is one
  (``"4090"`` is the RTX 4090, ``"4090 laptop"`` the RTX 4090 Laptop GPU).

When a name fits several variants of one GPU, the most common cloud variant wins: V100 → SXM2
16GB, A100 → SXM4 40GB, H100 → SXM5 (``"NVIDIA H100 80GB HBM3"``), H200 → SXM, P100 → PCIe
16GB (the variant clouds rented); A800 and H800 → SXM; GH200 → the 96 GB HBM3 part; a family
sold with two memory sizes (GTX 1060, Tesla M40, Quadro M6000, RTX A2000) → the first one. A
memory size or form factor narrows the choice first and the default's other property breaks
ties: ``"A100 80GB"`` → A100-SXM4-80GB, ``"V100 PCIe"`` → V100-PCIE-16GB. Different GPUs that
share a short name are refused with the choices: ``"RTX 6000"`` is the Turing Quadro RTX 6000
(16.3 TFLOPS FP32) or the RTX 6000 Ada (91.1 TFLOPS).

An unknown name lists close matches, first the GPU it would name with a typo fixed (``"V1OO"``:
letters O for zeros; ``"A100 80BG"``: a garbled memory unit), then similar spellings.

Examples
--------
>>> from gpuperf_magics.hardware import catalog
>>> catalog.match("a100 80gb")
'NVIDIA A100-SXM4-80GB'
>>> catalog.lookup("Tesla T4")["gpu_fp32_tflops"]
8.1

The peak a precision's matrix products run at is :func:`peak`: ``"fp32"``, ``"tf32"``,
``"fp16"`` or ``"bf16"`` (dense tensor-core figures, FP32 accumulate). A GPU without that
format's tensor cores, or whose figure is not known, gets the peak it would run at instead and
says why (BF16 on a T4 runs at the FP32 rate: Turing has FP16 tensor cores only).

>>> catalog.peak("A100 80GB", "bf16").tflops
312.0
>>> print(catalog.peak("Tesla T4", "bf16").reason)
Tesla T4 has no BF16 tensor cores (compute capability 7.5; they need 8.0): the FP32 peak
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuperf_magics._checks import is_missing
from gpuperf_magics.hardware.gpu_names import (
    _LAPTOP_WORDS,
    UnknownGPUError,
    _contains,
    _form_fits,
    _Index,
    _split,
    build_index,
    resolve,
)
from gpuperf_magics.hardware.gpu_sheet import COLUMNS as COLUMNS  # the table's columns
from gpuperf_magics.hardware.gpu_sheet import (
    REQUIRED,
    _builtin,
    _complete_from_builtin,
    _read_csv,
    _validate,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "PRECISIONS",
    "Peak",
    "UnknownGPUError",
    "add_gpus",
    "canonical_name",
    "canonical_names",
    "choice_note",
    "clear_user_gpus",
    "find",
    "gpus",
    "lookup",
    "match",
    "peak",
    "variants",
]

_user_rows: pd.DataFrame | None = None


def _table() -> pd.DataFrame:
    import pandas as pd

    builtin = _builtin()
    if _user_rows is None or _user_rows.empty:
        return builtin
    combined = pd.concat([builtin, _user_rows], ignore_index=True)
    # A user row takes the place of the built-in row of the same name; new ones go last.
    start = len(builtin)
    users = {name: start + j for j, name in enumerate(_user_rows["name"].str.lower())}
    order = [users.pop(name, i) for i, name in enumerate(builtin["name"].str.lower())]
    order += list(users.values())
    return combined.iloc[order].reset_index(drop=True)


@functools.cache
def _index() -> _Index:
    return build_index(_table())


@functools.lru_cache(maxsize=4096)
def _resolve(name: str) -> int:
    return resolve(name, _index())


def gpus() -> pd.DataFrame:
    """The GPU catalog: built-in rows (user-added ones replacing those of the same name) and
    user-added GPUs.

    Returns
    -------
    pandas.DataFrame
        One row per GPU with the columns :data:`COLUMNS`; numeric ``gpu_*`` columns are
        ``float64`` or nullable ``Int64``, missing figures are NA. A copy: changing it does
        not change the catalog.
    """
    return _table().copy()


def lookup(name: str) -> dict[str, Any]:
    """The spec-sheet features of the GPU a name refers to.

    Parameters
    ----------
    name : str
        A device name as NVML or ``torch.cuda.get_device_name()`` report it, or any spelling
        the module docstring describes (``"V100"``, ``"a100 80gb"``, ``"RTX 4090"``).

    Returns
    -------
    dict
        ``gpu_name`` (the canonical name) and every ``gpu_*`` column of the catalog, as plain
        Python values; figures the catalog lacks are ``None``. A new dict on every call.

    Raises
    ------
    UnknownGPUError
        The name fits no GPU, or several equally well; the message lists close matches and
        says how to add a GPU.
    """
    return dict(_index().rows[_resolve(str(name))])


def match(name: str) -> str | None:
    """The canonical catalog name a GPU name refers to, or ``None`` if it fits none (or
    several equally well).

    Parameters
    ----------
    name : str
        Any spelling :func:`lookup` accepts.

    Returns
    -------
    str or None
    """
    try:
        return _index().rows[_resolve(str(name))]["gpu_name"]
    except UnknownGPUError:
        return None


def canonical_name(name: str) -> str:
    """The catalog's name of the GPU ``name`` refers to (``"t4"`` → ``"Tesla T4"``).

    Raises
    ------
    UnknownGPUError
        The name fits no GPU, or several equally well (the message lists close matches).
    """
    return str(_index().rows[_resolve(str(name))]["gpu_name"])


def canonical_names(names: str | Iterable[str] | None) -> list[str]:
    """The catalog's names of the GPUs asked for, in order, each once (``["T4", "tesla t4",
    "V100"]`` → ``["Tesla T4", "Tesla V100-SXM2-16GB"]``). One name may be given alone; None
    asks for none.

    Raises
    ------
    UnknownGPUError
        A name fits no GPU, or several equally well.
    ValueError
        A name is not text (``gpus=[4090]``): a model number alone is text too, ``"4090"``.
    """
    if names is None:
        return []
    out: list[str] = []
    for name in [names] if isinstance(names, str) else names:
        if not isinstance(name, str):
            raise ValueError(f"gpus must be GPU names (strings), got {name!r}")
        canonical = canonical_name(name)
        if canonical not in out:
            out.append(canonical)
    return out


def variants(name: str) -> list[str]:
    """The catalog names ``name`` fits, the one it takes first, then the others it also
    fits (``"A100"``: the SXM4 40GB it means, then the other A100s); one name where ``name``
    says the variant.

    Raises
    ------
    UnknownGPUError
        The name fits no GPU, or several different GPUs equally well.
    """
    index = _index()
    chosen = _resolve(str(name))
    key = _split(str(name))
    if index.texts.get(key.text) == index.rows[chosen]["gpu_name"]:
        return [str(index.rows[chosen]["gpu_name"])]  # its own name or alias: no choice made
    laptop_asked = bool(_LAPTOP_WORDS & set(key.words))
    members = {i for family, rows in index.families.items() if chosen in rows
               and (family == key.family or _contains(index.family_words[family], key.words))
               for i in rows}
    others = sorted(
        (i for i in members - {chosen}
         if (key.memory_gb is None or index.memory[i] == key.memory_gb)
         and (key.form is None or _form_fits(key.form, index.forms[i]))
         and (laptop_asked or index.laptop[chosen] or not index.laptop[i])),
        key=lambda i: str(index.rows[i]["gpu_name"]))
    return [str(index.rows[i]["gpu_name"]) for i in [chosen, *others]]


def choice_note(name: str) -> str | None:
    """Which variant a short name was taken for, where it fits several: ``"A100 → NVIDIA
    A100-SXM4-40GB (also: NVIDIA A100 80GB PCIe, ...; name one to choose)"``, or None where
    the name says the variant. A silent pick read as if the name had said it.

    Raises
    ------
    UnknownGPUError
        The name fits no GPU, or several different GPUs equally well.
    """
    taken, *others = variants(name)
    if not others:
        return None
    return (f"{name} → {taken} (also: {', '.join(others)}; name one to choose)")


def find(name: str | None) -> dict[str, Any] | None:
    """What :func:`lookup` returns, or None where the name is missing, blank or fits no GPU
    (a measured device the catalog lacks: its run gave its own figures)."""
    if name is None or is_missing(name):
        return None
    try:
        return lookup(name)
    except UnknownGPUError:
        return None


def add_gpus(path_or_df: str | os.PathLike[str] | pd.DataFrame) -> list[str]:
    """Add GPUs to the catalog of this process, or correct built-in rows of the same name.

    A row named like a built-in GPU (in any case) replaces its figures; what it leaves empty
    keeps the built-in values, and the canonical name and aliases stay.

    Parameters
    ----------
    path_or_df : str, path or DataFrame
        A CSV file (leading ``#`` lines are comments) or a DataFrame with the columns of
        :func:`gpus` (any subset that includes ``name``, ``gpu_memory_gb``,
        ``gpu_bandwidth_gbs`` and ``gpu_fp32_tflops``). Put the datasheet in ``source``.

    Returns
    -------
    list of str
        The names added or replaced.

    Raises
    ------
    ValueError
        Unknown or missing columns, empty or duplicate names, figures that are not positive
        numbers, counts that are not whole, TF32 figures for GPUs older than compute
        capability 8.0. Every problem is listed with its row; nothing is added.

    Examples
    --------
    >>> import pandas as pd
    >>> from gpuperf_magics.hardware import catalog
    >>> catalog.add_gpus(pd.DataFrame([{
    ...     "name": "NVIDIA Example 9000", "gpu_memory_gb": 24, "gpu_bandwidth_gbs": 900,
    ...     "gpu_fp32_tflops": 40, "source": "vendor datasheet"}]))
    ['NVIDIA Example 9000']
    >>> catalog.match("example 9000")
    'NVIDIA Example 9000'
    >>> catalog.clear_user_gpus()
    """
    global _user_rows
    import pandas as pd

    if isinstance(path_or_df, pd.DataFrame):
        frame = path_or_df.astype(object)
        origin = "the DataFrame"
    else:
        frame = _read_csv(path_or_df)
        origin = os.fspath(path_or_df)
    if frame.empty:
        raise ValueError(f"{origin} has no GPU rows")
    table, errors = _validate(frame, required=REQUIRED)
    if errors:
        raise ValueError(
            f"cannot add GPUs from {origin} (rows counted from 1 below the header):\n  "
            + "\n  ".join(errors)
            + "\nFix these and call add_gpus() again; the comment header of gpus.csv in "
            "gpuperf_magics/hardware says what each column means and its unit."
        )
    table["source"] = table["source"].map(lambda s: s or "user-supplied")
    table = _complete_from_builtin(table)
    if _user_rows is None:
        _user_rows = table
    else:
        keep = ~_user_rows["name"].str.lower().isin(set(table["name"].str.lower()))
        _user_rows = pd.concat([_user_rows[keep], table], ignore_index=True)
    _invalidate()
    return table["name"].tolist()


def clear_user_gpus() -> None:
    """Forget every GPU added with :func:`add_gpus` in this process."""
    global _user_rows
    _user_rows = None
    _invalidate()


def _invalidate() -> None:
    _index.cache_clear()
    _resolve.cache_clear()


# ------------------------------------------------------------------ peaks by precision
#: The catalog column holding each precision's peak (dense; tensor cores but for FP32).
PRECISIONS = {"fp32": "gpu_fp32_tflops", "tf32": "gpu_tf32_tflops",
              "fp16": "gpu_fp16_tflops", "bf16": "gpu_bf16_tflops"}
_SPELLINGS = {"float32": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16"}
#: The compute capability each format's tensor cores arrived with (Volta 7.0, Ampere 8.0).
_TENSOR_SINCE = {"fp16": 7.0, "tf32": 8.0, "bf16": 8.0}


@dataclass(frozen=True)
class Peak:
    """The peak a GPU runs one precision's matrix products at.

    Attributes
    ----------
    tflops : float or None
        Dense TFLOPS; None only when the GPU's FP32 peak is unknown too.
    precision : str
        The precision whose figure ``tflops`` is: the one asked for, or what it fell back to.
    asked : str
        The precision asked for, in the catalog's spelling (``"bfloat16"`` is ``"bf16"``).
    reason : str
        Empty when ``tflops`` is the asked precision's own figure; else why another was used
        (the GPU has no such tensor cores, or its figure is not known).
    """

    tflops: float | None
    precision: str
    asked: str
    reason: str = ""


def peak(gpu: str | Mapping[str, Any], precision: str) -> Peak:
    """The peak TFLOPS of ``precision`` on a GPU, falling back where it has no such figure.

    A GPU without tensor cores for the format (BF16 and TF32 need compute capability 8.0,
    FP16 7.0) runs it at its FP32 peak, as does one whose figure is not known; BF16 with an
    unknown figure takes the FP16 one where that is known (every NVIDIA sheet quoting both
    gives them equal). The fallback says so in ``reason``, so a prediction can say which peak
    it followed.

    Parameters
    ----------
    gpu : str or mapping
        A GPU name (any spelling :func:`lookup` accepts) or the dict :func:`lookup` returns.
    precision : str
        ``"fp32"``, ``"tf32"``, ``"fp16"`` or ``"bf16"`` (also ``"float32"``, ``"float16"``,
        ``"half"``, ``"bfloat16"``; case does not matter).

    Returns
    -------
    Peak

    Raises
    ------
    ValueError
        ``precision`` is none of those.
    UnknownGPUError
        The name fits no GPU, or several equally well.
    """
    asked = _precision(precision)
    specs = lookup(gpu) if isinstance(gpu, str) else gpu
    name = specs.get("gpu_name") or "the GPU"
    own = _figure(specs, asked)
    if own is not None or asked == "fp32":
        return Peak(own, asked, asked)
    capability = _figure(specs, "gpu_compute_capability")
    if capability is not None and capability < _TENSOR_SINCE[asked]:
        why = (f"{name} has no {asked.upper()} tensor cores (compute capability "
               f"{capability:.1f}; they need {_TENSOR_SINCE[asked]:.1f})")
    else:
        why = f"no {asked.upper()} tensor peak is known for {name}"
        fp16 = _figure(specs, "fp16")
        if asked == "bf16" and fp16 is not None:
            return Peak(fp16, "fp16", asked, f"{why}: the FP16 peak, which BF16 equals on "
                                              "every GPU NVIDIA quotes both for")
    return Peak(_figure(specs, "fp32"), "fp32", asked, f"{why}: the FP32 peak")


def _precision(precision: str) -> str:
    key = str(precision).strip().lower()
    key = _SPELLINGS.get(key, key)
    if key not in PRECISIONS:
        raise ValueError(
            f"precision must be one of {', '.join(map(repr, PRECISIONS))} (or "
            f"{', '.join(map(repr, _SPELLINGS))}); got {precision!r}"
        )
    return key


def _figure(specs: Mapping[str, Any], key: str) -> float | None:
    """A positive finite figure of ``specs`` (a precision or a column name), else None."""
    value = specs.get(PRECISIONS.get(key, key))
    if value is None or is_missing(value):
        return None
    value = float(value)
    return value if value > 0 and math.isfinite(value) else None

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
"""

from __future__ import annotations

import difflib
import functools
import io
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from gpuperf_magics._checks import is_missing, plain, positive_number
from gpuperf_magics.columns import KINDS

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "COLUMNS",
    "UnknownGPUError",
    "add_gpus",
    "canonical_name",
    "canonical_names",
    "clear_user_gpus",
    "find",
    "gpus",
    "lookup",
    "match",
]

#: Columns of the catalog, in order.
COLUMNS = (
    "name",
    "aliases",
    "gpu_architecture",
    "gpu_compute_capability",
    "gpu_sm_count",
    "gpu_cuda_cores",
    "gpu_clock_mhz",
    "gpu_memory_gb",
    "gpu_bandwidth_gbs",
    "gpu_fp32_tflops",
    "gpu_tf32_tflops",
    "gpu_fp16_tflops",
    "gpu_release_year",
    "form_factor",
    "tdp_w",
    "notes",
    "source",
)
# The ``gpu_*`` columns take their kind from the registry (so ``gpu_clock_mhz`` is a float
# here as in a run); the catalog's own columns are text but for the board power.
_TEXT = tuple(c for c in COLUMNS if KINDS.get(c, "str") == "str" and c != "tdp_w")
_INTEGER = (*(c for c in COLUMNS if KINDS.get(c) == "int"), "tdp_w")
_FLOAT = tuple(c for c in COLUMNS if KINDS.get(c) == "float")
#: Columns a user-added GPU must fill: what a prediction for another GPU needs.
REQUIRED = ("name", "gpu_memory_gb", "gpu_bandwidth_gbs", "gpu_fp32_tflops")

# Family (the name without vendor words, memory size and form factor) -> the variant a bare
# family name means: the one most clouds rent.
_FAMILY_DEFAULTS = {
    "v100": "Tesla V100-SXM2-16GB",
    "a100": "NVIDIA A100-SXM4-40GB",
    "h100": "NVIDIA H100 80GB HBM3",
    "h200": "NVIDIA H200",
    "p100": "Tesla P100-PCIE-16GB",
    "a800": "NVIDIA A800-SXM4-80GB",
    "h800": "NVIDIA H800",
    "gh200": "NVIDIA GH200 480GB",
    # Sold with two memory sizes under one model name: the original one.
    "gtx1060": "NVIDIA GeForce GTX 1060 6GB",
    "m40": "Tesla M40",
    "quadrom6000": "Quadro M6000",
    "rtxa2000": "NVIDIA RTX A2000",
}

# "Quadro" is not among them: "Quadro RTX 6000" (Turing) and "RTX 6000 Ada" are different GPUs.
_VENDOR_WORDS = frozenset(
    {"nvidia", "tesla", "geforce", "gpu", "tensor", "core", "generation", "with", "design"}
)
# Words that mark a notebook GPU; "mobile" is read as "laptop".
_LAPTOP_WORDS = frozenset({"laptop", "max", "maxq"})
_MEMORY_TYPES = re.compile(r"^(hbm\d*e?|gddr\d*x?|ddr\d*)$")
_FORM_FACTORS = re.compile(r"^(pcie|sxm\d?|nvl)$")
_MEMORY_UNITS = frozenset({"gb", "g", "gib"})


class UnknownGPUError(ValueError):
    """A GPU name that is not in the catalog, or that fits several GPUs equally well.

    Attributes
    ----------
    name : str
        The name that was looked up.
    candidates : list of str
        Canonical names of the closest GPUs in the catalog (may be empty).
    """

    def __init__(
        self, name: str, candidates: list[str] | None = None, reason: str | None = None
    ) -> None:
        self.name = name
        self.candidates = list(candidates or [])
        self.reason = reason
        why = reason or f"unknown GPU {name!r}"
        close = f" Close matches: {', '.join(self.candidates)}." if self.candidates else ""
        super().__init__(
            f"{why}.{close} If your GPU is missing, add its datasheet figures with "
            "gpuperf_magics.hardware.catalog.add_gpus('my_gpus.csv') (a CSV or DataFrame with "
            f"the columns of gpus(); required: {', '.join(REQUIRED)})."
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.name, self.candidates, self.reason))


@dataclass(frozen=True)
class _Key:
    """A name taken apart: what identifies the GPU, and what selects among its variants."""

    family: str  # the words that name the model, joined: "rtx4090", "a100"
    words: tuple[str, ...]  # the same words apart: ("rtx", "4090")
    memory_gb: int | None
    form: str | None
    text: str  # the name's words, lower case, without vendor words: for close matches


@dataclass
class _Index:
    rows: list[dict[str, Any]]  # gpu_* features + gpu_name, per row of the table
    exact: dict[tuple[str, int | None, str | None], int]
    families: dict[str, list[int]]
    family_words: dict[str, tuple[str, ...]]
    forms: list[str | None]
    memory: list[int | None]
    laptop: list[bool]  # notebook GPUs: a name without "laptop" or "max-q" means the desktop card
    texts: dict[str, str]  # normalised text of every name and alias -> canonical name


_user_rows: pd.DataFrame | None = None


def _split(name: str) -> _Key:
    text = name.lower()
    # A MIG slice is reported as "<GPU> MIG 1g.5gb": its specs are the whole GPU's.
    text = re.sub(r"\bmig\b.*$", "", text)
    text = re.sub(r"\bpci[\s_-]*e\b", "pcie", text)
    tokens: list[str] = []
    for token in re.split(r"[^a-z0-9]+", text):
        # "80gb", "1080ti", "750m": a number glued to a suffix is two words.
        glued = re.fullmatch(r"(\d+)([a-z]+)", token)
        tokens.extend(glued.groups() if glued else [token] if token else [])
    family: list[str] = []
    memory: int | None = None
    form: str | None = None
    words: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        if token.isdigit() and nxt in _MEMORY_UNITS:
            memory = int(token)
            words.append(f"{token}gb")
            i += 2
            continue
        i += 1
        if token in _VENDOR_WORDS or _MEMORY_TYPES.match(token):
            continue
        if token == "mobile":
            token = "laptop"
        words.append(token)
        if _FORM_FACTORS.match(token):
            form = token
        else:
            family.append(token)
    return _Key("".join(family), tuple(family), memory, form, " ".join(words))


def _read_csv(source: Any) -> pd.DataFrame:
    """Read a catalog CSV: leading ``#`` lines are comments."""
    import pandas as pd

    if hasattr(source, "read_text"):
        text = source.read_text(encoding="utf-8")
    else:
        with open(source, encoding="utf-8") as file:
            text = file.read()
    lines = text.splitlines(keepends=True)
    while lines and lines[0].lstrip().startswith("#"):
        lines.pop(0)
    return pd.read_csv(io.StringIO("".join(lines)), dtype=str, keep_default_na=False)


@functools.cache
def _builtin() -> pd.DataFrame:
    frame = _read_csv(resources.files(__package__).joinpath("gpus.csv"))
    table, errors = _validate(frame, required=COLUMNS[:1])
    if errors:  # pragma: no cover - guarded by tests/test_catalog.py
        raise RuntimeError("gpus.csv is invalid:\n" + "\n".join(errors))
    return table


def _validate(frame: pd.DataFrame, required: tuple[str, ...]) -> tuple[pd.DataFrame, list[str]]:
    """Typed copy of a catalog table and the problems found, one message per problem."""
    import pandas as pd

    errors: list[str] = []
    unknown = [str(c) for c in frame.columns if c not in COLUMNS]
    if unknown:
        errors.append(
            f"unknown column(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(COLUMNS)}"
        )
    missing = [c for c in required if c not in frame.columns]
    if missing:
        errors.append(f"missing required column(s): {', '.join(missing)}")
    if errors:
        return frame, errors
    records = frame.to_dict("records")
    columns: dict[str, list[Any]] = {column: [] for column in COLUMNS}
    seen: set[str] = set()
    for number, record in enumerate(records, start=1):
        row = {c: None if is_missing(record.get(c)) else record.get(c) for c in COLUMNS}
        name = str(row["name"]).strip() if row["name"] is not None else ""
        where = f"row {number} ({name!r})" if name else f"row {number}"
        if not name:
            errors.append(f"{where}: 'name' is empty; give the name NVML/torch report")
        elif name.lower() in seen:
            errors.append(f"{where}: duplicate name")
        seen.add(name.lower())
        for column in _TEXT:
            columns[column].append("" if row[column] is None else str(row[column]).strip())
        for column in _INTEGER + _FLOAT:
            try:
                value = positive_number(row[column], repr(column), whole=column in _INTEGER)
            except ValueError as exc:
                errors.append(f"{where}: {exc}")
                value = None
            else:
                if value is None and column in required:
                    errors.append(f"{where}: {column!r} is required")
            columns[column].append(value)
        capability = columns["gpu_compute_capability"][-1]
        if columns["gpu_tf32_tflops"][-1] is not None:
            if capability is None:
                errors.append(f"{where}: 'gpu_tf32_tflops' given without 'gpu_compute_capability'")
            elif capability < 8.0:
                errors.append(
                    f"{where}: 'gpu_tf32_tflops' given but TF32 tensor cores need compute "
                    f"capability 8.0 or newer (got {capability:g})"
                )
    if errors:
        return frame, errors
    out = pd.DataFrame(
        {
            column: pd.array(
                values,
                dtype="Int64" if column in _INTEGER else "float64" if column in _FLOAT else "str",
            )
            for column, values in columns.items()
        }
    )
    return out, []


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
    table = _table()
    features = [c for c in COLUMNS if c.startswith("gpu_")]
    rows: list[dict[str, Any]] = []
    exact: dict[tuple[str, int | None, str | None], int] = {}
    families: dict[str, list[int]] = {}
    family_words: dict[str, tuple[str, ...]] = {}
    forms: list[str | None] = []
    memory: list[int | None] = []
    laptop: list[bool] = []
    texts: dict[str, str] = {}
    for i, record in enumerate(table.to_dict("records")):
        row = {"gpu_name": record["name"]}
        for column in features:
            row[column] = _plain(record[column])
        rows.append(row)
        form = _split(record["form_factor"]).form if record["form_factor"] else None
        forms.append(form)
        size = row["gpu_memory_gb"]
        memory.append(round(size) if size is not None else None)
        laptop.append(record["form_factor"].strip().lower() == "laptop")
        names = [record["name"], *(a for a in record["aliases"].split(";") if a.strip())]
        for name in names:
            key = _split(name)
            # Later rows (user-added ones) win a clash of spellings.
            exact[(key.family, key.memory_gb, key.form)] = i
            if i not in families.setdefault(key.family, []):
                families[key.family].append(i)
            family_words[key.family] = key.words
            texts[key.text] = record["name"]
    return _Index(rows, exact, families, family_words, forms, memory, laptop, texts)


def _plain(value: Any) -> Any:
    """A pandas cell as a plain Python value; missing -> None."""
    return None if is_missing(value) else plain(value)


@functools.lru_cache(maxsize=4096)
def _resolve(name: str) -> int:
    index = _index()
    key = _split(name)
    if not key.family:
        raise UnknownGPUError(name, [], reason=f"{name!r} names no GPU model")
    hit = index.exact.get((key.family, key.memory_gb, key.form))
    if hit is not None:
        return hit
    members = index.families.get(key.family)
    if members is None:
        # Part of a name, e.g. "4090" or "6000 Ada": the one GPU (or family) whose name
        # contains those words.
        groups = {
            tuple(rows)
            for family, rows in index.families.items()
            if _contains(index.family_words[family], key.words)
        }
        if len(groups) > 1 and not _LAPTOP_WORDS & set(key.words):
            desktop = {g for g in groups if not all(index.laptop[i] for i in g)}
            groups = desktop or groups
        if not groups:
            raise UnknownGPUError(name, _close_matches(key.text or name.lower()))
        if len(groups) > 1:
            found = sorted(
                {i for rows in groups for i in rows}, key=lambda i: index.rows[i]["gpu_name"]
            )
            raise UnknownGPUError(
                name,
                [index.rows[i]["gpu_name"] for i in found],
                reason=f"GPU name {name!r} is ambiguous; it fits {_describe(found, index)}; "
                "give the full name",
            )
        members = list(groups.pop())
    candidates = [
        i
        for i in members
        if (key.memory_gb is None or index.memory[i] == key.memory_gb)
        and (key.form is None or _form_fits(key.form, index.forms[i]))
    ]
    if not candidates:
        offered = [index.rows[i]["gpu_name"] for i in members]
        raise UnknownGPUError(
            name, offered, reason=f"no variant of {name!r} has that memory size or form factor"
        )
    if len(candidates) == 1:
        return candidates[0]
    return _pick_default(name, key.family, candidates, index)


def _describe(rows: list[int], index: _Index) -> str:
    """The GPUs of ``rows`` with what tells them apart: "Quadro RTX 6000 (Turing, 16.3 TFLOPS
    FP32), NVIDIA RTX 6000 Ada Generation (Ada Lovelace, 91.1 TFLOPS FP32)"."""
    described = []
    for i in rows:
        row = index.rows[i]
        facts = [f for f in (row["gpu_architecture"],) if f]
        if row["gpu_fp32_tflops"] is not None:
            facts.append(f"{row['gpu_fp32_tflops']:g} TFLOPS FP32")
        described.append(f"{row['gpu_name']} ({', '.join(facts)})" if facts else row["gpu_name"])
    return ", ".join(described)


def _contains(words: tuple[str, ...], part: tuple[str, ...]) -> bool:
    """Whether ``part`` occurs in ``words`` as consecutive words."""
    n = len(part)
    return any(words[i : i + n] == part for i in range(len(words) - n + 1))


def _form_fits(wanted: str, actual: str | None) -> bool:
    if actual is None:
        return False
    # "SXM" is any SXM generation; "SXM4" only SXM4.
    return actual == wanted or (wanted == "sxm" and actual.startswith("sxm"))


def _pick_default(name: str, family: str, candidates: list[int], index: _Index) -> int:
    names = [index.rows[i]["gpu_name"] for i in candidates]
    default = _FAMILY_DEFAULTS.get(family)
    if default is None:
        raise UnknownGPUError(
            name, names, reason=f"GPU name {name!r} fits several GPUs; give the full name"
        )
    if default in names:
        return candidates[names.index(default)]
    # The default is filtered out ("A100 80GB"): keep as much of it as the name allows.
    standard = next((i for i, row in enumerate(index.rows) if row["gpu_name"] == default), None)
    if standard is None:  # pragma: no cover - the defaults are tested against gpus.csv
        raise UnknownGPUError(name, names, reason=f"GPU name {name!r} fits several GPUs")

    def closeness(i: int) -> tuple[bool, bool]:
        return (
            index.forms[i] == index.forms[standard],
            index.memory[i] == index.memory[standard],
        )

    best = max(closeness(i) for i in candidates)
    winners = [i for i in candidates if closeness(i) == best]
    if len(winners) > 1:
        raise UnknownGPUError(
            name,
            [index.rows[i]["gpu_name"] for i in winners],
            reason=f"GPU name {name!r} fits several GPUs; give the full name",
        )
    return winners[0]


def _close_matches(text: str) -> list[str]:
    """Catalog names near ``text``: first what a fixed typo names ("v1oo" is "v100", "a100 80
    bg" is "a100 80 gb"), then names with the same model number ("4090 ultra" shares "4090"
    with the RTX 4090), then the whole spelling, then near model numbers ("tesla v10" is near
    "v100")."""
    index = _index()
    names: list[str] = []
    for respelt in _respellings(text):
        try:
            names.append(index.rows[_resolve(respelt)]["gpu_name"])
        except UnknownGPUError:
            continue
    texts = list(index.texts)
    # Names that carry the same model number come first ("rtx 3090 super" is nearer the RTX
    # 3090 than the RTX 4080 SUPER, whatever the letters say), the closest spelling first.
    words = text.lower().split()
    model = [w for w in words if any(c.isdigit() for c in w)
             and not re.fullmatch(r"\d+gb", w) and not _FORM_FACTORS.match(w)]
    laptop = {row["gpu_name"]: index.laptop[i] for i, row in enumerate(index.rows)}
    desktop_first = not _LAPTOP_WORDS & set(words)
    found = sorted(
        (t for t in texts if model and all(m in t.split() for m in model)),
        key=lambda t: (
            desktop_first and laptop[index.texts[t]],
            -difflib.SequenceMatcher(None, text, t).ratio(),
        ),
    )
    found += difflib.get_close_matches(text, texts, n=10, cutoff=0.6)
    tokens = sorted({w for t in texts for w in t.split() if any(c.isdigit() for c in w)})
    for word in text.lower().split():
        if not any(c.isdigit() for c in word):
            continue  # "tesla", "laptop": too common or no help
        for token in difflib.get_close_matches(word, tokens, n=3, cutoff=0.7):
            found += [t for t in texts if token in t.split()]
    for match_text in found:
        canonical = index.texts[match_text]
        if canonical not in names:
            names.append(canonical)
    return names[:5]


def _respellings(text: str) -> list[str]:
    """``text`` with the typos people make in GPU names fixed, if it has any: the letter O for
    a zero and I or L for a one inside a model number ("V1OO", "H10O", "A1OO"), and a garbled
    memory unit after a number ("80BG", "80 gn")."""
    words = text.lower().split()
    fixed = []
    for j, word in enumerate(words):
        if any(c.isdigit() for c in word):
            first = next(k for k, c in enumerate(word) if c.isdigit())
            head, tail = word[:first], word[first:]
            # After the first digit, O is a zero; I and L only between digits ("1080ti" stays).
            tail = tail.replace("o", "0")
            tail = re.sub(r"(?<=\d)[il](?=\d)", "1", tail)
            word = head + tail
        elif (
            j > 0
            and words[j - 1].isdigit()
            and 1 < len(word) <= 3
            and word not in _MEMORY_UNITS
            and difflib.SequenceMatcher(None, word, "gb").ratio() >= 0.5
        ):
            word = "gb"
        fixed.append(word)
    respelt = " ".join(fixed)
    return [respelt] if respelt != " ".join(words) else []


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


def _complete_from_builtin(table: pd.DataFrame) -> pd.DataFrame:
    """A row that replaces a built-in GPU keeps its canonical name and every figure it does
    not give (a corrected bandwidth must not erase the architecture and SM count)."""
    builtin = _builtin()
    by_name = {name.lower(): i for i, name in enumerate(builtin["name"])}
    table = table.copy()
    for j in range(len(table)):
        i = by_name.get(str(table.at[j, "name"]).lower())
        if i is None:
            continue
        table.at[j, "name"] = builtin.at[i, "name"]
        if table.at[j, "source"] == "user-supplied":
            table.at[j, "source"] = f"user-supplied; other figures: {builtin.at[i, 'source']}"
        for col in table.columns:
            if col in builtin.columns and is_missing(table.at[j, col]):
                table.at[j, col] = builtin.at[i, col]
    return table


def clear_user_gpus() -> None:
    """Forget every GPU added with :func:`add_gpus` in this process."""
    global _user_rows
    _user_rows = None
    _invalidate()


def _invalidate() -> None:
    _index.cache_clear()
    _resolve.cache_clear()

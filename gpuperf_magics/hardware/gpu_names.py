"""What GPU a name refers to: the tolerant matching the catalog's module docstring describes.

A name is taken apart into a :class:`_Key` (the words naming the model, a memory size, a form
factor); an :class:`_Index` of every catalog spelling answers it, choosing the common cloud
variant where several fit, and an unknown name gets close matches.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuperf_magics._checks import is_missing, plain
from gpuperf_magics.hardware.gpu_sheet import COLUMNS, REQUIRED

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

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


def _plain(value: Any) -> Any:
    """A pandas cell as a plain Python value; missing -> None."""
    return None if is_missing(value) else plain(value)


def resolve(name: str, index: _Index) -> int:
    """The row of ``index`` that ``name`` refers to.

    Raises
    ------
    UnknownGPUError
        The name fits no GPU, or several equally well.
    """
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
            raise UnknownGPUError(name, _close_matches(key.text or name.lower(), index))
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


def _close_matches(text: str, index: _Index) -> list[str]:
    """Catalog names near ``text``: first what a fixed typo names ("v1oo" is "v100", "a100 80
    bg" is "a100 80 gb"), then names with the same model number ("4090 ultra" shares "4090"
    with the RTX 4090), then the whole spelling, then near model numbers ("tesla v10" is near
    "v100")."""
    names: list[str] = []
    for respelt in _respellings(text):
        try:
            names.append(index.rows[resolve(respelt, index)]["gpu_name"])
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
        # Short model numbers are too short for a ratio ("t5" against "t4" is 0.5): one digit
        # off behind the same letters is near ("t5" is near the T4, "l5" the L4).
        found += [t for t in texts if any(_one_digit_off(word, w) for w in t.split())]
    for match_text in found:
        canonical = index.texts[match_text]
        if canonical not in names:
            names.append(canonical)
    return names[:5]


def _one_digit_off(word: str, token: str) -> bool:
    """True when ``word`` and ``token`` are one letter prefix and digits of one length that
    differ in exactly one place ("t5" and "t4"; not "t4" and "t40")."""
    a, b = re.fullmatch(r"([a-z]+)(\d+)", word), re.fullmatch(r"([a-z]+)(\d+)", token)
    if a is None or b is None or a[1] != b[1] or len(a[2]) != len(b[2]):
        return False
    return sum(x != y for x, y in zip(a[2], b[2], strict=True)) == 1


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


def build_index(table: pd.DataFrame) -> _Index:
    """Every spelling of every GPU of ``table`` (a catalog table), ready for :func:`resolve`."""
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

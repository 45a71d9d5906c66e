"""Candidate terms for the linear models: the paper's augmentation and per-iteration terms.

The paper (Lattuada et al. 2022, aMLLibrary) augments the raw features with their inverses
``1/x`` and all pairwise products of raw and inverse columns, never ``x * (1/x)`` (that is the
constant 1). :func:`augment` builds exactly that set. :func:`per_iteration_terms` builds the
default model's candidates: a constant (set-up time) and ``iterations`` times every augmented
term (plus ``iterations`` alone, the per-iteration floor), so each term is a time that grows with
the number of iterations, as training time does.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np


def augment(
    values: np.ndarray, names: Sequence[str], *, inverses: bool = True
) -> tuple[np.ndarray, list[str]]:
    """Raw features, their inverses and their pairwise products (the paper's augmentation).

    Parameters
    ----------
    values : ndarray of shape (n_samples, n_features)
        Raw feature values.
    names : sequence of str
        One name per column.
    inverses : bool, default True
        Add ``1/x`` for every column with no zero value (a column containing 0 has no inverse).

    Returns
    -------
    terms : ndarray of shape (n_samples, n_terms)
        With ``p`` features that all have inverses, ``n_terms = 2p + C(2p, 2) - p``
        (72 for 6 features): ``2p`` single columns, then every pair except ``x * (1/x)``.
    term_names : list of str
        ``"a"``, ``"1/a"``, ``"a*b"``, ``"a*1/b"`` ...
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 2 or values.shape[1] != len(names):
        raise ValueError("values must be 2-D with one column per name")
    cols: list[np.ndarray] = []
    labels: list[str] = []
    origin: list[int] = []  # which raw feature a single column comes from
    for j, name in enumerate(names):
        cols.append(values[:, j])
        labels.append(str(name))
        origin.append(j)
    if inverses:
        for j, name in enumerate(names):
            col = values[:, j]
            if np.all(col != 0):
                cols.append(1.0 / col)
                labels.append(f"1/{name}")
                origin.append(j)
    singles = len(cols)
    out = list(cols)
    out_names = list(labels)
    for a, b in combinations(range(singles), 2):
        if origin[a] == origin[b]:
            continue  # x * 1/x == 1
        out.append(cols[a] * cols[b])
        out_names.append(f"{labels[a]}*{labels[b]}")
    if not out:
        return np.empty((values.shape[0], 0)), []
    return np.column_stack(out), out_names


def per_iteration_terms(
    values: np.ndarray, names: Sequence[str], iterations: np.ndarray
) -> tuple[np.ndarray, list[str]]:
    """Candidate terms of the default model: ``1``, ``it`` and ``it * t`` for augmented ``t``.

    Parameters
    ----------
    values : ndarray of shape (n_samples, n_features)
        Raw features other than the iteration count.
    names : sequence of str
        Their names.
    iterations : ndarray of shape (n_samples,)
        Iterations each time covers (all ones for per-iteration data).

    Returns
    -------
    terms, term_names
        Duplicate columns (for instance ``1`` and ``it`` when all iterations are 1) are removed,
        keeping the first.
    """
    iterations = np.asarray(iterations, dtype=float)
    aug, aug_names = augment(values, names)
    cols = [np.ones_like(iterations), iterations]
    labels = ["1", "it"]
    for j, name in enumerate(aug_names):
        cols.append(iterations * aug[:, j])
        labels.append(f"it*{name}")
    terms = np.column_stack(cols)
    keep = _distinct_columns(terms)
    return terms[:, keep], [labels[j] for j in keep]


def physical_terms(
    values: np.ndarray,
    names: Sequence[str],
    iterations: np.ndarray,
    hardware: np.ndarray | None,
    extra: dict[str, np.ndarray] | None = None,
) -> tuple[np.ndarray, list[str]]:
    """Per-iteration terms split into a GPU-independent part and a part that scales with the GPU.

    ``1``, ``it``, ``it * t`` for every augmented term ``t`` of the non-hardware features, and,
    when ``hardware`` is given, ``it * h`` and ``it * t * h`` with ``h = 1/peak + ρ/bandwidth``
    (the seconds one unit of work takes on that GPU). A model of these terms splits each
    iteration into a floor (input pipeline, launches, CPU) that no GPU speeds up and a compute
    part that a faster GPU shrinks, which is what moving to another GPU needs.

    Parameters
    ----------
    values : ndarray of shape (n_samples, n_features)
        Non-hardware features (batch size, GPU count ...).
    names : sequence of str
        Their names.
    iterations : ndarray of shape (n_samples,)
        Iterations each time covers.
    hardware : ndarray of shape (n_samples,) or None
        The hardware factor ``h`` of each row (named ``"h"`` in the term names).
    extra : dict of str to ndarray, optional
        Further GPU-independent per-iteration columns, offered as ``it * x`` only (not
        augmented, not multiplied by ``h``): e.g. ``gpu_sync = 1 - 1/gpu_count``, the share of
        the gradients that data-parallel training exchanges per step, a time that the host and
        its PCIe links set and that a faster GPU does not shrink.

    Returns
    -------
    terms, term_names
        Duplicate columns removed, keeping the first (GPU-independent terms come first).
    """
    iterations = np.asarray(iterations, dtype=float)
    aug, aug_names = augment(values, names) if len(names) else (np.empty((len(iterations), 0)), [])
    cols = [np.ones_like(iterations), iterations]
    labels = ["1", "it"]
    for j, name in enumerate(aug_names):
        cols.append(iterations * aug[:, j])
        labels.append(f"it*{name}")
    for name, col in (extra or {}).items():
        cols.append(iterations * np.asarray(col, dtype=float))
        labels.append(f"it*{name}")
    if hardware is not None:
        h = np.asarray(hardware, dtype=float)
        cols.append(iterations * h)
        labels.append("it*h")
        for j, name in enumerate(aug_names):
            cols.append(iterations * aug[:, j] * h)
            labels.append(f"it*{name}*h")
    terms = np.column_stack(cols)
    keep = _distinct_columns(terms)
    return terms[:, keep], [labels[j] for j in keep]


def _distinct_columns(terms: np.ndarray) -> list[int]:
    """Indices of the first of each group of (relatively) identical columns.

    Column ``j`` is dropped when it is close (``np.allclose(scaled_j, scaled_i, rtol=1e-9,
    atol=1e-12)``, element by element as np.isclose spells it) to an earlier kept column
    ``i``, each scaled by its largest magnitude. On small tables every pair is compared in one
    pass (the per-network fits: numpy's per-call cost is what counts there); on large ones
    each column against the kept ones only (the arithmetic is what counts).
    """
    n, p = terms.shape
    scale = np.max(np.abs(terms), axis=0)
    scale[scale == 0] = 1.0
    scaled = terms / scale
    if n * p * p <= PAIRWISE_AT_ONCE:
        with np.errstate(invalid="ignore"):
            x, s = scaled[:, :, None], scaled[:, None, :]
            close = ((np.abs(x - s) <= 1e-12 + 1e-9 * np.abs(s)) & np.isfinite(s)
                     | (x == s)).all(axis=0)  # close[j, i]: column j is close to column i
        keep: list[int] = []
        for j in range(p):
            if not (keep and close[j, keep].any()):
                keep.append(j)
        return keep
    return _distinct_scaled(scaled)


#: Elements (rows × columns²) up to which :func:`_distinct_columns` compares all pairs at once.
PAIRWISE_AT_ONCE = 1 << 18


def _distinct_scaled(scaled: np.ndarray) -> list[int]:
    """:func:`_distinct_columns` of scaled columns, each compared with the kept ones."""
    keep: list[int] = []
    seen = np.empty_like(scaled)  # the kept columns side by side
    for j in range(scaled.shape[1]):
        x = scaled[:, j][:, None]
        if keep:
            s = seen[:, :len(keep)]
            with np.errstate(invalid="ignore"):
                close = (np.abs(x - s) <= 1e-12 + 1e-9 * np.abs(s)) & np.isfinite(s) | (x == s)
            if close.all(axis=0).any():
                continue
        seen[:, len(keep)] = scaled[:, j]
        keep.append(j)
    return keep


def evaluate_terms(columns: dict[str, np.ndarray], term_names: Sequence[str]) -> np.ndarray:
    """Values of named terms (as produced by :func:`augment` / :func:`per_iteration_terms`).

    Parameters
    ----------
    columns : dict of str to ndarray
        Raw feature values by name; ``"it"`` is the iteration count.
    term_names : sequence of str
        Names such as ``"1"``, ``"it"``, ``"it*batch_size*1/gpu_fp32_tflops"``.

    Returns
    -------
    ndarray of shape (n_samples, n_terms)
    """
    n = len(next(iter(columns.values())))
    out = np.ones((n, len(term_names)))
    for j, term in enumerate(term_names):
        if term == "1":
            continue
        for factor in _split_factors(term):
            if factor.startswith("1/"):
                out[:, j] /= columns[factor[2:]]
            else:
                out[:, j] *= columns[factor]
    return out


def _split_factors(term: str) -> list[str]:
    """``"it*a*1/b"`` -> ``["it", "a", "1/b"]``."""
    return term.split("*")


class Table:
    """Float feature columns by name, each a contiguous array: what the per-network models
    read of a feature frame.

    A fit reads the same few columns hundreds of times (every candidate, refit and
    prediction); a DataFrame's ``frame[col]`` costs far more than the arithmetic on a few
    dozen rows, so the models convert a frame once (:meth:`of`) and index arrays after.
    The values are the frame's own (``to_numpy(dtype=float)``), so nothing a model computes
    changes.
    """

    __slots__ = ("_cols", "_n")

    def __init__(self, cols: dict[str, np.ndarray], n: int) -> None:
        self._cols = cols
        self._n = n

    @classmethod
    def of(cls, features: object) -> Table:
        """``features`` (a DataFrame of numeric columns, or a Table) as a Table."""
        if isinstance(features, Table):
            return features
        frame: Any = features
        cols = {c: np.ascontiguousarray(frame[c].to_numpy(dtype=float)) for c in frame.columns}
        return cls(cols, len(frame))

    @property
    def columns(self) -> list[str]:
        return list(self._cols)

    def __len__(self) -> int:
        return self._n

    def __contains__(self, name: object) -> bool:
        return name in self._cols

    def __getitem__(self, name: str) -> np.ndarray:
        return self._cols[name]

    def matrix(self, names: Sequence[str]) -> np.ndarray:
        """The columns ``names`` side by side, shape (rows, len(names))."""
        if not len(names):
            return np.empty((self._n, 0))
        return np.column_stack([self._cols[c] for c in names])

    def take(self, rows: np.ndarray) -> Table:
        """The rows ``rows`` (integer positions or a boolean mask)."""
        rows = np.asarray(rows)
        n = int(rows.sum()) if rows.dtype == bool else len(rows)
        return Table({c: v[rows] for c, v in self._cols.items()}, n)

    def select(self, names: Sequence[str]) -> Table:
        """Only the columns ``names``, in that order."""
        return Table({c: self._cols[c] for c in names}, self._n)

    def replace(self, values: dict[str, np.ndarray]) -> Table:
        """A copy with the columns in ``values`` replaced (or added)."""
        return Table({**self._cols, **values}, self._n)

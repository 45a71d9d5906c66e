"""The default model for one network: physical terms fitted for relative error, then anchored.

1. Backbone: ``time = c0 + it * (c1 + sum_k c_k * t_k(x))`` with non-negative coefficients, the
   terms ``t_k`` chosen by forward selection among the augmented non-hardware features (raw,
   inverse, pairwise products), each with and without the hardware factor ``h = η_g × (1/peak +
   ρ/bandwidth)`` (:func:`~.features.physical_terms`): a GPU-independent floor plus a compute
   part that a faster GPU shrinks. ``η_g`` is a per-GPU efficiency fitted by alternating with
   the coefficients (an unmeasured GPU takes its architecture's, else the typical one); columns
   with one value per GPU (the machine's disk) are left out, as they alias the GPU. With
   several GPU counts, ``it × (1 − 1/gpu_count)`` (the share of the gradients data-parallel
   training exchanges per step) is a further GPU-independent candidate: communication over the
   host's PCIe links does not shrink on a faster GPU, which is why two GPUs can be slower than
   one on a fast GPU (lattuada2022 resnet50_pt on the GTX 1080 Ti).
   Each term is a time that grows with the iteration count (per-iteration
   compute such as ``batch / peak FLOPS``, a per-iteration floor ``it``) or a set-up constant.
   Least squares weighted by ``1/y**2`` fits relative error, which is what MAPE measures and what
   a multiplicative quantity like training time needs; selection is scored by MAPE over folds
   that keep repeats of one configuration together, so repeats don't leak.
2. Anchor: the backbone's log-residuals at the measured configurations are carried to nearby
   queries by a Gaussian kernel in standardised log-feature space (bandwidth chosen by
   leave-one-configuration-out error; "off" is a candidate). Between two measured batch sizes this
   interpolates the correction; beyond the range it keeps the nearest measured correction and
   lets the backbone's trend extrapolate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from gpuperf_magics.model.features import Table, evaluate_terms, physical_terms
from gpuperf_magics.model.selection import forward_select, solve_subset
from gpuperf_magics.model.transfer import hardware_factor

#: Kernel bandwidths tried for the anchor, in standard deviations of the log features.
BANDWIDTHS = (0.05, 0.1, 0.2, 0.4, 0.8)
#: Configurations of one network up to which the anchor's kernel sums over all of them; above,
#: over each query's :data:`NEIGHBOURS` nearest. A Gaussian weight at the widest bandwidth
#: falls by e^-8 at 3.2 standard deviations, and a network with thousands of configurations
#: in a few coordinates has, about every query, far more than 256 of them nearer than that.
DENSE_CONFIGS = 2_000
NEIGHBOURS = 256
#: Queries per block of kernel sums: memory holds a block × configurations (or neighbours).
_BLOCK = 1_024


def config_groups(values: np.ndarray) -> np.ndarray:
    """Integer id per row; rows with identical feature vectors share an id."""
    if values.shape[1] == 0:
        return np.zeros(len(values), dtype=int)
    rounded = np.round(values, 9)
    _, ids = np.unique(rounded, axis=0, return_inverse=True)
    return ids.reshape(-1)


def group_folds(
    groups: np.ndarray, n_splits: int, seed: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """K folds that keep every configuration group on one side."""
    uniq = np.unique(groups)
    order = np.random.default_rng(seed).permutation(uniq)
    fold_of = np.empty(uniq.max() + 1, dtype=int)
    fold_of[order] = np.arange(len(order)) % n_splits
    fold = fold_of[groups]
    idx = np.arange(len(groups))
    return [(idx[fold != k], idx[fold == k]) for k in range(n_splits)]


@dataclass
class AnchoredNetworkModel:
    """Backbone + anchor for one network (see the module docstring)."""

    k_max: int = 8
    anchor: bool = True
    space: str = "log"
    seed: int = 0
    hw_cols: tuple[str, ...] = ()
    rho: float = 20.0
    efficiency: bool = True
    sync: bool = True
    terms: list[str] = field(default_factory=list)

    def hardware(self, features: pd.DataFrame | Table) -> np.ndarray:
        """``h = 1/peak + ρ/bandwidth`` of each row (see :mod:`~.transfer`)."""
        table = Table.of(features)
        tflops = table[self.hw_cols[0]]
        bw = table[self.hw_cols[1]] if len(self.hw_cols) > 1 else None
        return hardware_factor(tflops, bw, self.rho)

    def fit(
        self,
        features: pd.DataFrame | Table,
        iterations: np.ndarray,
        y: np.ndarray,
        arch: np.ndarray | None = None,
    ) -> None:
        features = Table.of(features)  # columns read many times below: arrays, not pandas
        self.varying = [c for c in features.columns if np.ptp(features[c]) > 0]
        raw = features.matrix(self.varying)
        key = np.column_stack([raw, iterations])
        groups = config_groups(key)
        self.n_configs = int(groups.max()) + 1
        self.cv_mape = float("nan")
        if self.space == "log":
            self._fit_log(features, iterations, y, groups)
            self._fit_anchor(features, iterations, y, groups)
            return
        self._fit_linear(features, iterations, y, groups, arch)
        self._fit_anchor(features, iterations, y, groups)

    def _fit_linear(
        self,
        features: Table,
        iterations: np.ndarray,
        y: np.ndarray,
        groups: np.ndarray,
        arch: np.ndarray | None,
    ) -> None:
        gpu_id = self._measured_gpus(features, len(y))
        plain = features.matrix(self.plain)
        w = 1.0 / y**2
        rounds = 2 if self.uses_h and len(self._gpus) >= 2 and self.efficiency else 1
        for r in range(rounds):
            h = self.hardware(features) * np.exp(self._log_eta[gpu_id]) if self.uses_h else None
            z, names = physical_terms(plain, self.plain, iterations, h, self._extra(features))
            chosen = self._select_terms(z, names, iterations, y, groups, w)
            if r == rounds - 1 or not self._refit_efficiency(z[:, chosen], y, w, gpu_id):
                break
        if arch is not None and self.uses_h:
            self._fit_arch_efficiency(arch, gpu_id)

    def _measured_gpus(self, features: Table, n_rows: int) -> np.ndarray:
        """Set the hardware and plain columns and the measured GPUs; the GPU id of each row."""
        self.hw_cols = tuple(c for c in self.hw_cols if c in features.columns)
        self.uses_h = bool(self.hw_cols) and any(c in self.varying for c in self.hw_cols)
        self.plain = [c for c in self.varying if c not in self.hw_cols]
        self._gpus = np.empty((0, len(self.hw_cols)))
        self._log_eta = np.zeros(0)
        self._arch_log_eta: dict[str, float] = {}
        gpu_id = np.zeros(n_rows, dtype=int)
        if self.uses_h:
            # A column with one value per GPU (the disk of the machine that GPU sits in) cannot
            # be told apart from the GPU: leave the difference to the GPU's figures, which say
            # how a GPU never measured behaves; the column would only say it about this disk.
            self.plain = [c for c in self.plain if not _function_of(features, c, self.hw_cols)]
            self._gpus, gpu_id = np.unique(
                features.matrix(self.hw_cols), axis=0, return_inverse=True
            )
            gpu_id = gpu_id.reshape(-1)
            self._log_eta = np.zeros(len(self._gpus))
        return gpu_id

    def _select_terms(self, z: np.ndarray, names: list[str], iterations: np.ndarray,
                      y: np.ndarray, groups: np.ndarray, w: np.ndarray) -> list[int]:
        """Choose the backbone's terms among ``z`` and fit their coefficients; the chosen."""
        if self.n_configs >= 4:
            folds = group_folds(groups, min(5, self.n_configs), self.seed)
            result = forward_select(
                z, y, folds, k_max=self.k_max, alpha=1e-6, penalise_scaled=True,
                weights=w, nonneg=True, intercept=False,
            )
            chosen = list(result.terms)
            self.cv_mape = result.cv_mape
        else:
            chosen = self._few_terms(names, iterations)
        self.terms = [names[i] for i in chosen]
        self.coef, _ = solve_subset(
            z[:, chosen], y, alpha=1e-6, penalise_scaled=True, weights=w, nonneg=True,
            intercept=False,
        )
        return chosen

    def _refit_efficiency(self, z_chosen: np.ndarray, y: np.ndarray, w: np.ndarray,
                          gpu_id: np.ndarray) -> bool:
        """Per-GPU efficiency: the factor on the compute part that best fits each GPU's rows
        (spec sheets do not tell an old architecture's or a throttled GPU's efficiency).
        False when the backbone has no compute part to scale."""
        gpu_part = np.array(["*h" in t or t == "it*h" for t in self.terms])
        parts = z_chosen * self.coef
        compute = parts[:, gpu_part].sum(axis=1)
        floor = parts[:, ~gpu_part].sum(axis=1)
        if not np.any(compute > 0):
            return False
        for g in range(len(self._gpus)):
            rows = gpu_id == g
            den = float(np.sum(w[rows] * compute[rows] ** 2))
            if den > 0:
                num = float(np.sum(w[rows] * compute[rows] * (y[rows] - floor[rows])))
                ratio = np.clip(num / den, 0.1, 10.0) if num > 0 else 0.1
                self._log_eta[g] += np.log(ratio)
        # Only ratios between GPUs are identified: centre so an unknown GPU gets the
        # typical efficiency of the measured ones.
        self._log_eta -= self._log_eta.mean()
        return True

    def _fit_arch_efficiency(self, arch: np.ndarray, gpu_id: np.ndarray) -> None:
        """The mean efficiency of each architecture's measured GPUs (for unmeasured ones)."""
        by_arch: dict[str, list[float]] = {}
        for g in range(len(self._gpus)):
            for a in {str(a) for a in arch[gpu_id == g] if isinstance(a, str) and a}:
                by_arch.setdefault(a, []).append(float(self._log_eta[g]))
        self._arch_log_eta = {a: float(np.mean(v)) for a, v in by_arch.items()}

    def _extra(self, features: Table) -> dict[str, np.ndarray]:
        """GPU-independent extra columns: ``gpu_sync = 1 - 1/gpu_count`` (see :attr:`sync`)."""
        if not self.sync or "gpu_count" not in self.plain:
            return {}
        g = np.maximum(features["gpu_count"], 1.0)
        return {"gpu_sync": 1.0 - 1.0 / g}

    def log_efficiency(self, features: pd.DataFrame | Table,
                       arch: np.ndarray | None = None) -> np.ndarray:
        """Log efficiency factor per row: the measured GPU's, else its architecture's, else 0."""
        out = np.zeros(len(features))
        if not self.uses_h or not len(self._gpus):
            return out
        hw = Table.of(features).matrix(self.hw_cols)
        same = np.isclose(hw[:, None, :], self._gpus[None, :, :], rtol=1e-6).all(-1)
        hit = same.any(axis=1)
        out[hit] = self._log_eta[np.argmax(same[hit], axis=1)]  # the first measured match
        if arch is not None:
            for i in np.flatnonzero(~hit):
                if isinstance(arch[i], str) and arch[i] in self._arch_log_eta:
                    out[i] = self._arch_log_eta[arch[i]]
        return out

    def _few_terms(self, names: list[str], iterations: np.ndarray) -> list[int]:
        """Terms for fewer than 4 configurations: proportional or a line, nothing fancier."""
        # With one iteration count (per-iteration data) "it" is the same column as "1" and
        # only "1" survives: it is then the per-iteration floor.
        floor = "it" if "it" in names else "1"
        wanted = [floor]
        if "batch_size" in self.plain:
            wanted.append("it*batch_size")
        if np.ptp(iterations) > 0 and "1" in names and floor != "1" and len(wanted) == 1:
            wanted.insert(0, "1")
        return [names.index(t) for t in wanted if t in names]

    def _log_terms(
        self, features: Table, iterations: np.ndarray
    ) -> tuple[np.ndarray, list[str]]:
        cols = [np.log(np.asarray(iterations, dtype=float))]
        names = ["log it"]
        for c in self.varying:
            v = features[c]
            cols.append(np.log(np.maximum(v, 1e-12)) if self._positive[c] else v)
            names.append(f"log {c}" if self._positive[c] else c)
        base = len(cols)
        for i in range(base):
            for j in range(i, base):
                cols.append(cols[i] * cols[j])
                names.append(f"{names[i]}*{names[j]}")
        return np.column_stack(cols), names

    def _fit_log(
        self, features: Table, iterations: np.ndarray, y: np.ndarray, groups: np.ndarray
    ) -> None:
        self._positive = {c: bool(np.all(features[c] > 0)) for c in self.varying}
        z, names = self._log_terms(features, iterations)
        ly = np.log(y)
        lit = 0 if np.ptp(iterations) > 0 else None
        if self.n_configs >= 4:
            folds = group_folds(groups, min(5, self.n_configs), self.seed)
            result = forward_select(
                z, ly, folds, k_max=self.k_max, alpha=1e-6, penalise_scaled=True,
                log_target=True,
            )
            chosen = list(result.terms)
            self.cv_mape = result.cv_mape
        else:
            chosen = [] if lit is None else [lit]
            if "batch_size" in self.varying:
                chosen.append(names.index("log batch_size"))
        self._log_chosen = chosen
        self.terms = [names[i] for i in chosen]
        if chosen:
            self.coef, self._icpt = solve_subset(z[:, chosen], ly, alpha=1e-6,
                                                 penalise_scaled=True)
        else:
            self.coef, self._icpt = np.zeros(0), float(np.mean(ly))

    def backbone(
        self, features: pd.DataFrame | Table, iterations: np.ndarray, arch: np.ndarray | None = None
    ) -> np.ndarray:
        features = Table.of(features)
        if self.space == "log":
            z, _ = self._log_terms(features, iterations)
            return np.exp(np.clip(z[:, self._log_chosen] @ self.coef + self._icpt, -700, 700))
        cols = {c: features[c] for c in self.plain}
        cols.update(self._extra(features))
        cols["it"] = np.asarray(iterations, dtype=float)
        if self.uses_h:
            cols["h"] = self.hardware(features) * np.exp(self.log_efficiency(features, arch))
        pred = evaluate_terms(cols, self.terms) @ self.coef
        # A backbone that collapses to 0 (all coefficients clipped) must not divide by zero.
        return np.maximum(pred, 1e-12)

    def _coords(self, features: Table, iterations: np.ndarray) -> np.ndarray:
        cols = [features[c] for c in self.varying]
        cols.append(np.asarray(iterations, dtype=float))
        out = np.column_stack(cols)
        out[:, self._log_cols] = np.log(out[:, self._log_cols])
        return (out - self._center) / self._scale

    def _fit_anchor(
        self, features: Table, iterations: np.ndarray, y: np.ndarray, groups: np.ndarray
    ) -> None:
        raw = np.column_stack([features.matrix(self.varying), iterations])
        self._log_cols = np.all(raw > 0, axis=0)
        logged = raw.copy()
        logged[:, self._log_cols] = np.log(logged[:, self._log_cols])
        self._center = logged.mean(axis=0)
        scale = logged.std(axis=0)
        scale[scale == 0] = np.inf  # a constant coordinate carries no distance
        self._scale = scale
        base = self.backbone(features, iterations)
        resid = np.log(y / base)
        # The kernel runs over configurations, not rows: the rows of one configuration share
        # its coordinates, so a configuration's sum of residuals and its row count give the
        # rows' kernel sums exactly, and per-step traces of 100,000 rows cost what their
        # configurations cost.
        first = np.unique(groups, return_index=True)[1]
        coords = (logged[first] - self._center) / self._scale
        self._train_coords = np.where(np.isfinite(coords), coords, 0.0)
        self._resid_sum = np.bincount(groups, weights=resid)
        self._counts = np.bincount(groups).astype(float)
        self._tree = None  # a KD-tree where the kernel takes each query's nearest only
        if len(first) > DENSE_CONFIGS:
            from scipy.spatial import cKDTree

            self._tree = cKDTree(self._train_coords)
        self.bandwidth = 0.0
        self.loo_logres = resid.copy()
        self.anchor_mape = float(np.mean(np.abs(base - y) / y))
        if not self.anchor or self.n_configs < 2:
            return
        # Leave-one-configuration-out corrections of each configuration, every bandwidth.
        num, den = self._kernel_sums(self._train_coords, BANDWIDTHS, leave_out=True)
        best = self.anchor_mape
        for j, h in enumerate(BANDWIDTHS):
            corr = (num[:, j] / (den[:, j] + 1e-3))[groups]
            err = np.mean(np.abs(base * np.exp(corr) - y) / y)
            if err < best - 1e-4:
                best, self.bandwidth = err, h
                self.loo_logres = np.log(y / (base * np.exp(corr)))
        self.anchor_mape = best

    def _kernel_sums(
        self, coords: np.ndarray, bandwidths: tuple[float, ...], leave_out: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per query (rows of ``coords``) and bandwidth: the Gaussian kernel's weighted sums of
        the configurations' residuals and of their row counts, over every configuration
        where the fit saw at most :data:`DENSE_CONFIGS`, else over each query's
        :data:`NEIGHBOURS` nearest (a KD-tree), so that time and memory grow with the
        configurations, not their square. ``leave_out``: the queries are the configurations
        themselves, each left out of its own sums."""
        num = np.zeros((len(coords), len(bandwidths)))
        den = np.zeros_like(num)
        tree, n_train = self._tree, len(self._train_coords)
        for lo in range(0, len(coords), _BLOCK):
            q = coords[lo:lo + _BLOCK]
            q = np.where(np.isfinite(q), q, 0.0)
            own = np.arange(lo, lo + len(q))
            if tree is None:
                d2 = _sqdist(q, self._train_coords)
                if leave_out:
                    d2[np.arange(len(q)), own] = np.inf
                for j, h in enumerate(bandwidths):
                    w = np.exp(-d2 / (2 * h * h))
                    num[lo:lo + len(q), j] = w @ self._resid_sum
                    den[lo:lo + len(q), j] = w @ self._counts
                continue
            dist, idx = tree.query(q, k=min(NEIGHBOURS + int(leave_out), n_train))
            d2 = np.reshape(dist, (len(q), -1)) ** 2
            idx = np.reshape(idx, (len(q), -1))
            if leave_out:
                d2[idx == own[:, None]] = np.inf
            for j, h in enumerate(bandwidths):
                w = np.exp(-d2 / (2 * h * h))
                num[lo:lo + len(q), j] = (w * self._resid_sum[idx]).sum(axis=1)
                den[lo:lo + len(q), j] = (w * self._counts[idx]).sum(axis=1)
        return num, den

    def correction(self, features: pd.DataFrame | Table, iterations: np.ndarray) -> np.ndarray:
        """Log-correction of the backbone at each query (0 where the anchor is off)."""
        if self.bandwidth == 0.0:
            return np.zeros(len(features))
        coords = self._coords(Table.of(features), iterations)
        num, den = self._kernel_sums(coords, (self.bandwidth,))
        return num[:, 0] / (den[:, 0] + 1e-3)

    def predict(self, features: pd.DataFrame | Table, iterations: np.ndarray) -> np.ndarray:
        features = Table.of(features)
        base = self.backbone(features, iterations)
        return base * np.exp(self.correction(features, iterations))


def _function_of(features: Table, col: str, keys: tuple[str, ...]) -> bool:
    """True when ``col`` takes a single value within every group of equal ``keys``."""
    _, group = np.unique(features.matrix(keys), axis=0, return_inverse=True)
    group = group.reshape(-1)
    values = features[col]
    order = np.lexsort((values, group))
    same_group = group[order][1:] == group[order][:-1]
    return not bool(np.any(same_group & (values[order][1:] != values[order][:-1])))


def _sqdist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances; infinite scales (constant coordinates) contribute 0."""
    a = np.where(np.isfinite(a), a, 0.0)
    b = np.where(np.isfinite(b), b, 0.0)
    return np.maximum((a**2).sum(1)[:, None] + (b**2).sum(1)[None, :] - 2 * a @ b.T, 0.0)

"""Forward selection: the known answer, best subset of any size, NNLS, speed-critical paths."""

from __future__ import annotations

import numpy as np

from gpuperf_magics.model.features import augment
from gpuperf_magics.model.selection import forward_select, solve_subset


def _folds(n: int, k: int = 5) -> list[tuple[np.ndarray, np.ndarray]]:
    idx = np.arange(n)
    return [(idx[idx % k != i], idx[idx % k == i]) for i in range(k)]


def test_selects_exactly_the_true_terms_among_distractors() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(1, 10, (200, 4))
    y = 3 * x[:, 0] * x[:, 1] + 2 / x[:, 2]
    z, names = augment(x, ["a", "b", "c", "d"])
    result = forward_select(z, y, _folds(200), k_max=5)
    assert sorted(names[i] for i in result.terms) == ["1/c", "a*b"]
    assert result.cv_mape < 1e-6


def test_keeps_the_best_subset_of_any_size_not_the_largest() -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(1, 10, (60, 6))
    y = 5 * x[:, 0] * (1 + 0.05 * rng.standard_normal(60))
    result = forward_select(x, y, _folds(60), k_max=6)
    assert len(result.path) == 6
    assert result.cv_mape == min(score for _, score in result.path)
    assert len(result.terms) < 6 and result.terms[0] == 0


def test_nonnegative_coefficients() -> None:
    rng = np.random.default_rng(2)
    z = rng.uniform(1, 2, (50, 3))
    y = z[:, 0] - 0.5 * z[:, 1] + 3
    coef, _ = solve_subset(z, y, nonneg=True)
    assert np.all(coef >= 0)


def test_ridge_matches_scikit_learn_on_unscaled_columns() -> None:
    from sklearn.linear_model import Ridge

    rng = np.random.default_rng(3)
    z = rng.uniform(1, 1000, (40, 3)) * [1, 100, 1e4]
    y = z @ [1.0, 0.1, 0.001] + rng.standard_normal(40)
    coef, icpt = solve_subset(z, y, alpha=10.0)
    ref = Ridge(alpha=10.0).fit(z, y)
    np.testing.assert_allclose(coef, ref.coef_, rtol=1e-6)
    assert abs(icpt - ref.intercept_) < 1e-4 * max(1.0, abs(ref.intercept_))


def test_stacked_fold_solves_equal_one_fold_at_a_time() -> None:
    from gpuperf_magics.model.selection import _mape, _prepare_fold, _solve_batch, _solve_folds

    rng = np.random.default_rng(3)
    z = rng.uniform(0.5, 2, (40, 6))
    z[:, 5] = z[:, 4]  # exactly collinear candidates: the jitter keeps them solvable
    y = z[:, 0] + 0.2 * z[:, 1] - 0.3 * z[:, 2] + 0.01 * rng.standard_normal(40)
    w = 1 / y**2
    folds = [_prepare_fold(z, y, w, tr, te, False) for tr, te in _folds(40)]
    grams = np.stack([f.gram for f in folds])
    moments = np.stack([f.moment for f in folds])
    subsets = np.column_stack([np.zeros(5, dtype=int), np.arange(1, 6)])
    penalty = np.full(6, 1e-6)
    for nonneg in (False, True):
        one = np.stack([_solve_batch(f.gram, f.moment, subsets, penalty, nonneg) for f in folds])
        np.testing.assert_array_equal(_solve_folds(grams, moments, subsets, penalty, nonneg), one)
    assert np.all(_solve_folds(grams, moments, subsets, penalty, True) >= 0)
    singular = np.zeros_like(grams)  # every system singular: each fold falls back to lstsq
    np.testing.assert_array_equal(
        _solve_folds(singular, moments, subsets, np.zeros(6), False),
        np.stack([_solve_batch(g, m, subsets, np.zeros(6), False)
                  for g, m in zip(singular, moments, strict=True)]))
    pred = rng.uniform(1, 2, (3, 7))
    np.testing.assert_array_equal(_mape(y[:7], pred), np.mean(np.abs(pred - y[:7]) / y[:7], -1))


def test_stacked_nnls_equals_scipys_nnls_one_by_one() -> None:
    from gpuperf_magics.model.selection import _nnls_gram, _nnls_many

    rng = np.random.default_rng(4)
    m = rng.standard_normal((6, 12, 4))
    a = np.einsum("sik,sil->skl", m, m) + 1e-3 * np.eye(4)
    b = rng.standard_normal((6, 4))
    np.testing.assert_array_equal(_nnls_many(a, b),
                                  np.stack([_nnls_gram(ai, bi) for ai, bi in zip(a, b)]))
    a[2] = -np.eye(4)  # not positive definite: every system takes the one-by-one route
    np.testing.assert_array_equal(_nnls_many(a, b),
                                  np.stack([_nnls_gram(ai, bi) for ai, bi in zip(a, b)]))


def test_scoring_every_fold_at_once_equals_fold_by_fold_to_the_bit() -> None:
    from gpuperf_magics.model.selection import _mape, _prepare_fold, _solve_folds, _Tests

    rng = np.random.default_rng(4)
    z = rng.uniform(0.5, 2, (43, 7))
    y = z[:, 0] + 0.3 * z[:, 2] + 0.05 * rng.standard_normal(43) + 1
    folds = _folds(43)
    subsets = np.column_stack([np.full(5, 1), np.full(5, 3), [0, 2, 4, 5, 6]])
    for intercept, log_target, nonneg in ((False, False, True), (True, True, False),
                                          (True, False, False)):
        target = np.log(y) if log_target else y
        prepared = [_prepare_fold(z, target, 1 / y**2, tr, te, intercept) for tr, te in folds]
        grams = np.stack([f.gram for f in prepared])
        moments = np.stack([f.moment for f in prepared])
        betas = _solve_folds(grams, moments, subsets, np.full(7, 1e-6), nonneg)
        expected = np.zeros(len(subsets))
        for fold, beta in zip(prepared, betas, strict=True):
            pred = np.einsum("nck,ck->cn", fold.z_test[:, subsets], beta)
            if intercept:
                pred = pred + (fold.mean_y - np.einsum("ck,ck->c", beta,
                                                       fold.mean_z[subsets]))[:, None]
            if log_target:
                expected += _mape(np.exp(fold.y_test), np.exp(np.clip(pred, -700, 700)))
            else:
                expected += _mape(fold.y_test, pred)
        expected /= len(folds)
        masks = [(np.isin(np.arange(43), tr), np.isin(np.arange(43), te)) for tr, te in folds]
        for given in (folds, masks):  # test rows as positions or as masks
            tests = _Tests.of(z, target, given, prepared, intercept, log_target)
            np.testing.assert_array_equal(tests.scores(subsets, betas), expected)


def test_a_candidate_that_adds_nothing_keeps_the_previous_nonnegative_solution() -> None:
    from gpuperf_magics.model.selection import _prepare_fold, _solve_folds

    rng = np.random.default_rng(5)
    z = rng.uniform(0.5, 2, (60, 6))
    y = z[:, 0] + 0.5 * z[:, 1] - 0.4 * z[:, 2] - 0.3 * z[:, 3] + 0.02 * rng.standard_normal(60)
    folds = [_prepare_fold(z, y, 1 / y**2, tr, te, True) for tr, te in _folds(60)]
    grams = np.stack([f.gram for f in folds])
    moments = np.stack([f.moment for f in folds])
    penalty = np.full(6, 1e-6)
    before = _solve_folds(grams, moments, np.array([[0, 1]]), penalty, True)[:, 0]
    subsets = np.column_stack([np.zeros(4, dtype=int), np.ones(4, dtype=int), np.arange(2, 6)])
    plain = _solve_folds(grams, moments, subsets, penalty, True)
    short = _solve_folds(grams, moments, subsets, penalty, True, before)
    # Columns 2 and 3 enter with negative weights: NNLS leaves them at 0 and the previous
    # solution stands, which the shortcut takes without solving (to the last bits).
    for c in (0, 1):
        np.testing.assert_array_equal(short[:, c, :2], before)
        assert np.all(short[:, c, 2] == 0)
    np.testing.assert_allclose(short, plain, rtol=1e-9, atol=1e-12)
    assert np.all(short >= 0)


def test_selection_with_nonnegative_coefficients_equals_nnls_of_every_subset() -> None:
    from scipy.optimize import nnls

    rng = np.random.default_rng(6)
    x = rng.uniform(1, 10, (80, 3))
    y = 2 * x[:, 0] + 0.5 * x[:, 1] * x[:, 2] - 0.1 * x[:, 2] + rng.normal(0, 0.2, 80) + 20
    z, _ = augment(x, ["a", "b", "c"])
    folds = _folds(80)
    result = forward_select(z, y, folds, k_max=5, nonneg=True, intercept=False)
    zs = z / np.sqrt(np.mean(z**2, axis=0))
    for subset, score in result.path:  # each step's score, from scipy's NNLS per fold
        errs = []
        for tr, te in folds:
            coef = nnls(zs[tr][:, list(subset)], y[tr])[0]
            errs.append(np.mean(np.abs(zs[te][:, list(subset)] @ coef - y[te]) / y[te]))
        assert abs(np.mean(errs) - score) < 1e-6

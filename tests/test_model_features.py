"""The paper's augmentation: column count, no x*(1/x), per-iteration terms."""

from __future__ import annotations

import numpy as np

from gpuperf_magics.model.features import augment, evaluate_terms, per_iteration_terms


def test_augment_counts_72_terms_for_6_features() -> None:
    values = np.random.default_rng(0).uniform(1, 10, (20, 6))
    terms, names = augment(values, list("abcdef"))
    assert terms.shape == (20, 72)  # 2p + C(2p, 2) - p
    assert len(set(names)) == 72


def test_augment_never_multiplies_a_feature_by_its_inverse() -> None:
    _, names = augment(np.ones((3, 3)) * 2, ["a", "b", "c"])
    for name in names:
        factors = name.split("*")
        bases = [f.removeprefix("1/") for f in factors]
        assert len(bases) == len(set(bases)), name


def test_augment_skips_inverse_of_a_column_with_zero() -> None:
    values = np.array([[0.0, 1.0], [1.0, 2.0]])
    _, names = augment(values, ["a", "b"])
    assert "1/a" not in names and "1/b" in names


def test_evaluate_terms_reproduces_augment() -> None:
    values = np.random.default_rng(1).uniform(1, 5, (10, 3))
    terms, names = augment(values, ["a", "b", "c"])
    cols = {n: values[:, j] for j, n in enumerate("abc")}
    np.testing.assert_allclose(evaluate_terms(cols, names), terms)


def test_per_iteration_terms_drop_duplicates_when_iterations_are_one() -> None:
    values = np.random.default_rng(2).uniform(1, 5, (8, 2))
    terms, names = per_iteration_terms(values, ["a", "b"], np.ones(8))
    assert names[0] == "1" and "it" not in names
    assert terms.shape[1] == len(names)


def test_physical_terms_split_floor_and_gpu_part() -> None:
    from gpuperf_magics.model.features import physical_terms

    values = np.array([[8.0], [16.0], [32.0]])
    h = np.array([0.1, 0.2, 0.1])
    its = np.array([10.0, 20.0, 40.0])
    terms, names = physical_terms(values, ["batch_size"], its, h)
    assert {"1", "it", "it*batch_size", "it*h", "it*batch_size*h"} <= set(names)
    cols = {"batch_size": values[:, 0], "it": its, "h": h}
    np.testing.assert_allclose(evaluate_terms(cols, names), terms)


def test_physical_terms_offer_extra_columns_as_gpu_independent_terms() -> None:
    from gpuperf_magics.model.features import physical_terms

    values = np.array([[1.0, 8.0], [2.0, 8.0], [4.0, 16.0]])
    sync = 1 - 1 / values[:, 0]
    its = np.array([10.0, 20.0, 40.0])
    h = np.array([0.1, 0.2, 0.3])
    terms, names = physical_terms(values, ["gpu_count", "batch_size"], its, h,
                                  {"gpu_sync": sync})
    assert "it*gpu_sync" in names
    assert not any("gpu_sync" in n and "h" in n.split("*") for n in names)  # never × h
    np.testing.assert_allclose(terms[:, names.index("it*gpu_sync")], its * sync)

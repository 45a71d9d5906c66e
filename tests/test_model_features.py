"""The paper's augmentation: column count, no x*(1/x), per-iteration terms."""

from __future__ import annotations

import numpy as np
import pytest

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


def test_table_holds_the_frames_values_as_contiguous_float_arrays() -> None:
    import pandas as pd

    from gpuperf_magics.model.features import Table

    frame = pd.DataFrame({"a": [1, 2, 3, 4], "b": [0.5, 1.5, 2.5, 3.5]})
    table = Table.of(frame)
    assert Table.of(table) is table
    assert table.columns == ["a", "b"] and len(table) == 4 and "a" in table
    for c in frame.columns:
        assert table[c].flags.c_contiguous
        np.testing.assert_array_equal(table[c], frame[c].to_numpy(dtype=float))
    np.testing.assert_array_equal(table.matrix(["b", "a"]),
                                  frame[["b", "a"]].to_numpy(dtype=float))
    assert table.matrix([]).shape == (4, 0)
    mask = np.array([True, False, True, False])
    assert len(table.take(mask)) == 2 and len(table.take(np.array([3, 0, 1]))) == 3
    np.testing.assert_array_equal(table.take(np.array([3, 0]))["a"], [4.0, 1.0])
    assert table.select(["b"]).columns == ["b"]
    moved = table.replace({"b": np.zeros(4)})
    assert moved["b"].sum() == 0 and table["b"].sum() == 8.0  # the original is untouched


@pytest.mark.parametrize("at_once", [1 << 18, 0])  # all pairs at once, or column by column
def test_distinct_columns_keeps_what_pairwise_allclose_keeps(monkeypatch, at_once) -> None:
    from gpuperf_magics.model import features
    from gpuperf_magics.model.features import _distinct_columns

    monkeypatch.setattr(features, "PAIRWISE_AT_ONCE", at_once)

    def pairwise(terms: np.ndarray) -> list[int]:  # the definition, one pair at a time
        keep: list[int] = []
        seen: list[np.ndarray] = []
        for j in range(terms.shape[1]):
            col = terms[:, j] / (np.max(np.abs(terms[:, j])) or 1.0)
            if any(np.allclose(col, s, rtol=1e-9, atol=1e-12) for s in seen):
                continue
            seen.append(col)
            keep.append(j)
        return keep

    rng = np.random.default_rng(0)
    for _ in range(200):
        n, p = rng.integers(1, 20), rng.integers(1, 20)
        terms = rng.choice([0.0, 1.0, 2.0, -3.0], (n, p)) * rng.choice([1.0, 1e-13, 1e6], p)
        terms[:, ::3] = terms[:, [0]] * (1 + rng.choice([0.0, 1e-10, 1e-8]))
        assert _distinct_columns(terms) == pairwise(terms)

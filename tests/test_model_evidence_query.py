"""The evidence move inside the default model (gpuperf_magics.model.evidence_query)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from gpuperf_magics.model import TrainingTimeModel
from gpuperf_magics.model.evidence import empty_base


def _store(ratio: float) -> pd.DataFrame:
    """Five networks on a T4 and an A100 (the A100 ``ratio`` × the T4's time), one new
    network on the T4 only."""
    rows = []
    for k in range(5):
        for b in (16, 32, 64):
            t = 0.002 * (k + 1) * b
            rows += [{"network": f"net{k}", "gpu": "Tesla T4", "batch_size": b,
                      "iterations": 10, "time_s": 10 * t},
                     {"network": f"net{k}", "gpu": "NVIDIA A100-SXM4-40GB", "batch_size": b,
                      "iterations": 10, "time_s": 10 * t * ratio}]
    rows += [{"network": "new", "gpu": "Tesla T4", "batch_size": b, "iterations": 10,
              "time_s": 10 * 0.004 * b} for b in (16, 32, 64)]
    return pd.DataFrame(rows)


def test_a_new_network_moves_by_the_ratio_of_the_users_other_networks() -> None:
    store = _store(ratio=0.6)  # the spec sheet (FP32 8.1 → 19.5 TFLOPS) would say 0.42
    model = TrainingTimeModel(evidence=empty_base()).fit(store.drop(columns="time_s"),
                                                         store["time_s"])
    query = pd.DataFrame({"network": ["new"] * 3, "gpu": "NVIDIA A100-SXM4-40GB",
                          "batch_size": [16, 32, 64], "iterations": 10})
    table = model.predict_table(query)
    per_it = table["per_iteration_s"].to_numpy()
    assert per_it == pytest.approx([0.6 * 0.004 * b for b in (16, 32, 64)], rel=0.05)
    assert table["detail"].str.contains("workloads measured on both").all()
    assert (table["time_low_s"] < table["time_s"]).all()
    assert (table["time_s"] < table["time_high_s"]).all()


def test_without_any_evidence_the_move_is_the_spec_sheet_and_says_so() -> None:
    store = _store(ratio=0.6)
    alone = store[store["network"] == "new"]
    model = TrainingTimeModel(evidence=empty_base()).fit(alone.drop(columns="time_s"),
                                                         alone["time_s"])
    query = pd.DataFrame({"network": ["new"], "gpu": "NVIDIA A100-SXM4-40GB",
                          "batch_size": [32], "iterations": 10})
    table = model.predict_table(query)
    assert "spec sheet only" in table["detail"].iloc[0]
    assert table["per_iteration_s"].iloc[0] == pytest.approx(0.004 * 32 * 8.1 / 19.5,
                                                             rel=0.02)


def test_a_spec_sheet_move_to_a_gpu_whose_precision_was_not_given_says_so() -> None:
    # The table records no precision (an imported one): on a T4 (Turing) the run can only have
    # been FP32; on an A100 PyTorch's default runs convolutions in TF32, which the FP32 peak
    # the spec sheet reads does not see. With a precision column, nothing is said.
    alone = _store(ratio=0.6).query("network == 'new'")
    model = TrainingTimeModel(evidence=empty_base()).fit(alone.drop(columns="time_s"),
                                                         alone["time_s"])
    query = pd.DataFrame({"network": ["new"], "gpu": "NVIDIA A100-SXM4-40GB",
                          "batch_size": [32], "iterations": 10})
    detail = model.predict_table(query)["detail"].iloc[0]
    assert "spec sheet only" in detail
    assert "precision not given for NVIDIA A100-SXM4-40GB" in detail
    assert "Tesla T4" not in detail.partition("precision not given")[2]
    recorded = alone.assign(precision="fp32")
    model = TrainingTimeModel(evidence=empty_base()).fit(recorded.drop(columns="time_s"),
                                                         recorded["time_s"])
    detail = model.predict_table(query.assign(precision="fp32"))["detail"].iloc[0]
    assert "spec sheet only" in detail and "not given" not in detail
    # A query that leaves the precision out on the A100 is read as FP32 too, and says so.
    assert "precision not given for NVIDIA A100" in model.predict_table(query)["detail"].iloc[0]
    # From an A100 whose precision was not given, to a T4: the source is named.
    a100 = alone.assign(gpu="NVIDIA A100-SXM4-40GB")
    model = TrainingTimeModel(evidence=empty_base()).fit(a100.drop(columns="time_s"),
                                                         a100["time_s"])
    detail = model.predict_table(query.assign(gpu="Tesla T4"))["detail"].iloc[0]
    assert "precision not given for NVIDIA A100-SXM4-40GB:" in detail


def test_a_source_that_ran_the_asked_batch_outweighs_one_carried_from_a_tenth_of_it() -> None:
    """A network measured on an A100 SXM4 80GB at batch 176 and on an RTX 3080 at batch 16
    (where, per sample, it ran 2.5x slower than a per-sample carry to 176 would say), asked
    on an A100 80GB PCIe at 176 with no evidence: the sources are weighed by how far each
    carried its time per sample (the public base's ``reach_batch``). The A100's move sets
    the answer; with every source alike (``reach_batch`` 0) the two are averaged."""
    rows = [{"network": "bert", "gpu": "NVIDIA A100-SXM4-80GB", "batch_size": 176,
             "iterations": 10, "time_s": 10 * 0.47},
            {"network": "bert", "gpu": "NVIDIA GeForce RTX 3080", "batch_size": 16,
             "iterations": 10, "time_s": 10 * 0.47 / 11 * 2.5 * 19.5 / 29.8}]
    store = pd.DataFrame(rows)
    query = pd.DataFrame({"network": ["bert"], "gpu": "NVIDIA A100 80GB PCIe",
                          "batch_size": [176], "iterations": 10})

    def answer(reach: float) -> pd.Series:
        base = empty_base()
        base.settings = {"reach_batch": reach}
        model = TrainingTimeModel(evidence=base).fit(store.drop(columns="time_s"),
                                                     store["time_s"])
        return model.predict_table(query).iloc[0]

    near, alike = answer(0.5), answer(0.0)
    assert "spec sheet only" in near["detail"]
    assert near["per_iteration_s"] == pytest.approx(0.47, rel=0.1)
    assert alike["per_iteration_s"] > 1.3 * near["per_iteration_s"]


def test_a_spec_sheet_moves_interval_widens_with_the_peak_ratio_of_its_two_gpus() -> None:
    """A network measured on a T4 alone, asked on an A100 (no evidence: the spec-sheet move,
    whose interval the public calibration sets): with ``reach_peak`` its spread is
    ``sqrt(prior_sd² + (reach_peak · log ratio)²)`` rather than ``prior_sd``, and the
    interval (in log) widens by that factor; the answer does not move."""
    import math
    from statistics import NormalDist

    from gpuperf_magics.model.evidence_move import LEVELS

    store = _store(ratio=0.6)
    alone = store[store["network"] == "new"]
    query = pd.DataFrame({"network": ["new"], "gpu": "NVIDIA A100-SXM4-40GB",
                          "batch_size": [32], "iterations": 10})
    z = [round(NormalDist().inv_cdf(q), 4) for q in LEVELS]
    calibration = {"gpu:spec": {"quantiles": [0.5 * x for x in z], "z_quantiles": z,
                                "mape": 0.3, "n": 400}}

    def row(reach: float) -> pd.Series:
        base = empty_base()
        base.settings = {"prior_sd": 0.5, "reach_peak": reach}
        base.calibration = calibration
        model = TrainingTimeModel(evidence=base).fit(alone.drop(columns="time_s"),
                                                     alone["time_s"])
        return model.predict_table(query).iloc[0]

    flat, wide = row(0.0), row(0.5)
    assert "spec sheet only" in wide["detail"]
    assert wide["time_s"] == flat["time_s"]
    ratio = math.log(wide["per_iteration_s"] / (0.004 * 32))  # the spec-sheet move
    width = {k: math.log(r["time_high_s"] / r["time_low_s"]) for k, r in (("flat", flat),
                                                                         ("wide", wide))}
    assert width["wide"] / width["flat"] == pytest.approx(
        math.sqrt(0.5 ** 2 + (0.5 * ratio) ** 2) / 0.5, rel=0.05)


def test_other_hosts_evidence_is_drawn_as_wide_as_its_few_sources_leave_it() -> None:
    """A network measured on a T4 alone, asked on an A100: its move rests on public evidence
    (other hosts), whose calibration measured the spread between sources on the base's own
    sources. Two sources leave it known to one degree of freedom: the interval (in log) is
    Student's t over the normal's quantile wider than with five (2.40 against 1.20 at 80%).
    The answer does not move, and evidence of the user's own store is not widened."""
    import math
    from statistics import NormalDist

    from gpuperf_magics.model.evidence import COLUMNS, EvidenceBase, family_of
    from gpuperf_magics.model.evidence_move import LEVELS, few_sources

    store = _store(ratio=0.6).assign(precision="fp32")
    others = store[store["network"] != "new"]
    z = [round(NormalDist().inv_cdf(q), 4) for q in LEVELS]
    entry = {"quantiles": [0.3 * x for x in z], "z_quantiles": z, "mape": 0.2, "n": 400}

    def public(sources: int) -> EvidenceBase:
        rows = others.assign(
            workload=others["network"] + "|" + others["batch_size"].astype(str),
            t=others["time_s"] / others["iterations"],
            source=[f"lab{int(n[-1]) % sources}" for n in others["network"]],
            family=[family_of(n)[0] for n in others["network"]],
            kind=[family_of(n)[1] for n in others["network"]], quality=1.0)
        base = EvidenceBase(rows[list(COLUMNS)].reset_index(drop=True))
        base.calibration = {b: entry for b in ("gpu:direct", "gpu:weak", "gpu:chain",
                                                "gpu:spec")}
        return base

    query = pd.DataFrame({"network": ["new"], "gpu": "NVIDIA A100-SXM4-40GB",
                          "batch_size": [32], "iterations": 10, "precision": "fp32"})

    def row(data: pd.DataFrame, sources: int) -> pd.Series:
        model = TrainingTimeModel(evidence=public(sources)).fit(data.drop(columns="time_s"),
                                                                data["time_s"])
        return model.predict_table(query).iloc[0]

    alone = store[store["network"] == "new"]
    two, five = row(alone, 2), row(alone, 5)
    assert "workloads measured on both" in two["detail"]
    assert two["time_s"] == five["time_s"]
    width = {k: math.log(r["time_high_s"] / r["time_low_s"]) for k, r in (("two", two),
                                                                         ("five", five))}
    assert width["two"] / width["five"] == pytest.approx(
        few_sources(0.8, 2) / few_sources(0.8, 5), rel=1e-6)
    assert few_sources(0.8, 2) == pytest.approx(2.402, abs=1e-3)
    # The user's own networks measured on both GPUs: their evidence is the user's hosts'.
    mine = {k: row(store, k) for k in (2, 5)}
    assert mine[2]["time_low_s"] == mine[5]["time_low_s"]
    assert mine[2]["time_high_s"] == mine[5]["time_high_s"]


def test_the_spec_sheet_move_validation_scores_is_joined_as_an_answer_without_evidence() -> None:
    """Validation calibrates a move with no evidence by the errors of the spec-sheet move
    alone (``last_spec``) on the user's GPUs: it must be the answer such a move gets, the
    median of the sources weighted by the prior's spread and each source's reach in batch,
    not their plain median. Three source GPUs: one ran the asked batch (log move 0.0), two
    carried their time per sample far (0.5 and 0.6, reach variance 5 each): the answer and
    ``last_spec`` are 0.0, where the plain median would be 0.5. With evidence on the same
    sources, ``last_spec`` stays what the spec sheet alone would have answered."""
    import math

    from gpuperf_magics.model.evidence_move import Estimate
    from gpuperf_magics.model.evidence_query import EvidenceMove
    from gpuperf_magics.model.gpu_move import GpuMove

    base = empty_base()
    base.settings = {"prior_sd": 0.5}
    move = EvidenceMove(empty_base(), base, GpuMove())
    reach = [0.0, 5.0, 5.0]
    spec = [Estimate(x, 0.5, "gpu:spec", "spec sheet only", spec=x, reach_var=r)
            for x, r in zip((0.0, 0.5, 0.6), reach, strict=True)]
    assert move.combine(spec) == pytest.approx(1.0)
    assert math.log(move.last_spec) == pytest.approx(0.0)
    # Evidence moves the sources' answers (and their spreads) but not the spec-sheet move.
    ev = [Estimate(x + 0.3, 0.1, "gpu:direct", "measured on both", 12, spec=x, reach_var=r)
          for x, r in zip((0.0, 0.5, 0.6), reach, strict=True)]
    move.combine(ev)
    assert move.last.bucket == "gpu:direct"
    assert math.log(move.last_spec) == pytest.approx(0.0)


def test_a_source_that_changes_the_gpu_and_the_precision_errs_as_both_moves_do() -> None:
    """A network measured on a T4 in FP32 at batch 32 and in AMP at batch 2, asked in AMP at
    batch 32 on an A100 with no evidence. The AMP run moves by the GPU alone (spread
    ``prior_sd`` 0.4), its time per sample carried 16x (reach variance 0.16); the FP32 run
    changes the GPU and the precision at once: its variance is the precision move's
    (``prior_sd_precision`` 0.5) plus the GPU move's, 0.41 against the AMP run's 0.32, and the
    AMP run answers, as if alone. Weighed as a precision move only (0.25), the FP32 run
    would have answered."""
    rows = [{"network": "net", "gpu": "Tesla T4", "precision": p, "batch_size": b,
             "iterations": 10, "time_s": 10 * t} for p, b, t in (("fp32", 32, 0.2),
                                                                  ("amp", 2, 0.01))]
    store = pd.DataFrame(rows)
    query = pd.DataFrame({"network": ["net"], "gpu": "NVIDIA A100-SXM4-40GB",
                          "precision": "amp", "batch_size": [32], "iterations": 10})

    def answer(data: pd.DataFrame) -> pd.Series:
        base = empty_base()
        base.settings = {"prior_sd": 0.4, "prior_sd_precision": 0.5,
                         "reach_batch": 0.4 / math.log(16)}
        model = TrainingTimeModel(evidence=base).fit(data.drop(columns="time_s"),
                                                     data["time_s"])
        return model.predict_table(query).iloc[0]

    every, amp_only = answer(store), answer(store[store["precision"] == "amp"])
    fp32_only = answer(store[store["precision"] == "fp32"])
    assert "spec sheet only" in every["detail"]
    assert every["per_iteration_s"] == pytest.approx(amp_only["per_iteration_s"], rel=1e-9)
    # The FP32 run alone answers, and differently.
    assert abs(math.log(fp32_only["per_iteration_s"] / amp_only["per_iteration_s"])) > 0.1

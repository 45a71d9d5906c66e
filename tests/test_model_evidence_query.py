"""The evidence move inside the default model (gpuperf_magics.model.evidence_query)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from gpuperf_magics.model import TrainingTimeModel
from gpuperf_magics.model.clusters import sample_interval
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
    assert "from 1 measured GPU in 2 precisions" in every["detail"]
    assert every["per_iteration_s"] == pytest.approx(amp_only["per_iteration_s"], rel=1e-9)
    # The FP32 run alone answers, and differently.
    assert abs(math.log(fp32_only["per_iteration_s"] / amp_only["per_iteration_s"])) > 0.1


def test_a_move_from_one_source_gpu_counts_gpus_not_precisions_and_validation_scores_each_alone(
) -> None:
    """An answer joined from a T4 in FP32, the same T4 in AMP and a V100 rests on two source
    GPUs. Validation scores the move from each GPU alone (:meth:`by_source`): the T4's is the
    weighted median of its two runs (weights 1/0.3² and 1/0.1²: the AMP run's 0.6, though the
    FP32 run's bucket, the strongest, names it), the V100's its one run's 0.9; a move from
    one GPU is scored as nothing of the kind."""
    from gpuperf_magics.model.evidence_move import Estimate
    from gpuperf_magics.model.evidence_query import EvidenceMove
    from gpuperf_magics.model.gpu_move import GpuMove

    move = EvidenceMove(empty_base(), empty_base(), GpuMove())
    runs = [Estimate(0.2, 0.3, "gpu:direct", "", 12, source="Tesla T4"),
            Estimate(0.6, 0.1, "precision:weak", "", 3, source="Tesla T4"),
            Estimate(0.9, 0.1, "gpu:weak", "", 4, source="Tesla V100-SXM2-16GB")]
    move.combine(runs)
    assert move.last.sources == 2 and move.last.bucket == "gpu:direct"
    assert move.by_source(3) == [("gpu:direct", pytest.approx(0.6)),
                                 ("gpu:weak", pytest.approx(0.9))]
    assert move.by_source(1) == [("gpu:direct", pytest.approx(0.6))]
    move.combine(runs[:2])
    assert move.last.sources == 1 and move.by_source(3) == []


def _one_gpu_store(rng: np.random.Generator, sd: float, known: int = 24, new: int = 60
                   ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``known`` networks on four GPUs, each network's speed on each GPU off the others' by a
    log-normal factor of spread ``sd``; ``new`` networks measured on one GPU each (their own
    factors), with their times on the other three GPUs to predict."""
    gpus = ("Tesla T4", "NVIDIA GeForce RTX 2080 Ti", "Tesla V100-SXM2-16GB",
            "NVIDIA A100-SXM4-40GB")
    speed = {"Tesla T4": 1.0, "NVIDIA GeForce RTX 2080 Ti": 1.7, "Tesla V100-SXM2-16GB": 2.1,
             "NVIDIA A100-SXM4-40GB": 3.0}
    rows = []
    for k in range(known + new):
        factor = dict(zip(gpus, rng.normal(0.0, sd, len(gpus)), strict=True))
        for g in gpus:
            for b in (16, 32, 64):
                rows.append({"network": f"net{k}", "gpu": g, "batch_size": b,
                             "iterations": 10, "new": k >= known, "own": g == gpus[k % 4],
                             "time_s": 10 * 0.001 * (1 + k % 5) * b / speed[g]
                             * math.exp(factor[g])})
    every = pd.DataFrame(rows)
    train = every[~every["new"] | every["own"]].drop(columns=["new", "own"])
    asked = every[every["new"] & ~every["own"] & (every["batch_size"] == 32)]
    return train, asked.drop(columns=["new", "own"])


def test_a_network_measured_on_one_gpu_gets_the_interval_of_the_users_moves_from_one_gpu(
) -> None:
    """Networks whose speed on each GPU is off by an independent factor (spread 0.15 in log):
    a move from one GPU errs by two such factors (sd 0.21), a join of three GPUs' moves by
    less (their median: about 0.18). The user's other networks' moves from one GPU at a time
    are validated apart (``one|gpu:direct``), wider than the joined ones, and a new network
    measured on one GPU takes their interval: 85% of its other GPUs inside (74-86% over eight
    draws of the store), width 0.59 in log. As the wider of the joined moves' interval and an
    empty public calibration's ±0.5, 98% were, at width 1.0."""
    rng = np.random.default_rng(3)
    train, asked = _one_gpu_store(rng, 0.15)
    model = TrainingTimeModel(evidence=empty_base()).fit(train.drop(columns="time_s"),
                                                         train["time_s"])
    res = model.evidence_residuals_
    single, joined = res["one|gpu:direct"], res["gpu:direct"]
    assert len(single) >= 20
    assert np.subtract(*np.quantile(single, [0.9, 0.1])) > np.subtract(
        *np.quantile(joined, [0.9, 0.1]))
    table = model.predict_table(asked.drop(columns="time_s"))
    assert table["detail"].str.contains("measured on both").all()
    actual = asked["time_s"].to_numpy()
    inside = (table["time_low_s"].to_numpy() <= actual) & (actual <= table["time_high_s"])
    assert 0.7 <= inside.mean() <= 0.9
    # The interval is that of one more move from one GPU (the sample interval of the
    # validated ones), around each answer.
    lo, hi = sample_interval(single, 0.8)
    width = np.log(table["time_high_s"] / table["time_low_s"]).to_numpy()
    assert np.median(width) == pytest.approx(hi - lo, rel=0.1)


def test_a_move_from_one_gpu_by_other_hosts_evidence_keeps_the_public_interval() -> None:
    """The user's moves from one GPU were validated with the user's own pairs. A network
    measured on a P100, which none of the user's other networks ran, asked on a K80, moves by
    the public base's pairs, other hosts' evidence: its interval is the public calibration's
    (widened for the base's few sources), not the user's single moves'."""
    from gpuperf_magics.model.evidence_query import SINGLE

    train, _ = _one_gpu_store(np.random.default_rng(3), 0.15)
    lone = pd.DataFrame([{"network": "lone", "gpu": "Tesla P100-PCIE-16GB", "batch_size": b,
                          "iterations": 10, "time_s": 10 * 0.003 * b} for b in (16, 32, 64)])
    train = pd.concat([train, lone], ignore_index=True)
    model = TrainingTimeModel().fit(train.drop(columns="time_s"), train["time_s"])
    table = model.predict_table(pd.DataFrame({"network": ["lone"], "gpu": "Tesla K80",
                                              "batch_size": [32], "iterations": 10}))
    est = model.estimator_
    evidence = est.local_["lone"].evidence
    last = evidence.last
    assert last.sources == 1 and last.other_hosts and last.bucket == "gpu:direct"
    assert len(est.evidence_residuals_[SINGLE + last.bucket]) >= 20
    public_only = {k: v for k, v in est.evidence_residuals_.items() if not k.startswith(SINGLE)}
    assert evidence.interval(est.evidence_residuals_, last, 0.8) == evidence.interval(
        public_only, last, 0.8)
    single = sample_interval(est.evidence_residuals_[SINGLE + last.bucket], 0.8)
    width = math.log(table["time_high_s"].iloc[0] / table["time_low_s"].iloc[0])
    assert width > 1.5 * (single[1] - single[0])

"""The evidence move (gpuperf_magics.model.evidence_move): known answers on synthetic zoos."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from gpuperf_magics.model.evidence import COLUMNS, EvidenceBase
from gpuperf_magics.model.evidence_move import (
    Query,
    Settings,
    calibrate,
    estimate,
    interval,
)

S = Settings(prior_sd=0.5)


def _base(rows: list[dict]) -> EvidenceBase:
    frame = pd.DataFrame(rows)
    for c, v in (("source", "zoo"), ("kind", "cnn"), ("quality", 1.0), ("precision", "fp32")):
        if c not in frame:
            frame[c] = v
    frame["network"] = frame["family"]
    return EvidenceBase(frame[list(COLUMNS)])


def _zoo(noise: float = 0.0, seed: int = 0) -> EvidenceBase:
    """Twenty networks on GPUs A and B: B's speed-up grows with the work per iteration (a
    1 ms iteration is launch-bound: 1.1× faster; a 1 s one 4× faster)."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(20):
        t = 10 ** rng.uniform(-3, 0)
        ratio = _true_ratio(t) * math.exp(noise * rng.standard_normal())
        for gpu, time in (("A", t), ("B", t * ratio)):
            rows.append({"workload": f"w{k}", "family": f"net{k}", "gpu": gpu,
                         "batch_size": 32.0, "t": time})
    return _base(rows)


def _true_ratio(t: float) -> float:
    share = (math.log10(t) + 3) / 3  # 0 at 1 ms, 1 at 1 s
    return 1 / (1.1 + share * 2.9)


def test_similar_workloads_set_the_ratio_not_the_average() -> None:
    base = _zoo()
    for t in (0.002, 0.5):
        q = Query("A|fp32", "B|fp32", math.log(t), math.log(32.0), "cnn")
        est = estimate([base], q, prior=math.log(1 / 3), s=S)
        assert est.bucket == "gpu:direct"
        assert math.exp(est.log_ratio) == pytest.approx(_true_ratio(t), rel=0.12)
    ratios = base.log_t[base.device == "B|fp32"] - base.log_t[base.device == "A|fp32"]
    average = math.exp(float(np.mean(ratios)))
    assert abs(average - _true_ratio(0.002)) > 0.3  # the average would miss the small job


def test_a_move_without_a_direct_pair_chains_through_a_shared_gpu() -> None:
    rows = []
    for k in range(6):
        rows += [{"workload": f"a{k}", "family": f"n{k}", "gpu": "A", "batch_size": 8.0,
                  "t": 0.1}, {"workload": f"a{k}", "family": f"n{k}", "gpu": "M",
                              "batch_size": 8.0, "t": 0.05}]
        rows += [{"workload": f"b{k}", "family": f"m{k}", "gpu": "M", "batch_size": 8.0,
                  "t": 0.05}, {"workload": f"b{k}", "family": f"m{k}", "gpu": "T",
                               "batch_size": 8.0, "t": 0.0125}]
    est = estimate([_base(rows)], Query("A|fp32", "T|fp32", math.log(0.1), math.log(8.0)),
                   prior=0.0, s=S)
    assert est.bucket == "gpu:chain" and est.detail.startswith("via M")
    # 0.5 × 0.25, drawn a little towards the prior (1): a chain's mean is known no better
    # than one pair of each hop.
    assert 0.125 < math.exp(est.log_ratio) < 0.125 * 1.15


def test_no_evidence_is_the_spec_sheet_and_little_evidence_shrinks_towards_it() -> None:
    one = _base([{"workload": "w", "family": "n", "gpu": g, "batch_size": 16.0, "t": t,
                  "quality": 0.2} for g, t in (("A", 0.1), ("B", 0.01))])
    q = Query("A|fp32", "B|fp32", math.log(0.1), math.log(16.0))
    prior = math.log(0.5)
    none = estimate([one], Query("A|fp32", "C|fp32", q.log_t, q.log_b), prior, S)
    assert (none.bucket, none.detail, none.log_ratio) == ("gpu:spec", "spec sheet only", prior)
    weak = estimate([one], q, prior, S)
    assert weak.bucket == "gpu:weak" and "few alike" in weak.detail
    assert math.log(0.1) < weak.log_ratio < prior  # between the pair and the prior
    strong = estimate([_zoo()], Query("A|fp32", "B|fp32", math.log(0.5), math.log(32.0)),
                      prior, S)
    assert abs(strong.log_ratio - math.log(_true_ratio(0.5))) < abs(weak.log_ratio - prior)


def test_calibrated_intervals_cover_what_they_say_on_data_of_known_noise() -> None:
    cal = calibrate(_zoo(noise=0.2, seed=1), S, lambda a, b: math.log(1 / 3))
    lo, hi, _ = interval(cal, "gpu:direct", 0.8)
    fresh = _zoo(noise=0.2, seed=2)
    inside = []
    for k in range(20):
        rows = np.flatnonzero(fresh.workload == f"w{k}")
        a, b = rows[fresh.device[rows] == "A|fp32"][0], rows[fresh.device[rows] == "B|fp32"][0]
        q = Query("A|fp32", "B|fp32", float(fresh.log_t[a]), math.log(32.0), "cnn")
        est = estimate([_zoo(noise=0.2, seed=1)], q, math.log(1 / 3), S)
        res = fresh.log_t[b] - fresh.log_t[a] - est.log_ratio
        inside.append(lo <= res <= hi)
    # 20 moves at a nominal 80%: the binomial ±2σ band is 62-98%.
    assert 0.62 <= np.mean(inside) <= 0.98
    assert 1.28 * 0.2 * 0.6 < hi - lo < 2 * 1.28 * 0.2 * 2  # about ±1.28σ, not wide open


def _hosts(n_hosts: int, per_host: int, seed: int, offset: float = 0.3) -> EvidenceBase:
    """Workloads of ``n_hosts`` sources on GPUs A and B: each source's host shifts B's ratio by
    its own offset (N(0, ``offset``) in log), each workload by a little noise (0.05)."""
    rng = np.random.default_rng(seed)
    rows = []
    for h in range(n_hosts):
        shift = offset * rng.standard_normal()
        for k in range(per_host):
            t = 10 ** rng.uniform(-3, 0)
            ratio = _true_ratio(t) * math.exp(shift + 0.05 * rng.standard_normal())
            for gpu, time in (("A", t), ("B", t * ratio)):
                rows.append({"workload": f"h{h}w{k}", "family": f"h{h}n{k}", "gpu": gpu,
                             "batch_size": 32.0, "t": time, "source": f"host{h}"})
    return _base(rows)


def test_moves_between_sources_calibrate_a_new_hosts_intervals() -> None:
    """Evidence from one host shares that host's quirks: moves inside a source err little,
    moves to a new host as much as hosts differ. Calibrated across sources, the 80% interval
    covers about 80% of a new host's moves; calibrated inside sources, less."""
    base = _hosts(6, 8, seed=3)
    prior = math.log(1 / 3)
    within = calibrate(base, S, lambda a, b: prior)
    cross = calibrate(base, S, lambda a, b: prior, cross=True)
    assert cross["gpu:direct"]["mape"] > within["gpu:direct"]["mape"]
    fresh = _hosts(40, 1, seed=4)  # forty new hosts, one workload each
    inside: dict[str, list[bool]] = {"within": [], "cross": []}
    widths = []
    for h in range(40):
        rows = np.flatnonzero(fresh.workload == f"h{h}w0")
        a, b = rows[fresh.device[rows] == "A|fp32"][0], rows[fresh.device[rows] == "B|fp32"][0]
        q = Query("A|fp32", "B|fp32", float(fresh.log_t[a]), math.log(32.0), "cnn")
        est = estimate([base], q, prior, S)
        res = fresh.log_t[b] - fresh.log_t[a] - est.log_ratio
        for name, cal in (("within", within), ("cross", cross)):
            lo, hi, _ = interval(cal, est.bucket, 0.8, est.sd)
            inside[name].append(lo <= res <= hi)
            if name == "cross":
                widths.append(hi - lo)
    # 40 moves at a nominal 80%: the binomial ±2σ band is 67-93%.
    assert 0.67 <= np.mean(inside["cross"]) <= 0.93
    assert np.mean(inside["within"]) <= np.mean(inside["cross"]) - 0.1
    # Not wide open: about ±1.28 × the hosts' spread (0.3), not several times it.
    assert np.median(widths) < 2 * 1.28 * 0.3 * 2


def test_other_hosts_evidence_takes_the_spread_moves_between_sources_showed() -> None:
    """Six hosts, each shifting B's ratio by its own offset (0.3 in log) over a workload noise
    of 0.05: the evidence of one source states the small noise, moves between sources err by
    the offsets. The factor on its variance is the square of what the cross-source z-scores
    spread (1.39x a unit normal's here); with it, a run from another host shrinks further
    towards the spec sheet than one whose own host measured the pairs. The spread it states
    stays the one the calibration's z-scores were measured on."""
    from dataclasses import replace

    from gpuperf_magics.model.evidence_move import cross_variance

    base = _hosts(6, 8, seed=3)
    prior = math.log(1 / 3)
    cross = calibrate(base, S, lambda a, b: prior, cross=True)
    factor = cross_variance(cross, min_moves=10)
    assert factor == pytest.approx(1.39 ** 2, abs=0.02)
    s = replace(S, cross_var=factor)
    q = Query("A|fp32", "B|fp32", math.log(0.05), math.log(32.0), "cnn")
    own, other = estimate([base], q, prior, s), estimate([base], q, prior, s, other_hosts=True)
    assert abs(other.log_ratio - prior) < abs(own.log_ratio - prior)
    assert other.sd == own.sd
    # The calibration of moves inside one source, and a run on a host that measured pairs,
    # are unchanged.
    assert estimate([base], q, prior, S) == own


def test_a_move_is_from_other_hosts_only_where_the_users_own_data_cannot_reach_it() -> None:
    from gpuperf_magics.model.evidence_move import from_other_hosts

    def own(rows: list[tuple[str, str, str]]) -> EvidenceBase:
        return _base([{"workload": w, "family": w, "gpu": g, "precision": p, "batch_size": 16.0,
                       "t": 0.1} for w, g, p in rows])

    # One network profiled on one GPU (batch sizes are workloads): nothing of the user's pairs.
    alone = own([("n|16", "A", "fp32"), ("n|32", "A", "fp32")])
    assert from_other_hosts(alone, "A|fp32", "B|fp32")
    # Another network measured on both: a direct pair of the user's own.
    both = own([("n|16", "A", "fp32"), ("m|16", "A", "fp32"), ("m|16", "B", "fp32")])
    assert not from_other_hosts(both, "A|fp32", "B|fp32")
    # ... or a hop of a chain A -> B -> C.
    assert not from_other_hosts(both, "A|fp32", "C|fp32")
    # A pair recorded without a precision stands in for TF32 (evidence.alternates).
    unrecorded = own([("m|16", "A", "unk"), ("m|16", "B", "fp32")])
    assert not from_other_hosts(unrecorded, "A|tf32", "B|fp32")


def test_the_spread_of_a_spec_sheet_move_grows_as_its_batch_is_carried_further() -> None:
    """Moves of three sources, each with its own spread at no reach (0.1, 0.3, 0.6: hosts
    differ), plus 0.25 per unit of log batch ratio carried, Laplace distributed: the fitted
    growth is 0.25 (as a normal's σ of the same median absolute value: × ln 2 / 0.6745),
    not blurred by the sources' own spreads; without moves enough, none."""
    from gpuperf_magics.model.evidence_move import reach_spread, reach_variance

    rng = np.random.default_rng(7)
    n = 3000
    group = rng.integers(0, 3, n)
    carried = rng.uniform(0.0, 3.0, n) * rng.choice([-1.0, 1.0], n)
    scale = np.sqrt(np.array([0.1, 0.3, 0.6])[group] ** 2 + (0.25 * carried) ** 2)
    residuals = rng.laplace(0.0, scale) + np.array([0.2, -0.1, 0.5])[group]
    fitted = reach_spread(residuals, carried, np.array(["a", "b", "c"])[group])
    assert fitted == pytest.approx(0.25 * math.log(2) / 0.6745, rel=0.1)
    assert reach_spread(residuals[:20], carried[:20], group[:20]) == 0.0
    s = Settings(reach_batch=0.2)
    assert reach_variance(math.log(10), s) == pytest.approx((0.2 * math.log(10)) ** 2)
    assert reach_variance(0.0, s) == 0.0


def test_a_spec_sheet_moves_interval_widens_with_the_peak_ratio_it_spans() -> None:
    """Spec-sheet moves between devices whose errors grow with their speed (0.1 plus 0.3
    per unit of log peak): calibrated with ``reach_peak``, the interval of a near move is
    narrower than that of a far one, and the far one covers about what it says; with one
    spread for all (``reach_peak`` 0) every move gets the same width, too narrow far."""
    from dataclasses import replace

    from gpuperf_magics.model.evidence_move import spec_sd

    rng = np.random.default_rng(11)
    speed = {f"G{k}": math.exp(0.25 * k) for k in range(8)}  # peaks 1x to 5.8x
    rows = []
    for w in range(60):
        base_t = 10 ** rng.uniform(-2, 0)
        for gpu, sp in speed.items():
            err = (0.1 + 0.3 * math.log(sp)) * rng.standard_normal()
            rows.append({"workload": f"w{w}", "family": f"net{w}", "gpu": gpu,
                         "batch_size": 32.0, "t": base_t / sp * math.exp(err)})
    base = _base(rows)

    def prior(a: str, b: str) -> float:
        return math.log(speed[a.split("|")[0]] / speed[b.split("|")[0]])

    assert spec_sd(0.0, "gpu", S) == S.prior_sd
    assert spec_sd(2.0, "gpu", replace(S, reach_peak=0.3)) == pytest.approx(
        math.sqrt(0.5 ** 2 + 0.6 ** 2))
    assert spec_sd(2.0, "precision", replace(S, reach_peak=0.3)) == S.prior_sd_precision
    frame = base.frame

    def residuals(a: str, b: str) -> np.ndarray:
        ta = frame[frame["gpu"] == a].set_index("workload")["t"]
        tb = frame[frame["gpu"] == b].set_index("workload")["t"]
        return np.log(tb / ta).to_numpy() - prior(f"{a}|fp32", f"{b}|fp32")

    widths, inside = {}, {}
    for reach in (0.0, 0.3):
        s = replace(S, reach_peak=reach)
        cal = calibrate(base, s, prior, spec_only=True, moves=4000)
        for name, (a, b) in (("near", ("G0", "G1")), ("far", ("G0", "G7"))):
            p = prior(f"{a}|fp32", f"{b}|fp32")
            lo, hi, _ = interval(cal, "gpu:spec", 0.8, spec_sd(p, "gpu", s))
            widths[reach, name] = hi - lo
            res = residuals(a, b)
            inside[reach, name] = float(np.mean((res >= lo) & (res <= hi)))
    assert widths[0.3, "near"] < widths[0.0, "near"]
    assert widths[0.3, "far"] > 1.3 * widths[0.3, "near"]
    assert widths[0.0, "far"] == pytest.approx(widths[0.0, "near"])
    # The far move: too narrow with one spread, about what it says with the peak term.
    assert inside[0.0, "far"] < 0.75
    assert 0.75 <= inside[0.3, "far"] <= 0.92


def test_each_source_weighs_alike_in_a_balanced_calibration() -> None:
    """A large source whose spec-sheet moves err little (σ 0.1 in log, 60 workloads) beside two
    small ones that err much (σ 0.8, 6 workloads each): pooled, the large one sets the spread;
    balanced, each source weighs a third, and the 10th and 90th percentiles are those of the
    equal mixture of the three sources' errors (a new host is one more host)."""
    from statistics import NormalDist

    rng = np.random.default_rng(5)
    sds = {"big": 0.1, "small1": 0.8, "small2": 0.8}
    rows = []
    for src, n in (("big", 60), ("small1", 6), ("small2", 6)):
        for k in range(n):
            t = 10 ** rng.uniform(-2, 0)
            for gpu in ("A", "B", "C"):  # three GPUs: six moves per workload
                err = sds[src] * rng.standard_normal() if gpu != "A" else 0.0
                rows.append({"workload": f"{src}{k}", "family": f"{src}n{k}", "gpu": gpu,
                             "batch_size": 32.0, "t": t * math.exp(err), "source": src})
    base = _base(rows)
    pooled = calibrate(base, S, lambda a, b: 0.0, spec_only=True, moves=10_000)
    balanced = calibrate(base, S, lambda a, b: 0.0, spec_only=True, moves=10_000,
                         balance=True)
    levels = [0.1, 0.9]

    def at(cal: dict, level: float) -> float:
        from gpuperf_magics.model.evidence_move import LEVELS
        return float(np.interp(level, LEVELS, cal["gpu:spec"]["quantiles"]))

    # A is measured without error, B and C with σ each: of a workload's six ordered moves,
    # the four to or from A err by σ, the two between B and C by σ·√2.
    def mixture_cdf(x: float) -> float:
        out = 0.0
        for sd in sds.values():
            out += (4 * NormalDist(0, sd).cdf(x) + 2 * NormalDist(0, sd * math.sqrt(2)).cdf(x)
                    ) / 6 / len(sds)
        return out

    def mixture_quantile(p: float) -> float:
        lo, hi = -5.0, 5.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if mixture_cdf(mid) < p else (lo, mid)
        return (lo + hi) / 2

    for level in levels:
        assert at(balanced, level) == pytest.approx(mixture_quantile(level), rel=0.1)
        assert abs(at(pooled, level)) < 0.5 * abs(at(balanced, level))
    assert balanced["gpu:spec"]["n"] == pooled["gpu:spec"]["n"]  # the count stays the moves'
    assert balanced["gpu:spec"]["mape"] > 2 * pooled["gpu:spec"]["mape"]


def test_the_weighted_median_takes_the_middle_of_two_alike_only_when_asked() -> None:
    """One helper for every weighted median of the evidence move: the first value whose
    cumulative weight reaches half; ``midway`` (joining source GPUs) takes the middle of two
    values whose weights split exactly in half, so two alike sources give their mean."""
    import numpy as np

    from gpuperf_magics.model.evidence_move import weighted_median

    x, alike = np.array([0.4, 0.0]), np.ones(2)
    assert weighted_median(x, alike) == 0.0
    assert weighted_median(x, alike, midway=True) == pytest.approx(0.2)
    # Unequal weights, or an odd count, have one median either way.
    assert weighted_median(x, np.array([1.0, 3.0]), midway=True) == 0.0
    three = np.array([0.9, 0.0, 0.3])
    assert weighted_median(three, np.ones(3)) == weighted_median(three, np.ones(3),
                                                                 midway=True) == 0.3
    assert weighted_median(three, np.array([1.0, 1.0, 5.0])) == 0.3

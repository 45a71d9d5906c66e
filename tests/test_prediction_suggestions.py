"""What to profile next for a prediction (gpuperf_magics.prediction.suggestions): the default
candidates, the memory cap, one wording for the magic, the command and the panel; on real
SQLite stores of imported rows and a real IPython shell."""

from __future__ import annotations

import re

import pandas as pd
import pytest

import gpuperf_magics as gm
from gpuperf_magics.prediction.store_model import fit_store
from gpuperf_magics.prediction.suggestions import (
    candidate_batches,
    device_memory_gb,
    memory_cap,
    next_runs,
    suggestion_line,
    with_suggestions,
)
from gpuperf_magics.skins.cli import main

LINE = re.compile(r"profile batch (\d+) next: ±([\d.]+)% → ±([\d.]+)%, about [\d.]+ (?:s|min)")


def _peaks_store(path, gpu="T4", batches=(16, 32), **columns):
    """Imported rows of one GPU whose peak memory is 1 GiB fixed + 1 GiB per 16 samples:
    batch 256 needs 17 GiB, more than a 16 GiB T4 holds."""
    gm.Store(path).import_table(pd.DataFrame({
        "network": "resnet", "batch_size": list(batches),
        "time_s": [0.01 + 0.001 * b for b in batches],
        "peak_memory_gb": [1 + b / 16 for b in batches], **columns}), gpu=gpu)
    return path


def _batches(advice: list[str]) -> list[int]:
    return [int(m.group(1)) for a in advice if (m := LINE.fullmatch(a))]


def test_candidates_are_the_powers_of_two_between_measured_and_asked():
    assert candidate_batches({16, 32}, [512]) == [64, 128, 256, 512]
    assert candidate_batches({12, 100}, [48]) == [16, 32, 64]  # up to the largest measured
    assert candidate_batches({16, 32, 64}, [64]) == []
    assert suggestion_line("batch 256", 0.31, 0.09, 12.4) == \
        "profile batch 256 next: ±31% → ±9%, about 12 s"
    # The asked batch itself leaves a few tenths of a percent: not "±0%", which reads exact.
    assert suggestion_line("batch 2048", 0.42, 0.004, 9.6) == \
        "profile batch 2048 next: ±42% → ±0.4%, about 9.6 s"
    assert suggestion_line("batch 2048", 0.42, 0.0096, 9.6).endswith("→ ±1%, about 9.6 s")


def test_a_batch_beyond_the_devices_memory_is_never_suggested(ip, tmp_path, capsys):
    """The T4 (16 GiB, 10% kept back) holds batch 128 (9 GiB) but not 256 (17) or 512 (33):
    neither is suggested, and the magic and the command say so."""
    store = _peaks_store(tmp_path / "runs.sqlite")
    result = ip.run_line_magic("predict_time", f"resnet --store {store} --batch-size 512 "
                               "--iterations 100 --suggest -q -o")
    picked = _batches(result.advice)
    assert picked and set(picked) <= {64, 128}
    memory = [a for a in result.advice if a.startswith("not suggested for memory")]
    assert memory == ["not suggested for memory: batch 256, 512 (from about 17.0 GiB; the T4 "
                      "has 16.0, 10% of it kept back)"]
    assert main(["predict", "resnet", "--store", str(store), "--batch-size", "512",
                 "--iterations", "100", "--suggest"]) == 0
    out = capsys.readouterr().out
    assert memory[0] in out and [int(b) for b, _, _ in LINE.findall(out)] == picked


def test_the_recorded_total_memory_caps_before_the_catalogs(tmp_path):
    """A run that recorded its device's memory (a MIG slice of 10 GiB on an 80 GB A100) is
    capped by that, not by the catalog's 80 GB."""
    store = _peaks_store(tmp_path / "runs.sqlite", gpu="A100 80GB", gpu_memory_gb=10.0)
    runs = fit_store(store, "resnet").runs
    assert device_memory_gb(runs, "A100 80GB") == 10.0
    dropped, note = memory_cap({"batch 128": 9.0, "batch 256": 17.0}, 10.0, "A100 80GB")
    assert dropped == ["batch 256"] and note is not None and "the A100 80GB has 10.0" in note
    advice = with_suggestions(gm.predict_time(store, batch_sizes=[512], iterations=100),
                              store).advice
    assert set(_batches(advice)) <= {64, 128}


def test_without_a_recorded_peak_nothing_is_capped(tmp_path):
    store = tmp_path / "runs.sqlite"
    gm.Store(store).import_table(pd.DataFrame({
        "network": "resnet", "batch_size": [16, 32], "time_s": [0.026, 0.042]}), gpu="T4")
    assert memory_cap({"batch 64": float("nan")}, 16.0, "T4") == ([], None)
    found = next_runs(gm.predict_time(store, batch_sizes=[1024], iterations=100),
                      fit_store(store, "resnet"))
    assert found.memory is None and found.candidates == 5 and found.lines
    assert found.first() == found.lines[0]


def test_nothing_left_or_nothing_that_fits_is_said(tmp_path):
    store = _peaks_store(tmp_path / "runs.sqlite", batches=(16, 32, 64))
    measured = next_runs(gm.predict_time(store, batch_sizes=[64], iterations=100),
                         fit_store(store, "resnet"))
    assert measured.lines == [] and measured.first() is None
    assert measured.notes == ["nothing left to profile between the measured and the asked "
                              "batch sizes"]
    big = _peaks_store(tmp_path / "big.sqlite", batches=(64, 128))
    none_fit = next_runs(gm.predict_time(big, batch_sizes=[512], iterations=100),
                         fit_store(big, "resnet"))
    assert none_fit.lines == [] and none_fit.first() == none_fit.memory
    assert none_fit.notes[0].startswith("not suggested for memory: batch 256, 512 ")


def test_a_gpu_answered_from_cpu_flops_is_no_target(filled):
    """On CPU runs, the rows for a GPU come from FLOPs, which more CPU runs do not narrow:
    only the CPU rows are targets, and a GPU row alone is refused with what to do."""
    from gpuperf_magics.prediction.store_model import PredictionError

    both = gm.predict_time(filled, batch_sizes=[256], iterations=100, gpus=["T4"])
    assert _batches(with_suggestions(both, filled).advice)
    gpu_row = both.rows(both.frame.index[-1:])
    with pytest.raises(PredictionError, match="profile one run on a GPU"):
        next_runs(gpu_row, fit_store(filled))


def test_depths_between_the_measured_and_the_asked_one_are_candidates(tmp_path):
    """Runs at depth 8 and 16 (peaks 1 GiB + 1 GiB per 8 layers at batch 32, 4 GiB at batch 64
    and depth 16): asked about depth 64, depth 32 is a candidate at the latest run's batch
    (64); depth 64 would need about 4 × 64 / 16 = 16 GiB, more than the T4 holds."""
    store = tmp_path / "runs.sqlite"
    rows = [{"network": "resnet", "batch_size": 32, "depth": d, "time_s": 0.01 + 0.002 * d,
             "peak_memory_gb": 1 + d / 8} for d in (8, 16)]
    rows.append({"network": "resnet", "batch_size": 64, "depth": 16, "time_s": 0.074,
                 "peak_memory_gb": 4.0})
    gm.Store(store).import_table(pd.DataFrame(rows), gpu="T4")
    pred = gm.predict_time(store, batch_sizes=[64], iterations=100, settings={"depth": 64})
    found = next_runs(pred, fit_store(store), k=5)
    assert found.lines[0].startswith("profile depth 32 next: ")
    assert not any(line.startswith("profile depth 64") for line in found.lines)
    assert list(found.picks.loc[found.picks["depth"] == 32, "batch_size"]) == [64]
    assert found.memory == ("not suggested for memory: depth 64 (from about 16.0 GiB; the T4 "
                            "has 16.0, 10% of it kept back)")


def test_each_suggestion_listed_narrows_the_answer(tmp_path):
    """The list stops before the first pick that would not narrow the targets' error (under
    the first gain model a run of batch 64 after 128 widened it from 8% to 22% on this store;
    since the reach is measured in the series' widest spacing, it narrows 8% to 7%): each line
    listed lowers the expected error the line above it leaves."""
    store = _peaks_store(tmp_path / "runs.sqlite")
    found = next_runs(gm.predict_time(store, batch_sizes=[512], iterations=100),
                      fit_store(store), k=3)
    after = found.picks["expected_mape_after"].to_list()
    assert found.lines and len(found.lines) == len(after)
    assert (found.picks["gain_per_s"] > 0).all()
    assert all(b < a for a, b in zip([found.picks.attrs["expected_mape_before"], *after],
                                     after, strict=False))


def _figures(line: str) -> tuple[str, str]:
    """The "before" and "after" of a line: ("±22%", "±2%") or ("±15% (the mean of...)", ...)."""
    before, after = line.split(" next: ", 1)[1].split(" → ")
    return before, after.split(",")[0]


def test_the_first_figure_is_the_error_the_answer_shows(ip, tmp_path):
    """The line opens with the ``±`` of the answer (the suggester's own figure for the
    targets can differ from it), the mean of the rows asked where there are several, labelled
    so; the run's narrowing is carried onto it: after < before."""
    from gpuperf_magics.skins.widgets import what_if

    store = _peaks_store(tmp_path / "runs.sqlite", batches=(16, 32, 64))
    one = ip.run_line_magic("predict_time", f"resnet --store {store} --batch-size 512 "
                            "--iterations 100 --suggest -q -o")
    shown = one.table()["expected error"].iloc[0]
    lines = [a for a in one.advice if a.startswith("profile ")]
    assert lines
    for line in lines:
        before, after = _figures(line)
        assert before == shown and int(after[1:-1]) < int(before[1:-1])
    two = ip.run_line_magic("predict_time", f"resnet --store {store} --batch-size 8, 512 "
                            "--iterations 100 --suggest -q -o")
    mean = 100 * two.frame["expected_mape"].mean()
    before, _ = _figures(next(a for a in two.advice if a.startswith("profile ")))
    assert before == f"±{mean:.0f}% (the mean of the 2 rows asked)"
    panel = what_if(store, iterations=100, batch_sizes=[512])
    assert panel.measure_next is not None
    assert _figures(panel.measure_next)[0] == panel.answer.table()["expected error"].iloc[0]


def test_a_candidate_is_left_out_exactly_where_its_answer_says_it_will_not_fit(tmp_path):
    """One memory rule for the answer and the candidates (memory_columns), also on several
    GPUs, where a row's batch is each GPU's (weak scaling, as the predictor reads it): on
    2 T4s batch 256 needs 17 GiB on each, more than a T4 holds, and is not suggested."""
    store = _peaks_store(tmp_path / "runs.sqlite", gpu_count=2)
    frame = gm.predict_time(store, batch_sizes=[64, 128, 256, 512], iterations=100).frame
    assert list(frame["gpu_count"]) == [2] * 4
    wont = [int(b) for b, ok in zip(frame["batch_size"], frame["fits"], strict=True) if not ok]
    assert wont == [256, 512]
    found = next_runs(gm.predict_time(store, batch_sizes=[512], iterations=100),
                      fit_store(store, "resnet"), k=5)
    assert found.memory is not None
    assert found.memory.startswith("not suggested for memory: batch 256, 512 (from about "
                                   "17.0 GiB")
    assert set(_batches(found.lines)) <= {64, 128}


def test_the_targets_are_asked_in_the_precision_the_job_asks(tmp_path):
    """Measured on an A100 and asked in AMP, the targets are a move between precisions: the
    suggester's figure for them now is that move's error, larger than the one for the
    precision measured; the candidates stay as the runs were measured (until 2026-12-05 the
    targets were asked as measured too, whatever the job's precision)."""
    store = tmp_path / "runs.sqlite"
    gm.Store(store).import_table(pd.DataFrame({
        "network": "resnet", "batch_size": [16, 32], "time_s": [0.026, 0.042]}),
        gpu="A100 80GB")
    fit = fit_store(store, "resnet")
    as_measured = next_runs(gm.predict_time(store, batch_sizes=[512], iterations=100), fit)
    amp = gm.predict_time(store, batch_sizes=[512], iterations=100, precision="amp")
    assert amp.frame.attrs["precision"] == "fp16"
    in_amp = next_runs(amp, fit)
    assert in_amp.lines and as_measured.lines
    own_fp32 = as_measured.picks.attrs["expected_mape_before"]
    own_amp = in_amp.picks.attrs["expected_mape_before"]
    assert own_amp > own_fp32
    assert "precision" not in in_amp.picks.columns  # as measured: the runs recorded none
    # The line says which precision to profile in; asked as measured, it need not.
    assert all(" (in your runs' precision) next: ±" in line for line in in_amp.lines)
    assert not any("(in " in line for line in as_measured.lines)

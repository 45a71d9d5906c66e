"""The Run result object: statistics, the one-line summary, HTML and the canonical record."""

from __future__ import annotations

import pytest

from gpuperf_magics.run import IterationRecord, Run, format_seconds


def make_run(durations, warmup=1, **kwargs) -> Run:
    its = [IterationRecord(i, d, samples=32, warmup=i < warmup) for i, d in enumerate(durations)]
    return Run(network="net", iterations=its, batch_size=32,
               hardware={"cpu_model": "AMD EPYC"}, quality={"torch_threads": 1}, **kwargs)


def test_statistics_leave_out_warmup():
    run = make_run([1.0, 0.1, 0.2, 0.3, 0.4])
    assert run.warmup_iterations == 1
    assert run.time_s == pytest.approx(1.0)
    assert run.median_s == pytest.approx(0.25)
    assert run.p90_s == pytest.approx(0.37)
    assert run.samples_per_s == pytest.approx(128 / 1.0)
    record = run.to_record()
    assert record["iterations"] == 4 and record["time_s"] == pytest.approx(1.0)
    assert record["recorded_iterations"] == 5


def test_all_warmup_falls_back_to_every_iteration():
    run = make_run([0.5, 0.7], warmup=5)
    assert len(run.steady) == 2 and run.time_s == pytest.approx(1.2)


def test_summary_line_and_html():
    run = make_run([1.0] + [0.0382] * 9, run_id=17)
    line = run.summary_line()
    assert line == ("profile_training: net · 10 it (1 warm-up) · 38.2 ms/it median · batch 32 · "
                    "CPU (1 thread) · run 17")
    details = run.details()
    assert details.startswith(line + "\n")
    assert "CPU AMD EPYC (1 thread)" in details and "samples/s" in details
    html = run._repr_html_()
    assert html.startswith("<table") and "38.2 ms" in html


def test_failed_and_empty_runs_say_so():
    failed = make_run([0.1, 0.1], status="failed", error="ValueError: boom")
    assert "[failed]" in failed.summary_line()
    empty = Run(network="x", notes=["no training iteration detected: ..."])
    assert empty.summary_line() == "profile_training: no training iteration detected: ..."


def test_html_escapes_user_text():
    run = make_run([0.1, 0.1], tags={"note": "<script>"})
    assert "<script>" not in run._repr_html_()


@pytest.mark.parametrize("seconds, text", [(2.314, "2.31 s"), (0.0382, "38.2 ms"),
                                           (0.00074, "740 µs")])
def test_format_seconds(seconds, text):
    assert format_seconds(seconds) == text


def test_details_give_the_p90_and_repr_is_short():
    mixed = Run(network="n", batch_size=4,
                iterations=[IterationRecord(i, 0.0009) for i in range(8)]
                + [IterationRecord(8, 0.002), IterationRecord(9, 0.002)])
    assert "900 µs/it" in mixed.summary_line() and "p90" not in mixed.summary_line()
    assert "median 900 µs, p90 2.0 ms" in mixed.details()
    text = repr(mixed)
    assert text.startswith("Run(network='n', status='ok', iterations=10, batch_size=4")
    assert "IterationRecord" not in text and "not saved" in text


def test_subpackages_are_attributes_of_the_package():
    import gpuperf_magics as gm

    assert callable(gm.datasets.fetch_sia2023)
    assert "datasets" in dir(gm)


def test_a_data_parallel_run_says_how_many_ranks():
    from gpuperf_magics.run import IterationRecord, Run

    its = [IterationRecord(i, 0.01, 8) for i in range(4)]
    job = Run("ddp", iterations=its, batch_size=8,
              quality={"world_size": 2, "global_batch_size": 16, "rank_spread": 0.05})
    assert "batch 8 · 2 ranks (global batch 16)" in job.summary_line()
    assert ("data parallel", "ranks 2, global batch 16, rank spread 5.0%") in job.table()
    alone = Run("ddp", iterations=its, batch_size=8, quality={"world_size": 2, "rank": 1})
    assert "batch 8 · rank 1 of 2" in alone.summary_line()
    single = Run("mlp", iterations=its, batch_size=8, quality={"world_size": 1})
    assert "rank" not in single.summary_line()


def test_the_line_fits_one_notebook_line_and_notes_wrap_between_words():
    its = [IterationRecord(i, 0.147, 256, warmup=i < 4) for i in range(1200)]
    run = Run("ResNet", iterations=its, batch_size=256, device="cuda",
              gpu="NVIDIA A100-SXM4-80GB", gpu_count=2, run_id=1234,
              quality={"world_size": 1},
              notes=["machine busy: other processes used 1.1 cores on average during the "
                     "run; timings may be inflated; " * 2 + "/a/very/long/path/" * 8])
    line, *notes = run.summary_line().splitlines()
    assert line == ("profile_training: ResNet · 1200 it (4 warm-up) · 147.0 ms/it median · "
                    "batch 256 · 2× A100-SXM4-80GB · run 1234")
    assert len(line) <= 110
    assert len(notes) > 1 and all(n.startswith("  ") for n in notes)
    words = run.notes[0].split()
    assert " ".join(" ".join(notes).split()) == " ".join(words)  # no word cut in two
    assert all(len(n) <= 110 for n in notes if "/a/very" not in n)
    # A long status and name: the device, which the reader knows, goes first.
    run.status = "interrupted"
    line = run.summary_line().splitlines()[0]
    assert len(line) <= 110 and "A100" not in line and line.endswith("run 1234")
    assert "2× NVIDIA A100-SXM4-80GB" in run.details()


def test_device_label_reads_a_table_row():
    from gpuperf_magics.run import device_label

    assert device_label("Tesla T4", 1) == "Tesla T4"
    assert device_label("Tesla T4", 4) == "4× Tesla T4"
    assert device_label(float("nan"), 0, threads=2) == "CPU (2 threads)"
    pd = pytest.importorskip("pandas")
    assert device_label(None, pd.NA, threads=pd.NA) == "CPU"
    assert device_label(None, threads=1, cpu_model="AMD EPYC") == "CPU AMD EPYC (1 thread)"


def test_a_stopped_run_says_so_in_its_line_table_and_record():
    its = [IterationRecord(i, 0.01, 8, warmup=i == 0) for i in range(50)]
    run = Run(network="mlp", iterations=its, batch_size=8, stopped_by="precision")
    assert "· 50 it (1 warm-up) stopped early ·" in run.summary_line()
    rows = dict(run.table())
    assert rows["stopped early"] == ("--stop-after auto: the median time per iteration known "
                                     "within 1%")
    assert run.to_record()["stopped_by"] == "precision" and run.status == "ok"
    assert "stopped early" not in Run(network="mlp", iterations=its).summary_line()

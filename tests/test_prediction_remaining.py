"""Remaining time of a partly recorded run, on fixed runs saved into a real SQLite store."""

from __future__ import annotations

import pandas as pd
import pytest

import gpuperf_magics as gm
from gpuperf_magics.prediction.job import Job, flag_spelling
from gpuperf_magics.prediction.live import PRIOR_ITERATIONS
from gpuperf_magics.prediction.remaining import remaining_time
from gpuperf_magics.prediction.store_model import PredictionError
from gpuperf_magics.run import IterationRecord, Run


def _run(batch, durations, *, status="ok", total=None, network="cnn", gpu="Tesla T4",
         gpus=1):
    """A run of fixed iteration times; the first one is warm-up (10× slower)."""
    its = [IterationRecord(index=i, duration_s=d, samples=batch, warmup=i == 0)
           for i, d in enumerate([10 * durations[0], *durations])]
    hyper = {"total_iterations": total} if total else {}
    return Run(network=network, status=status, iterations=its, batch_size=batch,
               device="cuda" if gpu else "cpu", gpu=gpu, gpu_count=gpus if gpu else 0,
               hyper=hyper)


@pytest.fixture
def store(tmp_path):
    st = gm.Store(tmp_path / "runs.sqlite")
    for batch in (16, 32, 64):  # complete runs: 1 ms per sample plus 10 ms
        st.save_run(_run(batch, [0.01 + 0.001 * batch] * 30))
    return st


def test_the_rest_of_an_interrupted_run_on_its_own_gpu(store):
    # 200 of 1,000 iterations done at 50 ms (the complete runs say 42 ms at batch 32), with an
    # evaluation pause of 1 s inside one iteration: left out, by the rule the job time takes.
    durations = [0.05] * 199 + [1.05]
    rid = store.save_run(_run(32, durations, status="interrupted", total=1000))
    result = remaining_time(store)  # the latest partial run
    assert result.run_id == rid and result.done == 201 and result.total == 1000
    assert result.elapsed_s == pytest.approx(0.5 + sum(durations))
    row = result.frame.iloc[0]
    from gpuperf_magics.prediction.store_model import steady_per_iteration

    own = steady_per_iteration(durations)  # 50 ms: the trimmed mean
    model = row["per_iteration_s"]  # blended: between the model's and the run's own
    weight = 200 / (200 + PRIOR_ITERATIONS)
    assert own * weight < model < own
    assert row["remaining_s"] == pytest.approx(row["per_iteration_s"] * (1000 - 201))
    assert row["remaining_low_s"] <= row["remaining_s"] <= row["remaining_high_s"]
    assert row["choice"] == "as recorded: 1× Tesla T4" and "steady iterations" in row["basis"]
    text = str(result)
    assert f"run {rid} (cnn, interrupted): 201 of 1,000 iterations done" in text


def test_a_young_run_leans_on_the_model(store):
    store.save_run(_run(32, [0.2] * 3, status="failed", total=500))
    row = remaining_time(store).frame.iloc[0]
    weight = 3 / (3 + PRIOR_ITERATIONS)
    model = 0.01 + 0.001 * 32
    # The store's model knows 42 ms at batch 32; three 200 ms iterations move it little.
    assert row["per_iteration_s"] == pytest.approx(weight * 0.2 + (1 - weight) * model,
                                                   rel=0.05)


def test_moving_the_rest_to_another_gpu_with_the_cost_of_both(store):
    rid = store.save_run(_run(32, [0.05] * 100, status="interrupted", total=1000))
    prices = pd.DataFrame([
        {"provider": "acme", "region": "eu", "instance": "t4", "gpu": "T4", "gpus": 1,
         "pricing": "on-demand", "usd_per_hour": 0.5, "date": "2026-11-01", "source": "q"},
        {"provider": "acme", "region": "eu", "instance": "a100", "gpu": "A100 80GB",
         "gpus": 1, "pricing": "on-demand", "usd_per_hour": 3.0, "date": "2026-11-01",
         "source": "q"},
    ])
    result = remaining_time(store, rid, gpus=["a100 80gb"], prices=prices)
    here, moved = result.frame.iloc[0], result.frame.iloc[1]
    assert moved["choice"] == "moved to 1× NVIDIA A100-SXM4-80GB"
    assert "transfer" in moved["basis"]
    # The move scales the run's own estimate by the model's ratio of the two GPUs.
    model = gm.predict_time(store, "cnn", batch_sizes=[32], iterations=1,
                            gpus=["A100 80GB"]).frame.set_index("gpu")["time_s"]
    ratio = model["NVIDIA A100-SXM4-80GB"] / model["Tesla T4"]
    assert moved["remaining_s"] == pytest.approx(here["remaining_s"] * ratio)
    assert ratio < 1  # an A100 is faster than a T4
    for row, price in ((here, 0.5), (moved, 3.0)):
        assert row["usd_per_hour"] == price
        assert row["cost_usd"] == pytest.approx(row["remaining_s"] / 3600 * price)
    assert "acme t4 (on-demand)" in str(result)
    # Without a price for the GPU, the cost is unknown and a note says how to add one.
    # (The built-in table prices one T4, AWS's g4dn.xlarge, but no 2× A100 SXM4 80GB.)
    bare = remaining_time(store, rid, gpus=["a100 80gb"], gpu_count=2)
    assert bare.frame.iloc[1]["gpus"] == 2
    assert "aws g4dn.xlarge (on-demand)" in bare.frame.iloc[0]["instance"]
    assert any(n.startswith("no price for 2× NVIDIA A100-SXM4-80GB:") for n in bare.notes)


def test_the_move_compares_the_target_count_with_the_runs_own_count(tmp_path):
    # Complete runs on 1 and 2 T4s; the interrupted run had one. Moved to 2 A100s, the ratio
    # is 2× A100 over 1× T4: asking both at 2 GPUs would compare with 2× T4 instead.
    st = gm.Store(tmp_path / "runs.sqlite")
    for batch in (16, 32, 64):
        st.save_run(_run(batch, [0.01 + 0.001 * batch] * 30))
        st.save_run(_run(batch, [0.01 + 0.0005 * batch] * 30, gpus=2))
    rid = st.save_run(_run(32, [0.05] * 100, status="interrupted", total=1000))
    result = remaining_time(st, rid, gpus=["a100 80gb"], gpu_count=2)
    here, moved = result.frame.iloc[0], result.frame.iloc[1]
    assert here["gpus"] == 1 and moved["gpus"] == 2

    def model(gpus):
        return gm.predict_time(st, "cnn", batch_sizes=[32], iterations=1, gpus=["A100 80GB"],
                               gpu_count=gpus).frame.set_index("gpu")["time_s"]

    one, two = model(1), model(2)
    assert two["Tesla T4"] < 0.8 * one["Tesla T4"]  # the model knows 2 T4s are faster
    ratio = two["NVIDIA A100-SXM4-80GB"] / one["Tesla T4"]
    assert moved["per_iteration_s"] == pytest.approx(here["per_iteration_s"] * ratio)


@pytest.mark.parametrize(("setup", "kwargs", "message"), [
    (None, {}, "no interrupted, failed or stopped-early run with a known job length"),
    (None, {"run_id": 99}, "no run 99"),
    (None, {"run_id": 1}, "run 1 completed: nothing remains"),
    ("no-length", {}, "no interrupted, failed or stopped-early run with a known job length"),
    ("partial", {"gpus": ["Voodoo 5"]}, "unknown GPU"),
    ("partial", {"gpu_count": 0}, "gpu_count must be a finite number > 0"),
    ("partial", {"gpus": ["T4", "A100"]}, r"moves the job to one GPU: give one in gpus"),
    ("partial", {"epochs": 3}, r"remaining_time\(\) does not take epochs: the run says"),
    ("partial", {"job": Job(batch_sizes=[64])}, "does not take batch_sizes"),
])
def test_what_cannot_be_answered_says_why(store, setup, kwargs, message):
    if setup == "no-length":
        store.save_run(_run(32, [0.05] * 10, status="interrupted"))
    elif setup == "partial":
        store.save_run(_run(32, [0.05] * 10, status="interrupted", total=100))
    with pytest.raises(PredictionError, match=message):
        remaining_time(store, **kwargs)


def test_the_rest_of_a_run_that_stop_after_ended(store):
    """A run --stop-after ended is complete (status ok) and keeps the job's length: its rest
    is what the job still needs, and it is the default run to ask about."""
    run = _run(32, [0.05] * 49, total=1000)
    run.stopped_by = "precision"
    rid = store.save_run(run)
    result = remaining_time(store)
    assert (result.run_id, result.done, result.total) == (rid, 50, 1000)
    assert result.status == "stopped early"
    assert f"run {rid} (cnn, stopped early): 50 of 1,000 iterations done" in str(result)


def test_a_run_id_without_job_length_says_how_to_record_it(store):
    rid = store.save_run(_run(32, [0.05] * 10, status="interrupted"))
    with pytest.raises(PredictionError, match="total_iterations=N") as caught:
        remaining_time(store, rid)
    assert "--" not in str(caught.value)  # a Python caller: Python words
    with flag_spelling(), pytest.raises(PredictionError, match="--total-iterations N"):
        remaining_time(store, rid)


def test_without_a_model_the_runs_own_iterations_answer(tmp_path):
    st = gm.Store(tmp_path / "alone.sqlite")
    st.save_run(_run(32, [0.05] * 50, status="interrupted", total=100, network="solo"))
    result = remaining_time(st)
    row = result.frame.iloc[0]
    assert row["per_iteration_s"] == pytest.approx(0.05)
    assert row["remaining_s"] == pytest.approx(0.05 * 49)
    assert any("no model of 'solo'" in n for n in result.notes)
    assert result.table()["per iteration"].iloc[0] == "50.0 ms"
    slow = gm.Store(tmp_path / "slow.sqlite")
    slow.save_run(_run(32, [2.5] * 10, status="interrupted", total=100, network="solo"))
    assert remaining_time(slow).table()["per iteration"].iloc[0] == "2.50 s"  # not 2500.0 ms


# --------------------------------------------------------------------------- magic and CLI
def test_magic_remaining_on_its_gpu_and_moved(ip, store):
    rid = store.save_run(_run(32, [0.05] * 100, status="interrupted", total=1000))
    result = ip.run_line_magic("predict_time", f"--store {store.path} --remaining -q -o")
    assert result.run_id == rid and len(result.frame) == 1
    moved = ip.run_line_magic(
        "predict_time", f"--store {store.path} --remaining {rid} --gpu A100 80GB -q -v rem")
    assert moved is None and len(ip.user_ns["rem"].frame) == 2
    assert ip.user_ns["rem"].frame.iloc[1]["gpu"] == "NVIDIA A100-SXM4-80GB"


@pytest.mark.parametrize(("options", "message"), [
    ("--remaining x", "expects a run id"),
    ("--remaining 99", "no run 99"),
    ("--remaining --epochs 3", "does not take --epochs"),
    ("--remaining -w", "do not go together"),
    ("--remaining --gpu T4,A100", "one GPU"),
])
def test_magic_remaining_errors_are_usage_errors(ip, store, options, message):
    from IPython.core.error import UsageError

    store.save_run(_run(32, [0.05] * 10, status="interrupted", total=100))
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("predict_time", f"--store {store.path} {options}")


def test_cli_remaining_prints_both_choices_and_their_cost(store, tmp_path, capsys):
    from gpuperf_magics.skins.cli import main

    rid = store.save_run(_run(32, [0.05] * 100, status="interrupted", total=1000))
    prices = tmp_path / "p.csv"
    prices.write_text("provider,region,instance,gpu,gpus,pricing,usd_per_hour,date,source\n"
                      "acme,eu,t4,T4,1,on-demand,0.5,2026-11-01,q\n")
    code = main(["predict", "--store", str(store.path), "--remaining", str(rid), "--gpu",
                 "A10G", "--prices", str(prices)])
    out = capsys.readouterr().out
    assert code == 0 and f"run {rid} (cnn, interrupted): 101 of 1,000" in out
    assert "moved to 1× NVIDIA A10G" in out and "acme t4 (on-demand)" in out
    assert main(["predict", "--store", str(store.path), "--remaining", str(rid), "--csv"]) == 0
    assert capsys.readouterr().out.startswith("choice,gpu,gpus,remaining_s")
    assert main(["predict", "--store", str(store.path), "--remaining", "0"]) == 2
    assert "--remaining" in capsys.readouterr().err
    assert main(["predict", "--store", str(store.path), "--remaining", str(rid),
                 "--batch-size", "8"]) == 2
    assert "does not take --batch-size" in capsys.readouterr().err


def test_a_run_on_another_gpu_than_the_latest_is_still_placed(store):
    # The store's latest completed run is on a T4; the interrupted one ran on an A10G.
    rid = store.save_run(_run(32, [0.03] * 50, status="interrupted", total=500,
                              gpu="NVIDIA A10G"))
    result = remaining_time(store, rid, gpus=["a100 80gb"])
    assert list(result.frame["gpu"]) == ["NVIDIA A10G", "NVIDIA A100-SXM4-80GB"]
    assert "store's model" in result.frame.iloc[0]["basis"]


def test_the_rest_takes_the_same_per_iteration_rule_as_the_job_time(tmp_path):
    """One stall among 20 steady iterations: the job time learnt from the store leaves it
    out (trimmed mean) and so does --remaining (it took the plain mean: 0.0975 s, not 0.05)."""
    from gpuperf_magics.prediction.store_model import (
        PER_ITERATION_RULE,
        robust_times,
        steady_per_iteration,
    )

    durations = [0.05] * 19 + [1.0]
    st = gm.Store(tmp_path / "stall.sqlite")
    st.save_run(_run(32, durations, status="interrupted", total=100, network="solo"))
    row = remaining_time(st).frame.iloc[0]
    assert row["per_iteration_s"] == pytest.approx(0.05)
    assert row["per_iteration_s"] == pytest.approx(steady_per_iteration(durations))
    assert PER_ITERATION_RULE in row["basis"]
    done = gm.Store(tmp_path / "done.sqlite")
    done.save_run(_run(32, durations, network="solo"))
    runs = done.runs(status="ok")
    learnt = robust_times(done, runs) / runs["iterations"]
    assert learnt.iloc[0] == pytest.approx(row["per_iteration_s"])

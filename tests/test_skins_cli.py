"""The ``gpuperf`` command line through subprocess, on temporary stores."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from shared_data import SHARED_DATA

import gpuperf_magics as gm

SHARED_SIA = SHARED_DATA / "sia2023"


def gpuperf(*args: str, store: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "GPUPERF_STORE": str(store)}
    # Not the installed `gpuperf` script: it imports the package it was installed from, which
    # need not be the one under test; `-m` from the repository root imports this checkout.
    command = [sys.executable, "-m", "gpuperf_magics.skins.cli"]
    proc = subprocess.run([*command, *args],
                          capture_output=True, text=True, env=env, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture
def step_times(tmp_path) -> Path:
    """A table as another tool writes it: per-GPU batch and seconds per step."""
    if SHARED_SIA.is_dir():
        frame = pd.read_csv(SHARED_SIA / "cifar10" / "placements-aws.csv")
        frame = frame[frame["placement"] == 1]
    else:  # the same shape, when ../shared is absent
        frame = pd.DataFrame({"placement": 1, "local_bsz": [32, 64, 128, 256, 512],
                              "step_time": [0.04, 0.06, 0.1, 0.19, 0.37], "sync_time": 0.0})
    path = tmp_path / "steps.csv"
    frame.to_csv(path, index=False)
    return path


def test_import_runs_predict_evaluate(tmp_path, step_times):
    store = tmp_path / "cli.sqlite"
    options = ["--map", "local_bsz=batch_size", "--map", "step_time=time_s",
               "--map", "sync_time=sync_time_s", "--network", "resnet18-cifar",
               "--gpu", "Tesla T4"]
    out = gpuperf("import", str(step_times), *options, store=store).stdout
    n = len(pd.read_csv(step_times))
    assert f"imported {n} row(s)" in out
    runs = gm.Store(store).runs()
    assert len(runs) == n and set(runs["gpu"]) == {"Tesla T4"}
    assert (runs["iterations"] == 1).all()

    # The --map options in another order store the same rows: the same import.
    again = gpuperf("import", str(step_times), *options[2:4], *options[:2], *options[4:],
                    store=store, check=False)
    assert again.returncode == 2 and "--again" in again.stderr
    assert len(gm.Store(store).runs()) == n

    listing = gpuperf("runs", store=store).stdout
    assert "resnet18-cifar" in listing and "Tesla T4" in listing
    as_csv = gpuperf("runs", "--csv", store=store).stdout
    assert as_csv.splitlines()[0].startswith("run_id,network,batch_size")

    pred = gpuperf("predict", "--batch-size", "48,96", "--iterations", "1000",
                   "--gpu", "V100", store=store).stdout
    assert "resnet18-cifar: fitted on" in pred
    assert "batch 48 · Tesla T4" in pred and "Tesla V100-SXM2-16GB" in pred
    assert "interpolation" in pred and "transfer" in pred

    ev = gpuperf("evaluate", "--scenario", "leave_one_out", "--column", "batch_size",
                 store=store).stdout
    assert "mape" in ev and "leave_one_out" in ev


def test_broken_csv_imports_nothing_and_says_where(tmp_path):
    store = tmp_path / "cli.sqlite"
    bad = tmp_path / "bad.csv"
    bad.write_text("network,batch_size,time_s\nnet,32,0.5\nnet,64,abc\nnet,-8,0.4\n")
    proc = gpuperf("import", str(bad), store=store, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "time_s" in proc.stderr and "line 3" in proc.stderr
    assert gm.Store(store).runs().empty


def test_errors_are_one_line(tmp_path):
    store = tmp_path / "empty.sqlite"
    gm.Store(store).migrate()  # a store without runs (a missing file is another error)
    proc = gpuperf("predict", store=store, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("gpuperf predict: error:") and "profile" in proc.stderr
    proc = gpuperf("import", str(tmp_path / "missing.csv"), store=store, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    proc = gpuperf("import", "x.csv", "--map", "nonsense", store=store, check=False)
    assert proc.returncode == 2 and "COLUMN=CANONICAL" in proc.stderr


def _table(path: Path, times: tuple[float, float]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"network,batch_size,time_s\nnet,32,{times[0]}\nnet,64,{times[1]}\n")
    return path


def test_import_duplicates_are_found_by_content_and_options(tmp_path):
    store = tmp_path / "cli.sqlite"
    good = _table(tmp_path / "good.csv", (0.5, 0.9))
    other = _table(tmp_path / "other" / "good.csv", (0.7, 1.1))
    gpuperf("import", str(good), "--gpu", "T4", store=store)
    # Same name, other content and options: a different import.
    gpuperf("import", str(other), "--network", "net2", "--gpu", "V100", store=store)
    assert len(gm.Store(store).runs()) == 4

    again = gpuperf("import", str(good), "--gpu", "T4", store=store, check=False)
    assert again.returncode == 2 and "--again" in again.stderr and "Traceback" not in again.stderr
    assert "import:good.csv" in again.stderr and "run ids 1–2" in again.stderr
    renamed = tmp_path / "renamed.csv"
    renamed.write_bytes(good.read_bytes())  # same bytes under another name: the same rows
    assert gpuperf("import", str(renamed), "--gpu", "T4", store=store,
                   check=False).returncode == 2
    assert len(gm.Store(store).runs()) == 4

    # Other options store other rows: not a duplicate.
    gpuperf("import", str(good), "--gpu", "A100", store=store)
    gpuperf("import", str(good), "--gpu", "T4", "--map", "time_s=time_s", store=store)
    gpuperf("import", str(good), "--gpu", "T4", "--again", store=store)
    runs = gm.Store(store).runs()
    assert len(runs) == 10
    assert runs["tags"].map(lambda t: len(t["import_sha256"]) == 64).all()
    assert runs["source"].tolist() == ["import:good.csv"] * 10


def test_reimporting_an_export_says_its_rows_are_already_there(tmp_path):
    store = tmp_path / "cli.sqlite"
    gpuperf("import", str(_table(tmp_path / "good.csv", (0.5, 0.9))), "--gpu", "T4",
            store=store)
    exported = tmp_path / "export.csv"
    gm.Store(store).export(exported)  # carries each run's run_uid
    again = gpuperf("import", str(exported), "--again", store=store)
    assert "imported 2" not in again.stdout and "into" not in again.stdout
    assert "2 row(s) already in the store" in again.stdout
    assert len(gm.Store(store).runs()) == 2


def test_import_into_a_store_of_file_name_records(tmp_path):
    """Rows imported before fingerprints (source only) never block nor crash an import."""
    store = tmp_path / "old.sqlite"
    good = _table(tmp_path / "good.csv", (0.5, 0.9))
    gm.Store(store).import_table(good, network="net")  # source "import:good.csv", no tag
    other = _table(tmp_path / "other" / "good.csv", (0.7, 1.1))
    proc = gpuperf("import", str(other), store=store)
    assert "imported 2 row(s)" in proc.stdout
    assert "note:" in proc.stderr and "run ids 1–2" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert gpuperf("import", str(other), store=store, check=False).returncode == 2
    assert len(gm.Store(store).runs()) == 4


def test_import_rejects_an_unknown_gpu(tmp_path):
    store = tmp_path / "cli.sqlite"
    good = _table(tmp_path / "good.csv", (0.5, 0.9))
    proc = gpuperf("import", str(good), "--gpu", "FooGPU", store=store, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "unknown GPU 'FooGPU'" in proc.stderr and "lines 2, 3" in proc.stderr
    proc = gpuperf("import", str(good), "--gpu", "Tesla T44", store=store, check=False)
    assert proc.returncode == 2 and "close matches: Tesla T4" in proc.stderr
    assert gm.Store(store).runs().empty
    # A retry with the right name is not taken for a duplicate of the refused one.
    gpuperf("import", str(good), "--gpu", "Tesla T4", store=store)


@pytest.mark.parametrize(
    ("option", "value", "what"),
    [
        ("--epochs", "inf", "must be a finite number > 0"),
        ("--epochs", "nan", "must be a finite number > 0"),
        ("--epochs", "0", "must be a finite number > 0"),
        ("--epochs", "-2", "must be a finite number > 0"),
        ("--epochs", "two", "must be a number"),
        ("--iterations", "1e400", "must be a finite number > 0"),
        ("--iterations", "1.5", "must be a whole number"),
        ("--iterations", "1_000", "must be a whole number"),
        ("--samples", "nan", "must be a finite number > 0"),
        ("--gpu-count", "0", "must be a finite number > 0"),
        ("--gpu-count", "inf", "must be a finite number > 0"),
        ("--batch-size", "32,inf", "--batch-size expects integers"),
        ("--batch-size", "0", "--batch-size expects positive integers"),
    ],
)
def test_numeric_options_must_be_finite_and_positive(tmp_path, capsys, option, value, what):
    from gpuperf_magics.skins.cli import main

    store = tmp_path / "cli.sqlite"
    _table(tmp_path / "good.csv", (0.5, 0.9))
    assert main(["import", str(tmp_path / "good.csv"), "--store", str(store)]) == 0
    capsys.readouterr()
    assert main(["predict", option, value, "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpuperf predict: error: {option}") and what in err
    assert len(err.strip().splitlines()) == 1


def test_numeric_option_errors_through_the_command(tmp_path):
    store = tmp_path / "cli.sqlite"
    for value in ("inf", "nan"):
        proc = gpuperf("predict", "--epochs", value, store=store, check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert proc.stderr.strip() == (
            f"gpuperf predict: error: --epochs must be a finite number > 0, got '{value}'"
        )
    proc = gpuperf("evaluate", "--threshold", "nan", store=store, check=False)
    assert proc.returncode == 2 and "--threshold must be a finite number" in proc.stderr


def test_numeric_options_accept_whole_numbers_in_any_spelling(tmp_path):
    store = tmp_path / "cli.sqlite"
    gpuperf("import", str(_table(tmp_path / "good.csv", (0.5, 0.9))), "--gpu", "T4",
            store=store)
    out = gpuperf("predict", "--batch-size", "32", "--iterations", "1e3", "--gpu-count", "1",
                  "--csv", store=store).stdout
    frame = pd.read_csv(io.StringIO(out))
    assert frame["iterations"].tolist() == [1000]


# --------------------------------------------------------------------------- rough edges
@pytest.mark.parametrize("command", [
    ["runs"], ["predict"], ["predict", "--remaining"], ["evaluate"],
    ["sync", "{typo}", "{other}"],
])
def test_reading_commands_name_a_store_that_does_not_exist(tmp_path, command):
    typo, other = tmp_path / "typo.sqlite", tmp_path / "other.sqlite"
    args = [a.format(typo=typo, other=other) for a in command]
    if command[0] != "sync":
        args += ["--store", str(typo)]
    proc = gpuperf(*args, store=tmp_path / "unused.sqlite", check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"gpuperf {command[0]}: error: no store at {typo}: the file "
                                  "does not exist")
    assert len(proc.stderr.strip().splitlines()) == 1
    # It says how to name another store on this command, and nothing of the other interfaces.
    assert proc.stderr.endswith("or name another store with "
                                + ("gpuperf sync SRC DST.\n" if command[0] == "sync"
                                   else "--store PATH.\n"))
    assert "%config" not in proc.stderr and "Store(" not in proc.stderr
    assert list(tmp_path.iterdir()) == []  # reading created nothing, not even the sync target


def test_a_missing_default_store_says_how_the_command_line_fills_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "GPUPERF_STORE"}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    proc = subprocess.run([sys.executable, "-m", "gpuperf_magics.skins.cli", "runs"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2
    assert "(the default store)" in proc.stderr
    assert "import a table with gpuperf import" in proc.stderr
    assert "profile_training" not in proc.stderr and "Store." not in proc.stderr
    assert not (tmp_path / "xdg").exists()


def test_an_error_line_keeps_a_run_not_found_error_s_message() -> None:
    from gpuperf_magics.skins.cli import _message
    from gpuperf_magics.store import RunNotFoundError

    assert _message("predict", RunNotFoundError(7, "runs.sqlite")) == (
        str(RunNotFoundError(7, "runs.sqlite")))
    assert "no run with id 7" in _message("predict", RunNotFoundError(7, "runs.sqlite"))
    assert _message("runs", KeyError("network")) == "network"  # not "'network'"


def test_runs_shows_the_device_and_the_iterations_the_cell_counted(tmp_path, profile_mlp):
    store = tmp_path / "runs.sqlite"
    profile_mlp(store, [16], steps=20)
    gpuperf("import", str(_table(tmp_path / "t4.csv", (0.5, 0.9))), "--gpu", "Tesla T4",
            store=store)
    out = gpuperf("runs", store=store).stdout
    assert "NaN" not in out and "gpu_count" not in out
    header, cpu_row, *gpu_rows = out.splitlines()[:4]
    assert header.split()[:5] == ["run_id", "network", "batch_size", "timed_it", "warmup_it"]
    assert "device" in header
    run = gm.Store(store).get_run(1)
    timed, warmup = len(run.steady), run.warmup_iterations
    assert warmup > 0 and timed + warmup == len(run.iterations)
    # The numbers the cell's line printed, "N it (W warm-up)", are the row's two columns.
    assert f"{len(run.iterations)} it ({warmup} warm-up)" in run.summary_line()
    assert cpu_row.split()[:5] == ["1", "mlp", "16", str(timed), str(warmup)]
    assert "CPU (1 thread)" in cpu_row
    assert all("Tesla T4" in row and " - " in row for row in gpu_rows)
    assert "timed_it: the iterations time_s covers" in out and "warmup_it:" in out


def test_runs_of_an_unknown_network_say_which_there_are(tmp_path):
    store = tmp_path / "runs.sqlite"
    gpuperf("import", str(_table(tmp_path / "t.csv", (0.5, 0.9))), store=store)
    proc = gpuperf("runs", "--network", "nett", store=store, check=False)
    assert proc.returncode == 2 and proc.stdout == ""  # a filter that matched nothing
    assert proc.stderr.strip() == (
        f"gpuperf runs: error: no runs of network 'nett' in {store}; networks in the store: net")


def test_evaluate_says_which_network_and_prints_percent(tmp_path):
    from gpuperf_magics.model import evaluate
    from gpuperf_magics.prediction.store_model import fit_store, per_iteration_table, robust_times

    store = tmp_path / "runs.sqlite"
    for name, scale in (("net-a", 1.0), ("net-b", 3.0)):
        rows = "".join(f"{name},{b},{scale * (0.01 + 0.001 * b + 0.0002 * (b % 7))}\n"
                       for b in (8, 16, 32, 64, 128))
        path = tmp_path / f"{name}.csv"
        path.write_text("network,batch_size,time_s\n" + rows)
        gpuperf("import", str(path), store=store)
    out = gpuperf("evaluate", "--network", "net-a", "--scenario", "leave_one_out",
                  "--column", "batch_size", store=store).stdout
    first, header, *rows = out.strip().splitlines()
    assert first.startswith(f"network net-a: 5 run(s) in {store}; mape:")
    assert "in % of the measured time" in first and header.split()[-1] == "mape"
    fitted, runs = fit_store(store, "net-a")
    x, y = per_iteration_table(runs, fitted.features, robust_times(gm.Store(store), runs))
    expected = evaluate(fitted.model, x, y, "leave_one_out", column="batch_size")["mape"]
    assert [row.split()[-1] for row in rows] == [f"{100 * v:.1f}%" for v in expected]
    latest = gpuperf("evaluate", store=store).stdout  # no --network: the latest run's
    assert latest.startswith("network net-b: 5 run(s)")


def test_import_errors_speak_the_options_the_user_typed(tmp_path):
    store = tmp_path / "runs.sqlite"
    table = tmp_path / "steps.csv"
    table.write_text("batch_size,step,time_s\n32,0.4,0.5\n64,0.8,0.9\n")
    missing = tmp_path / "missing.csv"
    missing.write_text("batch_size,step\n32,0.4\n")
    err = gpuperf("import", str(missing), store=store, check=False).stderr
    assert "--map COLUMN=time_s" in err and "--network NAME" in err
    assert "Fix the table or the mapping (--map COLUMN=<canonical name>)" in err
    assert "mapping=" not in err and "network=..." not in err
    err = gpuperf("import", str(table), "--network", "n", "--map", "stp=time_s", store=store,
                  check=False).stderr
    assert "--map names 'stp', not a column of the table" in err
    err = gpuperf("import", str(table), "--network", "n", "--map", "step=time_s", store=store,
                  check=False).stderr
    assert "would all become 'time_s'; drop all but one (--map COLUMN= with nothing" in err
    # ... which it can: --map COLUMN= drops a column.
    gpuperf("import", str(table), "--network", "n", "--map", "step=time_s", "--map", "time_s=",
            store=store)
    assert gm.Store(store).runs()["time_s"].tolist() == [0.4, 0.8]
    # The Python API still speaks its own arguments.
    with pytest.raises(ValueError, match=r"mapping=\{'<column>': 'time_s'\}"):
        gm.Store(store).import_table(missing, network="n")


def test_sync_bar_draws_large_copies_and_nothing_when_quiet() -> None:
    import io

    from gpuperf_magics.skins.cli import SyncBar

    stream = io.StringIO()
    bar = SyncBar(quiet=False, stream=stream)
    for done in (0, 600, 1200):
        bar(done, 1200)
    bar.close()
    assert "1200/1200" in stream.getvalue() and "sync" in stream.getvalue()
    small = io.StringIO()
    SyncBar(quiet=False, stream=small)(5, 50)  # a small copy into a pipe: no bar
    quiet = io.StringIO()
    SyncBar(quiet=True, stream=quiet)(5, 5000)
    assert small.getvalue() == "" and quiet.getvalue() == ""


# --------------------------------------------------------------------------- issue 19
def _saved(store: Path, network: str, batches: tuple[int, ...] = (16, 32, 64)) -> gm.Store:
    from gpuperf_magics.run import IterationRecord, Run

    st = gm.Store(store)
    for batch in batches:
        its = [IterationRecord(i, 0.01 + 0.001 * batch, batch, warmup=i == 0)
               for i in range(12)]
        st.save_run(Run(network, iterations=its, batch_size=batch, device="cuda",
                        gpu="Tesla T4", gpu_count=1))
    return st


def test_every_csv_escapes_spreadsheet_formulas(tmp_path, capsys):
    from gpuperf_magics.skins.cli import main
    from gpuperf_magics.store.files import unescape_formula

    formula = "=HYPERLINK(\"http://x\",\"y\")"
    store = _saved(tmp_path / "runs.sqlite", formula)
    for argv in (["runs", "--csv"], ["predict", "--iterations", "100", "--csv"]):
        assert main([*argv, "--store", str(store.path)]) == 0
        frame = pd.read_csv(io.StringIO(capsys.readouterr().out))
        assert set(frame["network"]) == {"'" + formula}, argv  # text in a spreadsheet
        assert {unescape_formula(v) for v in frame["network"]} == {formula}
        assert (frame["batch_size"] > 0).all()  # numbers stay numbers, "-1.5" too


def test_control_characters_in_names_are_printed_escaped(tmp_path, capsys):
    from gpuperf_magics.skins.cli import main, printable

    store = _saved(tmp_path / "runs.sqlite", "net\x1b]0;owned\x07\x1b[2J\x9b")
    assert main(["runs", "--store", str(store.path)]) == 0
    assert main(["predict", "--iterations", "100", "--store", str(store.path)]) == 0
    assert main(["runs", "--network", "nope\x1b[2J", "--store", str(store.path)]) == 2
    out, err = capsys.readouterr()
    for text in (out, err):
        assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    assert "net\\x1b]0;owned\\x07\\x1b[2J\\x9b" in out
    assert "nope\\x1b[2J" in err
    assert printable("a\tb\nc") == "a\\tb\nc"  # lines stay lines


def test_output_cut_short_by_its_reader_ends_quietly(tmp_path):
    """`gpuperf runs | head -1`: the reader is gone before the write (a closed pipe: no race)."""
    store = _saved(tmp_path / "runs.sqlite", "net")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "gpuperf_magics.skins.cli", "runs",
                               "--store", str(store.path)], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)
    assert proc.returncode == 141  # as a Unix tool stopped by SIGPIPE
    assert proc.stderr == ""  # no traceback, no "Exception ignored"


def test_a_mistyped_option_shows_the_command_s_usage_and_the_closest_option(tmp_path, capsys):
    from gpuperf_magics.skins.cli import main

    with pytest.raises(SystemExit) as info:
        main(["predict", "--batchsize", "32", "--store", str(tmp_path / "s.sqlite")])
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err.startswith("usage: gpuperf predict") and "--batch-size B[,B...]" in err
    assert "unrecognized arguments: --batchsize; did you mean --batch-size?" in err
    with pytest.raises(SystemExit):
        main(["runs", "--zzz"])
    err = capsys.readouterr().err
    assert err.startswith("usage: gpuperf runs") and "gpuperf runs takes --csv" in err


def test_the_demo_s_help_says_its_store_is_temporary(capsys):
    from gpuperf_magics.skins.cli import main

    with pytest.raises(SystemExit) as info:
        main(["demo", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert info.value.code == 0
    assert "default: a temporary store" in out and "$GPUPERF_STORE and the per-user store are "\
        "never used" in out
    assert "(default: $GPUPERF_STORE, else" not in out


def test_predict_marks_what_meets_a_deadline(tmp_path, capsys):
    from gpuperf_magics.skins.cli import main

    store = _saved(tmp_path / "runs.sqlite", "cnn")
    argv = ["predict", "--iterations", "1000", "--batch-size", "16,64", "--store",
            str(store.path)]
    assert main([*argv, "--deadline", "0:10", "--csv"]) == 0
    frame = pd.read_csv(io.StringIO(capsys.readouterr().out))
    expected = ["met" if hi <= 600 else "likely" if t <= 600 else "missed"
                for t, hi in zip(frame["time_s"], frame["time_high_s"])]
    assert frame["deadline"].tolist() == expected and "met" in expected
    assert main([*argv, "--deadline", "0.001"]) == 0  # hours: 3.6 s, met by none
    out = capsys.readouterr().out
    assert "deadline 3.6 s:\n  missed: batch 16 · Tesla T4, batch 64 · Tesla T4" in out
    assert main([*argv, "--deadline", "2:75"]) == 2
    assert "--deadline takes hours (2.5) or H:MM (2:30)" in capsys.readouterr().err

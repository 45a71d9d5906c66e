"""``%%profile_training`` in a real IPython shell, real torch training, real SQLite stores."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pandas as pd
import pytest
from IPython.core.error import UsageError

import gpuperf_magics as gm
from gpuperf_magics.prediction.record import Prediction

SETUP = textwrap.dedent(
    """
    import torch
    from torch import nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    """
)

LOOP = textwrap.dedent(
    """
    for step in range(12):
        x, y = torch.randn(16, 32), torch.randint(0, 10, (16,))
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    final_loss = loss.item()
    """
)


@pytest.fixture
def shell(ip):
    ip.run_cell(SETUP)
    for name in ("final_loss", "result_run"):
        ip.user_ns.pop(name, None)
    return ip


def test_import_is_cheap_and_ipython_free():
    code = (
        "import sys, gpuperf_magics; "
        "print(any(m in sys.modules for m in ('torch', 'IPython', 'pandas', 'sklearn')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_profiles_cell_in_user_namespace_and_stores_run(shell, capsys, _isolated_store):
    shell.run_cell_magic("profile_training", "", LOOP + "%time tiny = 1 + 1\n")
    out = capsys.readouterr().out
    assert "profile_training: Sequential-2.76K · 12 it" in out
    assert "batch 16" in out and "run 1" in out
    assert isinstance(shell.user_ns["final_loss"], float)
    assert shell.user_ns["tiny"] == 2  # a line magic inside the cell works
    runs = gm.Store(_isolated_store).runs()
    assert len(runs) == 1
    row = runs.iloc[0]
    assert row["network"] == "Sequential-2.76K" and row["batch_size"] == 16
    assert row["status"] == "ok"
    assert row["iterations"] == 12 - row["warmup_iterations"]
    assert row["time_s"] > 0
    assert len(gm.Store(_isolated_store).iterations(int(row["run_id"]))) == 12


def test_options_name_tags_epochs_and_output_object(shell, capsys, tmp_path):
    store = tmp_path / "other.sqlite"
    run = shell.run_cell_magic(
        "profile_training",
        f"-n mlp --store {store} --warmup 3 --tag lr=0.05 --tag data=random --epochs 7 -o",
        LOOP,
    )
    assert isinstance(run, gm.Run)
    assert run.network == "mlp" and run.warmup_iterations == 3
    assert run.tags == {"lr": "0.05", "data": "random"}
    assert run.hyper["epochs"] == 7
    assert run.store_path is not None
    assert "mlp" in capsys.readouterr().out
    stored = gm.Store(store).runs()
    assert stored.iloc[0]["network"] == "mlp"
    assert stored.iloc[0]["tags"] == {"lr": "0.05", "data": "random"}
    html = run._repr_html_()
    assert "<table" in html and "mlp" in html


def test_quiet_and_variable(shell, capsys):
    assert shell.run_cell_magic("profile_training", "-q -v result_run --phases", LOOP) is None
    assert capsys.readouterr().out == ""
    run = shell.user_ns["result_run"]
    assert isinstance(run, gm.Run)
    assert run.phase_medians()["forward"] > 0


def test_config_store_setting(shell, tmp_path):
    store = tmp_path / "configured.sqlite"
    shell.run_line_magic("config", f"GpuPerf.store = {str(store)!r}")
    try:
        shell.run_cell_magic("profile_training", "-q", LOOP)
    finally:
        shell.run_line_magic("config", "GpuPerf.store = None")
    assert len(gm.Store(store).runs()) == 1


@pytest.mark.parametrize(
    "line, message",
    [
        ("--tag nokey", "key=value"),
        ("--warmup -1", "--warmup"),
        ("--epochs 0", "--epochs"),
        ("--total-iterations -5", "--total-iterations"),
        ("-v 1abc", "variable name"),
        ("--bogus", "unrecognized"),
    ],
)
def test_usage_errors(shell, line, message):
    with pytest.raises(UsageError, match=message):
        shell.run_cell_magic("profile_training", line, LOOP)


def test_usage_error_is_one_line_in_a_notebook_cell(shell, capsys):
    result = shell.run_cell("%%profile_training --warmup -1\n" + LOOP)
    out = capsys.readouterr()
    text = out.out + out.err
    assert "UsageError" in text and "Traceback" not in text
    assert not result.success


def test_exception_in_cell_keeps_partial_run_and_fails_the_cell(shell, capsys, _isolated_store):
    cell = LOOP.replace("    opt.step()\n", "    opt.step()\n    if step == 6:\n"
                        "        raise ValueError('diverged')\n")
    result = shell.run_cell("%%profile_training\n" + cell)
    out = capsys.readouterr().out
    assert not result.success and isinstance(result.error_in_exec, ValueError)
    assert "ValueError" in out and "diverged" in out
    assert "[failed]" in out and "· 7 it" in out
    runs = gm.Store(_isolated_store).runs()
    assert list(runs["status"]) == ["failed"]
    assert "diverged" in runs.iloc[0]["error"]


def test_real_sigint_stores_interrupted_run(shell, capsys, _isolated_store):
    import signal

    # A harness that starts pytest in the background (``cmd &`` in a script) has SIGINT
    # ignored, and Python then never installs its KeyboardInterrupt handler: install it here.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    cell = LOOP.replace(
        "    opt.step()\n",
        "    opt.step()\n    if step == 4:\n        import os, signal, time\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        time.sleep(5)\n",
    )
    try:
        result = shell.run_cell("%%profile_training\n" + cell)
    finally:
        signal.signal(signal.SIGINT, previous)
    out = capsys.readouterr().out
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    assert "[interrupted]" in out
    runs = gm.Store(_isolated_store).runs()
    assert list(runs["status"]) == ["interrupted"]
    assert int(runs.iloc[0]["recorded_iterations"]) == 5
    from torch.optim import optimizer as optim_mod

    assert not optim_mod._global_optimizer_post_hooks


def test_cell_without_training_stores_nothing_and_says_why(shell, capsys, _isolated_store):
    shell.run_cell_magic("profile_training", "", "total = sum(range(10))\n")
    out = capsys.readouterr().out
    assert "no training iteration detected" in out
    assert shell.user_ns["total"] == 45
    assert gm.Store(_isolated_store).runs().empty


def test_store_broken_during_the_cell_keeps_run_in_memory(shell, capsys, tmp_path):
    path = tmp_path / "runs.sqlite"
    cell = LOOP + f"open({str(path)!r}, 'wb').write(b'not a database ' * 100)\n"
    run = shell.run_cell_magic("profile_training", f"--store {path} -o", cell)
    out = capsys.readouterr().out
    assert "not saved" in out and "Traceback" not in out
    assert run.run_id is None and len(run.iterations) == 12
    assert run in gm.capture.unsaved_runs()
    path.unlink()  # moved aside, as the note says
    run.save()  # goes where the cell meant it to go, not to the default store
    assert run.run_id is not None and len(gm.Store(path).runs()) == 1
    stored = gm.Store(path).get_run(run.run_id)
    assert not any(note.startswith("not saved") for note in stored.notes)
    assert run not in gm.capture.unsaved_runs()


@pytest.mark.parametrize("kind", ["folder", "garbage", "newer"])
def test_a_store_that_cannot_take_the_run_stops_the_cell_before_it_trains(shell, tmp_path,
                                                                          kind):
    import sqlite3

    path = tmp_path / "runs.sqlite"
    if kind == "folder":
        path.mkdir()
    elif kind == "garbage":
        path.write_bytes(b"not a database " * 100)
    else:
        gm.Store(path).revision()
        gm.Store(path).import_table(pd.DataFrame({"network": ["n"], "batch_size": [8],
                                                  "time_s": [1.0]}))
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA user_version = 999")
    shell.user_ns.pop("trained", None)
    with pytest.raises(UsageError):
        shell.run_cell_magic("profile_training", f"--store {path}", "trained = True\n" + LOOP)
    assert "trained" not in shell.user_ns


@pytest.mark.parametrize("line, message", [
    ("--epochs nan", "finite number > 0"),
    ("--epochs inf", "finite number > 0"),
    ("--total-iterations 0", "finite number > 0"),
    ("--epochs 2 --total-iterations 100", "not both"),
])
def test_profile_option_errors(shell, line, message):
    with pytest.raises(UsageError, match=message):
        shell.run_cell_magic("profile_training", line, LOOP)


@pytest.mark.parametrize("value", ["0", "-2", "2.5", "soon", "Auto-ish"])
def test_stop_after_that_is_no_count_or_auto_is_a_usage_error(shell, value):
    shell.user_ns.pop("trained", None)
    with pytest.raises(UsageError, match=r"--stop-after: .*whole number of iterations > 0 or "
                                         r"'auto'"):
        shell.run_cell_magic("profile_training", f"--stop-after {value}",
                             "trained = True\n" + LOOP)
    assert "trained" not in shell.user_ns  # refused before the cell ran


def test_stop_after_ends_the_loop_and_the_cell_does_not_fail(shell, capsys, _isolated_store):
    from torch.optim import optimizer as optim_mod

    result = shell.run_cell("%%profile_training --stop-after 5 --total-iterations 500\n" + LOOP)
    out = capsys.readouterr()
    assert result.success and result.error_in_exec is None
    assert "Traceback" not in out.out + out.err and "StopTraining" not in out.out + out.err
    assert "· 5 it (1 warm-up) stopped early" in out.out
    assert shell.user_ns["step"] == 4  # the loop's fifth step was its last
    assert "final_loss" not in shell.user_ns  # the code after the loop did not run
    assert not optim_mod._global_optimizer_post_hooks
    assert shell.custom_exceptions == ()  # IPython's handler given back
    runs = gm.Store(_isolated_store).runs()
    assert runs["status"].tolist() == ["ok"] and runs["stopped_by"].tolist() == ["count"]
    assert runs["recorded_iterations"].tolist() == [5]
    assert runs["total_iterations"].tolist() == [500]


def test_a_cell_that_fails_before_its_stop_still_fails(shell, capsys, _isolated_store):
    cell = LOOP.replace("    opt.step()\n", "    opt.step()\n    if step == 2:\n"
                        "        raise ValueError('diverged')\n")
    result = shell.run_cell("%%profile_training --stop-after 5\n" + cell)
    assert not result.success and isinstance(result.error_in_exec, ValueError)
    assert "diverged" in capsys.readouterr().out
    assert gm.Store(_isolated_store).runs()["status"].tolist() == ["failed"]


def test_help_has_usage_and_options(shell):
    doc = shell.find_cell_magic("profile_training").__doc__
    assert "--warmup" in doc and "--phases" in doc and "-v VAR" in doc
    flat = " ".join(doc.split())  # argparse wraps the help
    assert "--stop-after N|auto" in flat and "code after the loop in this cell does not" in flat
    # One usage, the one magic_arguments writes from the declared options.
    assert doc.count("%profile_training [") == 1 and "Usage::" not in doc


def test_predict_time_help_shows_one_usage(shell):
    doc = shell.find_line_magic("predict_time").__doc__
    assert doc.count("%predict_time [") == 1 and "Usage::" not in doc
    assert "--remaining" in doc and "--batch-size" in doc and "--store" in doc


def test_unload_removes_the_magics():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpuperf_magics")
    shell.run_line_magic("unload_ext", "gpuperf_magics")
    assert shell.find_cell_magic("profile_training") is None
    assert not any(type(c).__name__ == "GpuPerf" for c in shell.configurables)
    shell.run_line_magic("load_ext", "gpuperf_magics")
    assert shell.find_cell_magic("profile_training") is not None


def test_quoted_option_values(shell, tmp_path):
    store = tmp_path / "quoted store.sqlite"
    run = shell.run_cell_magic(
        "profile_training", f'-q -o --store "{store}" --tag note="two words" -n "my net"', LOOP
    )
    assert run.tags == {"note": "two words"} and run.network == "my net"
    assert gm.Store(store).runs().iloc[0]["network"] == "my net"


def test_memory_store_is_a_usage_error_before_the_cell_runs(shell):
    shell.user_ns.pop("final_loss", None)
    with pytest.raises(UsageError, match="memory"):
        shell.run_cell_magic("profile_training", "--store :memory:", LOOP)
    assert "final_loss" not in shell.user_ns


def test_syntax_error_says_the_cell_did_not_run(shell, capsys, _isolated_store):
    result = shell.run_cell("%%profile_training\nfor i in range(3)\n    pass\n")
    out = capsys.readouterr().out
    assert not result.success
    assert "did not run (SyntaxError)" in out
    assert gm.Store(_isolated_store).runs().empty


def test_failure_reaches_a_caller_without_a_cell(shell, capsys):
    with pytest.raises(ZeroDivisionError):
        shell.run_cell_magic("profile_training", "-q", LOOP + "1 / 0\n")


def test_caught_forward_error_does_not_break_discovery(shell, capsys):
    cell = "try:\n    model(torch.randn(4, 7))\nexcept RuntimeError:\n    pass\n" + LOOP
    run = shell.run_cell_magic("profile_training", "-q -o", cell)
    assert run.batch_size == 16 and run.network == "Sequential-2.76K"
    assert run.architecture.get("arch_params")


def test_model_left_in_eval_mode_is_still_measured_and_noted(shell):
    cell = "model.eval()\n" + LOOP + "_ = model.train()\n"
    run = shell.run_cell_magic("profile_training", "-q -o", cell)
    assert run.batch_size == 16 and len(run.iterations) == 12
    assert any("eval() mode" in n and "model.train()" in n for n in run.notes)


def test_the_line_fits_a_notebook_and_verbose_gives_the_rest(shell, capsys):
    shell.run_cell_magic("profile_training", "-n mlp", LOOP)
    line, *notes = capsys.readouterr().out.splitlines()
    assert len(line) <= 110 and all(len(n) <= 110 for n in notes)
    assert "samples/s" not in line and "p90" not in line
    assert "12 it (" in line and " warm-up) · " in line
    run = shell.run_cell_magic("profile_training", "-n mlp --verbose -o", LOOP)
    out = capsys.readouterr().out
    assert out == run.details() + "\n"
    assert out.startswith(run.summary_line().splitlines()[0] + "\n")
    assert "throughput" in out and "p90" in out and "CPU" in out

@pytest.mark.parametrize("options", ["", "-w", "--remaining", "--remaining 3 --gpu T4"])
def test_predict_time_names_a_store_that_does_not_exist(shell, tmp_path, options):
    typo = tmp_path / "typo.sqlite"
    with pytest.raises(UsageError, match=rf"^no store at {typo}: the file does not exist") as err:
        shell.run_line_magic("predict_time", f"--store {typo} {options}")
    assert str(err.value).endswith(
        'or name another store with --store PATH or %config GpuPerf.store = "PATH".')
    assert "Store(" not in str(err.value) and "GPUPERF_STORE" not in str(err.value)
    assert not typo.exists()
    # Profiling writes, so it may start a store there.
    shell.run_cell_magic("profile_training", f"-q --store {typo}", LOOP)
    assert len(gm.Store(typo).runs()) == 1


def test_predict_time_without_any_store_yet_says_so(shell, tmp_path, monkeypatch):
    monkeypatch.delenv("GPUPERF_STORE")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    with pytest.raises(UsageError, match=r"\(the default store\).*profile a cell with "
                       "%%profile_training; or") as err:
        shell.run_line_magic("predict_time", "")
    assert "gpuperf import" not in str(err.value) and "Store." not in str(err.value)
    assert not (tmp_path / "xdg").exists()


def test_magic_displays_table_and_flags(ip, filled, capsys):
    ip.run_line_magic("predict_time", f"--store {filled}")
    out = capsys.readouterr().out
    assert "mlp: fitted on 4 run(s)" in out and "measured: median of its runs" in out
    result = ip.run_line_magic(
        "predict_time",
        f'mlp --store {filled} --batch-size 16,48 --epochs 2 --samples 960 '
        f'--gpu "T4,A100 80GB" --gpu-count 1 -q -o -v pred',
    )
    assert capsys.readouterr().out == ""
    assert isinstance(result, Prediction) and ip.user_ns["pred"] is result
    assert list(result.frame["batch_size"]) == [16, 48] * 3
    assert list(result.frame["iterations"])[:2] == [2 * 60, 2 * 20]
    assert set(result.frame["kind"][2:]) == {"transfer"}


@pytest.mark.parametrize(
    "line, message",
    [
        ("--batch-size 32,abc", "--batch-size expects integers"),
        ("--set depth", "feature=finite number"),
        ("nosuchnet", "known networks"),
        ("--gpu 'Voodoo 5'", "Voodoo"),
        ("-v 2x", "variable name"),
        ("--epochs nan", "--epochs must be a finite number > 0"),
        ("--epochs inf", "--epochs must be a finite number > 0"),
        ("--iterations -5", "--iterations must be a finite number > 0"),
        ("--set depth=nan", "finite number"),
        ("--gpu-count 2", r"--gpu-count needs a GPU: .* add --gpu NAME"),
        ("--deadline 2:30", "--deadline goes with -w"),
        ("-w --deadline soon", r"--deadline takes hours \(2.5\) or H:MM"),
        ("-w --batch-size 16,32", "the panel answers for one batch size"),
    ],
)
def test_magic_usage_errors(ip, filled, line, message):
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("predict_time", f"--store {filled} {line}")


def test_magic_help(ip):
    doc = ip.find_line_magic("predict_time").__doc__
    assert "--batch-size" in doc and "--gpu" in doc
    assert doc.count("%predict_time [") == 1  # the usage magic_arguments writes, once

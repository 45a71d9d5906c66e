"""The options of a prediction, declared once: ``%predict_time`` in a real IPython shell and
``gpuperf predict`` through its ``main``, on a real SQLite store."""

from __future__ import annotations

import shlex

import pytest
from IPython.core.error import UsageError

import gpuperf_magics as gm
from gpuperf_magics.prediction import options as prediction_options
from gpuperf_magics.run import IterationRecord, Run
from gpuperf_magics.skins.cli import _parser, main


def _run(batch: int, status: str = "ok", total: int | None = None) -> Run:
    its = [IterationRecord(i, 0.01 + 0.001 * batch, batch, warmup=i == 0) for i in range(12)]
    return Run("cnn", status=status, iterations=its, batch_size=batch, device="cuda",
               gpu="Tesla T4", gpu_count=1,
               hyper={"total_iterations": total} if total else {})


@pytest.fixture
def store(tmp_path):
    st = gm.Store(tmp_path / "runs.sqlite")
    for batch in (16, 32, 64):
        st.save_run(_run(batch))
    st.save_run(_run(32, status="interrupted", total=1000))
    return st


def _flags(parser) -> set[str]:
    return {s for action in parser._actions for s in action.option_strings or [action.dest]}


def test_the_magic_and_the_command_take_the_same_options(ip):
    declared = {s for flags, _ in prediction_options.OPTIONS for s in flags}
    magic = ip.find_line_magic("predict_time").__func__.parser
    command = _parser()._subparsers._group_actions[0].choices["predict"]
    assert declared <= _flags(magic) and declared <= _flags(command)
    # What is not shared is each skin's own: display in the notebook, output and prices here
    # (both print CSV, each to its own output: --csv is declared by each skin).
    assert _flags(magic) - declared == {"--store", "-w", "--widget", "--deadline", "-q",
                                        "--quiet", "-o", "--output", "-v", "--variable",
                                        "--csv"}
    assert _flags(command) - declared == {"-h", "--help", "--store", "--prices", "--csv",
                                          "--deadline"}


@pytest.mark.parametrize("options", [
    "--epochs nan",
    "--epochs 0",
    "--iterations 1.5",
    "--samples inf",
    "--gpu-count two",
    "--batch-size 32,abc",
    "--set depth",
    "--remaining x",
    "--remaining 0",
    "--remaining --epochs 3",
    "cnn --remaining",
    "--remaining --gpu T4,A100",
    "--remaining --suggest",
    "--remaining --suggest-per run",
    "--suggest-per runs",
    "--epochs 1e300 --samples 1e300",
    "--iterations 1e300",
    "--epochs 1e10 --samples 1e10",
    "--precision fp8",
    "--remaining --precision amp",
])
def test_one_mistake_gets_one_message_in_both(ip, store, capsys, options):
    with pytest.raises(UsageError) as caught:
        ip.run_line_magic("predict_time", f"--store {store.path} {options}")
    capsys.readouterr()
    assert main(["predict", *shlex.split(options), "--store", str(store.path)]) == 2
    err = capsys.readouterr().err
    assert err == f"gpuperf predict: error: {caught.value}\n"


@pytest.mark.parametrize(("options", "named"), [
    ("--epochs 1e300 --samples 1e300", "--epochs 1e+300 is more than any training job"),
    ("--epochs 1e10 --samples 1e10", "--epochs 1e+10 × --samples 1e+10 is 1e+20 samples"),
    ("--iterations 1e300", "--iterations 1e+300 is more than any training job"),
])
def test_a_job_too_long_to_count_names_its_option(ip, store, capsys, options, named):
    """Issue 19: 1e300 epochs of 1e300 samples was an OverflowError's traceback."""
    assert main(["predict", *shlex.split(options), "--store", str(store.path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpuperf predict: error: {named}") and "real length" in err
    with pytest.raises(UsageError, match=named.replace("+", r"\+")):
        ip.run_line_magic("predict_time", f"--store {store.path} {options}")
    with pytest.raises(gm.PredictionError, match="epochs 1e\\+300"):
        gm.Job(network="cnn", epochs=1e300, samples=10)


def test_both_read_what_their_users_type_and_the_latest_partial_run(ip, store, capsys):
    # The shell groups words with quotes, so a network name may follow --gpu; a notebook
    # line is typed without them.
    code = main(["predict", "--store", str(store.path), "--batch-size", "16,48",
                 "--gpu", "A100 80GB", "--gpu", "T4", "cnn", "--csv"])
    out = capsys.readouterr().out
    assert code == 0 and "NVIDIA A100-SXM4-80GB" in out
    magic = ip.run_line_magic(
        "predict_time", f"cnn --store {store.path} --batch-size 16, 48 --gpu A100 80GB "
        "--gpu T4 -q -o")
    assert magic.frame.to_csv(index=False) == out
    # --remaining without a run id: the latest interrupted run, in both.
    assert main(["predict", "--remaining", "--store", str(store.path), "--csv"]) == 0
    latest = ip.run_line_magic("predict_time", f"--store {store.path} --remaining -q -o")
    assert latest.run_id == 4 and capsys.readouterr().out.startswith("choice,")


def test_the_parser_builds_one_job(ip, store):
    """What a line says is one Job, the one the Python API takes."""
    from gpuperf_magics import Job

    args = _parser().parse_args(["predict", "cnn", "--batch-size", "16,48", "--epochs", "3",
                                 "--samples", "1000", "--gpu", "T4", "--gpu-count", "2",
                                 "--set", "depth=50", "--precision", "bf16"])
    opts = prediction_options.read(args)
    assert opts.job == Job(network="cnn", batch_sizes=[16, 48], epochs=3, samples=1000,
                           gpus=["T4"], gpu_count=2, settings={"depth": 50}, precision="amp")
    assert opts.job.precision == "fp16"  # bf16 and fp16 autocast run at one tensor rate
    assert not opts.remaining
    remaining = prediction_options.read(_parser().parse_args(
        ["predict", "--remaining", "4", "--gpu", "A100 80GB"]))
    assert remaining.remaining and remaining.run_id == 4
    assert remaining.job == Job(gpus=["A100 80GB"])


@pytest.mark.parametrize(("text", "seconds"), [
    ("2.5", 9000.0), ("2:30", 9000.0), (" 0:05 ", 300.0), ("10", 36000.0), (None, None),
])
def test_a_deadline_reads_as_hours_or_h_mm(text, seconds):
    assert prediction_options.parse_deadline(text) == seconds


@pytest.mark.parametrize("text", ["0", "-1", "2:75", "2:5", "two", "nan", "1:30:00"])
def test_a_deadline_that_is_none_says_how_to_write_one(text):
    with pytest.raises(gm.PredictionError, match=r"--deadline takes hours \(2.5\) or H:MM"):
        prediction_options.parse_deadline(text)


def test_flag_mistakes_name_the_flags_in_both(ip, store, capsys):
    """A job mistake found past the parser (a GPU count on the CPU would be one, a job
    length given twice here) reads in the flags the user typed."""
    options = ["--iterations", "10", "--epochs", "2"]
    with pytest.raises(UsageError, match="either --iterations N or --epochs E"):
        ip.run_line_magic("predict_time", f"--store {store.path} {' '.join(options)}")
    assert main(["predict", *options, "--store", str(store.path)]) == 2
    assert "either --iterations N or --epochs E" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text, expected",
    [("32,64, 128", [32, 64, 128]), ("32 64", [32, 64]), (None, None)],
)
def test_parse_batch_sizes(text, expected):
    assert prediction_options.parse_batch_sizes(text) == expected


def test_unquoted_names_and_lists_read_as_meant(ip, filled):
    result = ip.run_line_magic(
        "predict_time", f"mlp --store {filled} --batch-size 16, 48 --gpu A100 80GB --gpu T4 -q -o")
    frame = result.frame
    assert list(frame["batch_size"]) == [16, 48] * 3
    assert list(dict.fromkeys(frame["gpu"].dropna())) == ["NVIDIA A100-SXM4-80GB", "Tesla T4"]
    spaced = ip.run_line_magic("predict_time", f"mlp --store {filled} --batch-size 16 48 -q -o")
    assert list(spaced.frame["batch_size"]) == [16, 48]


def test_suggest_lists_what_to_profile_next_in_both(ip, store, capsys):
    """``--suggest``: a short ranked list under the answer, the same in the magic and the
    command: powers of two between the measured (16-64) and the asked (512) batch sizes."""
    import re

    assert main(["predict", "cnn", "--store", str(store.path), "--batch-size", "512",
                 "--suggest"]) == 0
    out = capsys.readouterr().out
    lines = re.findall(r"profile batch (\d+) next: ±([\d.]+)% → ±([\d.]+)%, about [\d.]+ (?:s|min)",
                       out)
    assert lines and {int(b) for b, _, _ in lines} <= {128, 256, 512}
    assert all(float(after) < float(before) for _, before, after in lines[:1])
    magic = ip.run_line_magic("predict_time",
                              f"cnn --store {store.path} --batch-size 512 --suggest -q -o")
    listed = [a for a in magic.advice if a.startswith("profile batch")]
    assert [re.match(r"profile batch (\d+)", a).group(1) for a in listed] == [
        b for b, _, _ in lines]
    with pytest.raises(UsageError, match="--suggest and -w"):
        ip.run_line_magic("predict_time", f"cnn --store {store.path} -w --suggest")


def test_suggest_per_run_ranks_by_the_narrowing_alone_in_all_three(ip, store, capsys):
    """``--suggest-per run`` (a budget of runs): the run that narrows the answer most, the
    asked batch itself, where per second the cheap batch 128 comes first; the same in the
    magic, the command and the panel's "measure next" line."""
    import re

    def firsts(argv: list[str]) -> list[str]:
        assert main(["predict", "cnn", "--store", str(store.path), "--batch-size", "2048",
                     *argv]) == 0
        return re.findall(r"profile batch (\d+) next", capsys.readouterr().out)

    per_second, per_run = firsts(["--suggest"]), firsts(["--suggest-per", "run"])
    assert per_second[0] == "128" and per_run == ["2048"]
    assert firsts(["--suggest-per", "second"]) == per_second
    magic = ip.run_line_magic(
        "predict_time", f"cnn --store {store.path} --batch-size 2048 --suggest-per run -q -o")
    assert next(a for a in magic.advice if a.startswith("profile batch")).startswith(
        "profile batch 2048 next: ")
    for per, first in (("run", "2048"), ("second", "128")):
        panel = ip.run_line_magic(
            "predict_time", f"cnn --store {store.path} --batch-size 2048 -w --suggest-per "
            f"{per} -q -o")
        assert panel.measure_next.startswith(f"profile batch {first} next: ")
    with pytest.raises(ValueError, match="suggest_per is 'second'"):
        gm.what_if(store, "cnn", suggest_per="runs")
    from gpuperf_magics.model.suggest import PER

    assert prediction_options.SUGGEST_PER == PER  # the options take what the model ranks by


@pytest.mark.parametrize(("typed", "kept"), [
    ("FP32", "fp32"), ("tf32", "tf32"), (" amp ", "fp16"), ("bfloat16", "fp16"),
    ("mixed", "fp16"), (None, None),
])
def test_a_job_s_precision_is_kept_as_its_class(typed, kept):
    assert gm.Job(precision=typed).precision == kept


@pytest.mark.parametrize("bad", ["fp8", "", 16, "int8"])
def test_a_precision_it_does_not_know_says_which_it_takes(bad):
    with pytest.raises(gm.PredictionError, match=r"precision takes fp32, tf32 or amp"):
        gm.Job(precision=bad)

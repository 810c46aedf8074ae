"""The command line: sub-commands, exit codes (0 ok, 1 failed run, 2 bad input, 130 cancelled),
--json outputs, error messages, and the progress store it records runs in."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tutor import __version__, experiments
from tutor.cli import main
from tutor.cli.learner import NO_TTY_MESSAGE
from tutor.cli.run import parse_sets, parse_value
from tutor.course.catalog import builtin_lessons_dir
from tutor.course.progress import Progress
from tutor.experiments.events import Finished, Started, Step

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parents[1] / "data"
LINT = DATA / "lint"
FIXTURE_LESSON = "fixture-valid"


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- help, version, TUI


def test_help_lists_the_sub_commands(capsys):
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    for name in ("list", "doctor", "run", "lint", "check", "--lessons-dir", "--data-dir", "--device"):
        assert name in out


def test_version(capsys):
    code, out, _ = run_cli(capsys, "--version")
    assert code == 0 and out.strip() == f"gpututor {__version__}"


def test_usage_error_exits_2(capsys):
    code, _, err = run_cli(capsys, "frobnicate")
    assert code == 2 and "invalid choice" in err


def test_no_sub_command_without_a_terminal(capsys):
    code, out, err = run_cli(capsys)  # pytest's stdin is not a TTY
    assert code == 2
    assert NO_TTY_MESSAGE in err and "gpututor list" in err
    assert out == ""


def test_real_process_help_and_no_tty():
    env = {**os.environ, "NO_COLOR": "1"}
    helped = subprocess.run(
        [sys.executable, "-m", "tutor", "--help"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )
    assert helped.returncode == 0 and "doctor" in helped.stdout
    tui = subprocess.run(
        [sys.executable, "-m", "tutor"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert tui.returncode == 2
    assert "needs an interactive terminal" in tui.stderr and "Traceback" not in tui.stderr


def test_help_does_not_import_torch():
    code = (
        "import sys; from tutor.cli import main; rc = main(['--help']); "
        "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.stderr.strip().endswith("NO-TORCH")


# ---------------------------------------------------------------- lint


def test_lint_fixtures_exact_lines_and_exit_2(capsys):
    expected = [
        f"{LINT / line}"
        for line in (LINT / "expected.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    files = len(list(LINT.glob("*.yaml")))
    code, out, err = run_cli(capsys, "lint", str(LINT))
    assert code == 2
    assert out.splitlines() == expected
    assert f"{len(expected)} errors in {files} of {files} files" in err


def test_lint_one_bad_file(capsys):
    path = LINT / "unknown_key.yaml"
    code, out, _ = run_cli(capsys, "lint", str(path))
    assert code == 2
    assert out == f"{path}:6:5: step 'q': unknown key 'promt' (did you mean 'prompt'?)\n"


def test_lint_binary_and_non_utf8(capsys, tmp_path: Path):
    (tmp_path / "a.yaml").write_bytes(b"id: x\x00\x01\x02")
    (tmp_path / "b.yml").write_bytes(b"id: \xff\xfe\n")
    code, out, _ = run_cli(capsys, "lint", str(tmp_path))
    assert code == 2
    assert out.splitlines() == [
        f"{tmp_path / 'a.yaml'}:1:1: binary file: a lesson must be UTF-8 YAML text",
        f"{tmp_path / 'b.yml'}:1:5: not UTF-8 text (byte 0xff): save the lesson file as UTF-8",
    ]


def test_lint_clean_file_exits_0(capsys):
    code, out, err = run_cli(capsys, "lint", str(DATA / "valid.yaml"))
    assert code == 0 and out == ""
    assert "ok: 1 lesson" in err


def test_lint_warns_of_a_default_tolerance_and_still_exits_0(capsys, tmp_path: Path):
    lesson = tmp_path / "count.yaml"
    lesson.write_text(
        "id: count\ntitle: Count\nsteps:\n  - id: q\n    kind: check\n    prompt: How many?\n"
        "    answer:\n      type: number\n      value: 235\n"
    )
    code, out, err = run_cli(capsys, "lint", str(lesson))
    assert code == 0
    assert out.startswith(f"{lesson}:9:14: warning: step 'q': no tolerance given")
    assert "ok: 1 lesson, 1 warning" in err


def test_lint_builtin_lessons_are_clean(capsys):
    assert len(list(builtin_lessons_dir().glob("*.y*ml"))) >= 6, "the built-in lessons are missing"
    code, out, err = run_cli(capsys, "lint", str(builtin_lessons_dir()))
    assert code == 0, out
    assert out == "" and err.startswith("ok: ") and "warning" not in err


def test_lint_duplicate_lesson_ids_across_files(capsys, tmp_path: Path):
    text = (DATA / "valid.yaml").read_text()
    (tmp_path / "one.yaml").write_text(text)
    (tmp_path / "two.yaml").write_text("# a copy\n" + text)
    code, out, _ = run_cli(capsys, "lint", str(tmp_path))
    assert code == 2
    assert (
        out == f"{tmp_path / 'two.yaml'}:2:5: duplicate lesson id 'fixture-valid' (also in {tmp_path / 'one.yaml'})\n"
    )


def test_lint_missing_path_and_empty_directory(capsys, tmp_path: Path):
    missing = tmp_path / "missing.yaml"
    code, out, _ = run_cli(capsys, "lint", str(missing))
    assert code == 2 and out == f"{missing}:1:1: cannot read file: No such file or directory\n"
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_cli(capsys, "lint", str(empty))
    assert code == 2 and "no lesson files" in err


def test_lint_json_gives_each_issue_with_its_fix_then_a_summary(capsys, tmp_path: Path):
    count = tmp_path / "count.yaml"
    count.write_text(
        "id: count\ntitle: Count\nsteps:\n  - id: q\n    kind: check\n    prompt: How many?\n"
        "    answer:\n      type: number\n      value: 235\n"
    )
    misspelt = LINT / "unknown_key.yaml"
    code, out, err = run_cli(capsys, "lint", "--json", str(misspelt), str(count))
    assert code == 2
    *issues, summary = json_lines(out)
    issues = sorted(issues, key=lambda i: i["path"] != str(misspelt))  # the error, then the warning
    assert issues[0] == {
        "path": str(misspelt),
        "line": 6,
        "column": 5,
        "severity": "error",
        "message": "step 'q': unknown key 'promt' (did you mean 'prompt'?)",
        "fix": "prompt",
    }
    assert issues[1]["severity"] == "warning" and issues[1]["fix"] is None and issues[1]["line"] == 9
    assert summary == {"errors": 1, "warnings": 1, "files": 2, "files_with_errors": 1, "lessons_ok": 1}
    assert "lint: 1 error in 1 of 2 files, 1 warning" in err


def test_lint_a_pack_whose_experiments_do_not_import_is_one_error_at_its_line(capsys, tmp_path: Path):
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "experiments.py").write_text(
        "from tutor.experiments import Experiment\n\nimport no_such_module_here\nEXPERIMENTS = []\n", encoding="utf-8"
    )
    (pack / "lesson.yaml").write_text(
        "id: pack-lesson\ntitle: Pack lesson\nsteps:\n  - {id: r, kind: run, experiment: my-exp}\n", encoding="utf-8"
    )
    code, out, err = run_cli(capsys, "lint", str(pack))
    assert code == 2
    # not also the lesson's "unknown experiment 'my-exp'": the pack that would define it did not load
    assert out == f"{pack / 'experiments.py'}:3:1: ModuleNotFoundError: No module named 'no_such_module_here'\n"
    assert "lint: 1 error in 1 of 2 files" in err


def test_lint_in_a_real_process():
    path = LINT / "empty.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "tutor", "lint", str(path)], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.returncode == 2
    assert done.stdout == f"{path}:1:1: empty file: a lesson needs id, title and steps\n"


# ---------------------------------------------------------------- list


def test_list_json_with_progress_and_broken_files(capsys, tmp_path: Path):
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    (lessons / "valid.yaml").write_text((DATA / "valid.yaml").read_text())
    (lessons / "broken.yaml").write_text((LINT / "missing_keys.yaml").read_text())
    with Progress() as p:
        p.complete_step(FIXTURE_LESSON, "intro")
        p.complete_step(FIXTURE_LESSON, "guess")
        p.complete_step(FIXTURE_LESSON, "no-longer-in-the-lesson")
        p.set_position(FIXTURE_LESSON, "underflow")
    code, out, _ = run_cli(capsys, "list", "--lessons-dir", str(lessons), "--json")
    assert code == 0
    report = json.loads(out)
    mine = next(x for x in report["lessons"] if x["id"] == FIXTURE_LESSON)
    assert (mine["steps"], mine["done"], mine["position"]) == (5, 2, "underflow")
    assert mine["title"] == "A valid fixture lesson"
    [broken] = report["broken"]
    assert broken["path"].endswith("broken.yaml")
    assert {"line": 1, "col": 1, "message": "missing required key 'title'"} in broken["errors"]


def test_list_human(capsys):
    code, out, _ = run_cli(capsys, "--lessons-dir", str(DATA), "list")
    assert code == 0
    assert FIXTURE_LESSON in out and "0/5" in out
    assert "\x1b[" not in out  # not a terminal: plain text


def test_list_says_where_each_lesson_came_from(capsys, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # room for the whole path
    mine = tmp_path / "my-lessons"
    mine.mkdir()
    (mine / "valid.yaml").write_text((DATA / "valid.yaml").read_text())
    code, out, _ = run_cli(capsys, "--lessons-dir", str(mine), "list")
    assert code == 0
    assert f"from {mine.resolve()}" in out
    assert "Lessons without a “from” line are the built-in ones." in out


def test_list_shows_a_title_with_brackets_as_written(capsys, tmp_path: Path):
    """Lesson text is not Rich markup: "[/]" used to crash `list`, "[link=...]" made a link."""
    (tmp_path / "l.yaml").write_text(
        'id: brackets\ntitle: "Big [b]batch[/] [link=x]y"\nsteps:\n  - {id: r, kind: read, body: text}\n'
    )
    code, out, err = run_cli(capsys, "--lessons-dir", str(tmp_path), "list")
    assert code == 0, err
    assert "Big [b]batch[/] [link=x]y" in out


def test_list_unknown_lessons_dir_is_bad_input(capsys, tmp_path: Path):
    code, _, err = run_cli(capsys, "list", "--lessons-dir", str(tmp_path / "nope"))
    assert code == 2 and "no such directory" in err


# ---------------------------------------------------------------- doctor


def test_doctor_json(capsys):
    code, out, _ = run_cli(capsys, "doctor", "--json")
    assert code == 0
    report = json.loads(out)
    import torch

    assert report["torch"] == torch.__version__
    kinds = [d["kind"] for d in report["devices"]]
    assert kinds[-1] == "cpu"
    assert ("cuda" in kinds) == torch.cuda.is_available()
    assert report["selected_device"] == report["devices"][0]["torch_device"]
    assert set(report["tf32"]) == {"matmul_allow_tf32", "cudnn_allow_tf32", "float32_matmul_precision"}
    assert report["paths"]["home"] == os.environ["GPUTUTOR_HOME"]
    assert report["paths"]["progress_db"].endswith("progress.db")
    assert report["data"]["dir"] == str(Path(os.environ.get("GPUTUTOR_DATA_DIR", report["data"]["dir"])))
    if os.environ.get("GPUTUTOR_DATA_DIR"):
        assert report["data"]["mnist_present"] is True


def test_doctor_human_and_bad_device(capsys):
    code, out, err = run_cli(capsys, "doctor", "--device", "cuda:99")
    assert code == 2
    assert "devices" in out and "paths" in out
    assert "cuda:99" in err


@pytest.fixture
def peak_cache(tmp_path: Path, monkeypatch):
    """doctor's peaks in a file of this test's, never the user's cache."""
    from tutor.measurement import peak

    path = tmp_path / "cache" / "peaks.json"
    monkeypatch.setattr(peak, "cache_file", lambda: path)
    return path


def test_doctor_says_the_peak_is_not_measured_yet_and_how_without_measuring(capsys, peak_cache, monkeypatch):
    from tutor.measurement import peak

    monkeypatch.setattr(peak, "sweep", lambda *a, **k: pytest.fail("plain doctor must not measure"))
    code, out, _ = run_cli(capsys, "doctor", "--json")
    assert code == 0
    report = json.loads(out)["peak"]
    assert report["entries"] == [] and report["not_measured"][0] == "float32"
    assert report["measure_command"] == "gpututor doctor --peak" and report["cache_file"] == str(peak_cache)
    code, out, _ = run_cli(capsys, "doctor")
    assert code == 0
    assert "measured peak" in out and "float32: not measured yet" in out and "gpututor doctor --peak" in out
    assert not peak_cache.exists()


def test_doctor_peak_measures_caches_and_plain_doctor_shows_it(capsys, peak_cache, monkeypatch):
    import torch

    from tutor.measurement import peak

    monkeypatch.setitem(peak.SIZES, "cpu", (64, 128))  # the behaviour, not the full sweep's seconds
    monkeypatch.setitem(peak.BUDGET_S, "cpu", 600.0)  # both sizes, however busy the machine
    code, out, _ = run_cli(capsys, "doctor", "--device", "cpu", "--peak", "--json")
    assert code == 0
    report = json.loads(out)["peak"]
    assert report["measured_now"] and report["measured_now"][0] == "float32" and report["not_measured"] == []
    f32 = next(e for e in report["entries"] if e["dtype"] == "float32")
    assert f32["tflops"] > 0 and f32["sizes"] == [64, 128] and f32["stale"] is None
    assert f32["threads"] == report["threads"] == torch.get_num_threads()  # as this process trains
    assert f32["torch"] == torch.__version__ and f32["measured_on"] and peak_cache.exists()

    monkeypatch.setattr(peak, "sweep", lambda *a, **k: pytest.fail("plain doctor must not measure"))
    code, out, _ = run_cli(capsys, "doctor", "--device", "cpu")
    assert code == 0
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("float32:"))
    assert "TFLOP/s" in line and f32["measured_on"] in line and torch.__version__ in line
    assert "64..128" in out and "thread" in out
    helped = subprocess.run([sys.executable, "-m", "tutor", "doctor", "--help"], capture_output=True, text=True)
    assert "--peak" in helped.stdout


def test_data_dir_must_exist(capsys, tmp_path: Path):
    code, _, err = run_cli(capsys, "--data-dir", str(tmp_path / "nope"), "doctor")
    assert code == 2 and "no such directory" in err


def test_data_dir_is_passed_on(capsys, tmp_path: Path):
    code, out, _ = run_cli(capsys, "doctor", "--json", "--data-dir", str(tmp_path))
    assert code == 0
    data = json.loads(out)["data"]
    assert data["dir"] == str(tmp_path.resolve()) and data["mnist_present"] is False


# ---------------------------------------------------------------- run: bad input


def test_parse_value_is_yaml_1_2_scalars():
    assert parse_value("3") == 3 and isinstance(parse_value("3"), int)
    assert parse_value("1e-3") == 0.001 and parse_value("0.5") == 0.5
    assert parse_value("true") is True and parse_value("False") is False
    assert parse_value("null") is None and parse_value("~") is None and parse_value("") is None
    assert parse_value("off") == "off" and parse_value("yes") == "yes"  # YAML 1.1 would say bools
    assert parse_value("'3'") == "3" and parse_value("bf16") == "bf16"
    assert parse_value(".inf") == math.inf and math.isnan(parse_value(".nan"))
    assert parse_sets(["epochs=2", "train-samples=512", "checkpoint=/tmp/a=b.pt"]) == {
        "epochs": 2,
        "train_samples": 512,
        "checkpoint": "/tmp/a=b.pt",
    }


def test_run_unknown_experiment_suggests(capsys):
    code, out, err = run_cli(capsys, "run", "trian")
    assert code == 2 and out == ""
    assert "unknown experiment 'trian' (did you mean 'train'?)" in err
    for name in experiments.REGISTRY:
        assert name in err


def test_run_unknown_param_names_the_allowed_keys(capsys):
    code, _, err = run_cli(capsys, "run", "train", "--set", "epoch=1")
    assert code == 2
    assert "train has no parameter 'epoch' (did you mean 'epochs'?)" in err
    assert "batch_size" in err and "train_samples" in err


def test_run_bad_value_json(capsys):
    code, out, _err = run_cli(capsys, "run", "train", "--set", "amp=fp8", "--json")
    assert code == 2
    [line] = json_lines(out)
    assert line["event"] == "error"
    assert "'amp'" in line["message"] and "'fp16'" in line["message"] and "fp8" in line["message"]


def test_run_values_that_conflict_name_both(capsys, tmp_path: Path):
    code, _, err = run_cli(capsys, "run", "grad-accum", "--set", "batch_size=100", "--set", "micro_batches=3")
    assert code == 2
    assert "bad values: batch_size (100) must be a multiple of micro_batches (3)" in err
    assert "'?'" not in err and "Value error" not in err
    lesson = tmp_path / "acc.yaml"
    lesson.write_text(
        "id: acc\ntitle: A\nsteps:\n  - id: s\n    kind: run\n    title: T\n"
        "    experiment: grad-accum\n    params: {batch_size: 100, micro_batches: 3}\n"
    )
    code, out, err = run_cli(capsys, "lint", str(lesson))
    assert code == 2
    assert f"{lesson}:8:13: experiment 'grad-accum' params: batch_size (100) must be a multiple" in out + err


def test_run_malformed_set(capsys):
    code, _, err = run_cli(capsys, "run", "train", "--set", "epochs")
    assert code == 2 and "KEY=VALUE" in err


def test_run_device_not_present(capsys):
    for argv in (["run", "fp16-underflow", "--device", "cuda:99"], ["--device", "cuda:99", "run", "fp16-underflow"]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and out == ""
        assert "device 'cuda:99'" in err and "Available:" in err and "cpu" in err
    code, _, err = run_cli(capsys, "run", "fp16-underflow", "--device", "tpu")
    assert code == 2 and "unknown device 'tpu'" in err


def test_run_without_name_lists_experiments(capsys):
    # The list the help promises is a success, on stdout, as `instrument` with no name is.
    code, out, err = run_cli(capsys, "run")
    assert code == 0, err
    assert all(name in out for name in experiments.REGISTRY)
    # and their parameters, as the help promises, with their defaults
    assert "epochs=3 batch_size=64" in out and "micro_batches=4" in out and "train_samples=(unset)" in out


def test_run_without_name_lists_experiments_as_json(capsys):
    code, out, _ = run_cli(capsys, "run", "--json")
    assert code == 0
    listed = json.loads(out)
    assert set(listed) == set(experiments.REGISTRY)
    train = listed["train"]
    assert train["title"] == experiments.get("train").title
    assert train["params"]["epochs"]["default"] == 3 and train["params"]["train_samples"]["default"] is None
    # the metrics a lesson's compare may name, in the unit the screen shows them
    assert train["metrics"]["accuracy"]["unit"] == "%"


def test_run_and_instrument_list_alike(capsys):
    for command in ("run", "instrument"):
        code, out, _ = run_cli(capsys, command, "--json")
        assert code == 0 and isinstance(json.loads(out), dict)


# ---------------------------------------------------------------- run: real experiments


def test_run_fp16_underflow_json(capsys):
    code, out, _ = run_cli(capsys, "run", "fp16-underflow", "--json")
    assert code == 0
    events = json_lines(out)
    assert events[0]["event"] == "started"
    assert events[-1]["event"] == "finished"
    assert [e["event"] for e in events].count("finished") == 1
    metrics = events[-1]["metrics"]
    assert metrics["gradient_fp16"] == 0.0 and metrics["flushed_to_zero"] is True
    assert metrics["gradient_fp32"] > 0 and metrics["gradient_scaled_fp16"] > 0
    with Progress() as p:
        run = p.latest_run(experiment="fp16-underflow")
    assert run is not None and run.status == "finished" and run.metrics == metrics
    assert run.device["kind"] in ("cpu", "cuda", "mps") and run.params["gradient"] == 1e-8


def test_run_train_json_small(capsys):
    code, out, _ = run_cli(
        capsys,
        "run",
        "train",
        "--device",
        "cpu",
        "--set",
        "epochs=1",
        "--set",
        "train_samples=512",
        "--set",
        "test_samples=256",
        "--json",
    )
    assert code == 0
    events = json_lines(out)
    assert events[-1]["event"] == "finished"
    steps = [e for e in events if e["event"] == "step"]
    epochs = [e for e in events if e["event"] == "epoch"]
    assert steps and len(epochs) == 1
    assert all(math.isfinite(s["loss"]) for s in steps)
    metrics = events[-1]["metrics"]
    assert 0.0 <= metrics["accuracy"] <= 1.0 and metrics["device"] == "cpu"
    with Progress() as p:
        run = p.latest_run(experiment="train")
    assert run.params["train_samples"] == 512 and run.params["epochs"] == 1
    assert run.device["kind"] == "cpu" and run.metrics["steps"] == metrics["steps"]


def test_run_human_output(capsys):
    code, out, err = run_cli(capsys, "run", "fp16-underflow", "--set", "gradient=1e-9")
    assert code == 0, err
    assert "fp16-underflow on" in out and "measured (run took" in out
    assert "\x1b[" not in out


def test_run_results_table_shows_labels_and_units_not_metric_names(capsys):
    """Was: `flushed_to_zero True`, `fp16_smallest_subnormal 5.96e-08`: the registry's names."""
    code, out, err = run_cli(capsys, "run", "fp16-underflow", "--set", "gradient=1e-9")
    assert code == 0, err
    table = out[out.index("measured (run took") :]
    assert re.search(r"float16 lost the gradient\s+│ yes", table) and re.search(r"loss scale\s+│ 65,536", table)
    for name in experiments.get("fp16-underflow").metrics:
        assert "_" not in name or name not in table, name
    assert "True" not in table and "None" not in table
    assert "gpututor run fp16-underflow --json" in table  # where the names are, for a lesson's compare:


# ---------------------------------------------------------------- run: failures, cancel


def _fake_experiment(monkeypatch, body):
    """Replace fp16-underflow's generator with `body(params, device)` for this test."""
    monkeypatch.setattr(experiments.Experiment, "load", lambda self: body)


def test_run_failure_exits_1_and_is_recorded(capsys, monkeypatch):
    def failing(params, dev):
        yield Started("fp16-underflow", dev.torch_device, dev.name, "none")
        yield Step(1, 10, 2.3, 0.1, 100.0)
        raise RuntimeError("Expected all tensors to be on the same device")

    _fake_experiment(monkeypatch, failing)
    code, out, err = run_cli(capsys, "run", "fp16-underflow", "--json")
    assert code == 1
    events = json_lines(out)
    assert events[-1]["event"] == "error"
    assert "RuntimeError: Expected all tensors to be on the same device" in events[-1]["message"]
    assert "Traceback" not in err
    with Progress() as p:
        run = p.latest_run(experiment="fp16-underflow", status="failed")
    assert run is not None and "same device" in run.error


def test_run_without_finished_event_is_a_failure(capsys, monkeypatch):
    def silent(params, dev):
        yield Started("fp16-underflow", dev.torch_device, dev.name, "none")

    _fake_experiment(monkeypatch, silent)
    code, _, err = run_cli(capsys, "run", "fp16-underflow")
    assert code == 1 and "without reporting its results" in err


@pytest.mark.skipif(os.name != "posix", reason="SIGINT to a child process")
def test_run_ctrl_c_is_clean():
    # A real run of a real experiment, interrupted the way a terminal's ctrl-c does: SIGINT.
    import signal

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tutor",
            "run",
            "train",
            "--device",
            "cpu",
            "--json",
            "--set",
            "epochs=100",
            "--set",
            "train_samples=6400",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        for line in proc.stdout:  # training has started: its first step is on screen
            if json.loads(line)["event"] == "step":
                break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert json_lines(out)[-1]["event"] == "cancelled"
    assert "cancelled" in err and "Traceback" not in err


@pytest.mark.skipif(os.name != "posix", reason="SIGINT")
@pytest.mark.parametrize("during", ["device", "experiment"])
def test_ctrl_c_while_torch_imports_lets_the_import_finish_then_cancels(capsys, monkeypatch, during):
    """A ctrl-c inside `import torch` could leave numpy half made (the run then fell back to
    synthetic digits, or trained on as if nothing was pressed): it is held until the imports
    are done, then the run is cancelled before any training."""
    import signal

    from tutor.experiments import devices

    finished: list[str] = []
    real_resolve, real_load = devices.resolve, experiments.Experiment.load

    def pressed_while(real, name):
        def importing(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGINT)
            finished.append(name)  # not reached if the interrupt lands here
            return real(*args, **kwargs)

        return importing

    if during == "device":
        monkeypatch.setattr(devices, "resolve", pressed_while(real_resolve, during))
    else:
        monkeypatch.setattr(experiments.Experiment, "load", pressed_while(real_load, during))
    code, out, err = run_cli(capsys, "run", "fp16-underflow", "--json")
    assert finished == [during]
    assert code == 130 and json_lines(out)[-1]["event"] == "cancelled" and "Traceback" not in err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handed back


def test_unexpected_errors_are_one_line_unless_debugging(capsys, monkeypatch):
    import tutor.cli.learner as learner

    def broken(args, ctx):
        raise ValueError("something internal\nsecond line")

    monkeypatch.setattr(learner, "cmd_list", broken)
    code, out, err = run_cli(capsys, "list")
    assert code == 1 and out == ""
    assert err.splitlines() == [
        "gpututor: unexpected error: ValueError: something internal",
        "run with GPUTUTOR_DEBUG=1 for details",
    ]
    monkeypatch.setenv("GPUTUTOR_DEBUG", "1")
    code, _, err = run_cli(capsys, "list")
    assert code == 1 and "Traceback" in err


# ---------------------------------------------------------------- check


def test_check_json_right_and_wrong(capsys):
    base = ("--lessons-dir", str(DATA), "check", FIXTURE_LESSON, "why-scale", "--json", "--answer")
    code, out, _ = run_cli(capsys, *base, "small gradients underflow in float16")
    assert code == 0
    verdict = json.loads(out)
    assert set(verdict) == {"correct", "feedback", "missing", "matched_misconception", "score", "judged"}
    assert verdict["correct"] is True
    code, out, _ = run_cli(capsys, *base, "it makes the model bigger")
    assert code == 0
    verdict = json.loads(out)
    assert verdict["correct"] is False and verdict["missing"] == ["underflow"]


def test_check_uses_the_latest_run_of_the_verify_experiment(capsys):
    base = ("--lessons-dir", str(DATA), "check", FIXTURE_LESSON, "smallest", "--json", "--answer", "6e-8")
    code, out, _ = run_cli(capsys, *base)
    assert code == 0
    before = json.loads(out)
    assert before["correct"] is False and before["missing"] == ["fp16_smallest_subnormal"]
    assert before["judged"] is False  # nothing measured yet to compare with

    assert run_cli(capsys, "run", "fp16-underflow", "--json")[0] == 0
    code, out, _ = run_cli(capsys, *base)
    assert code == 0 and json.loads(out)["correct"] is True  # 2**-24 = 5.96e-8, within 5 %
    code, out, _ = run_cli(capsys, *base[:-1], "1e-4")
    assert json.loads(out)["correct"] is False


def test_a_prediction_checked_before_its_run_is_not_graded_and_says_which_run(capsys):
    base = ("--lessons-dir", str(DATA), "check", FIXTURE_LESSON, "guess", "--answer")
    code, out, _ = run_cli(capsys, *base, "yes", "--json")
    before = json.loads(out)
    assert code == 0 and before["judged"] is False and before["correct"] is False
    assert (
        "no run of it on this machine yet: run step 'underflow' first (`gpututor run fp16-underflow`)"
        in before["feedback"]
    )
    code, out, _ = run_cli(capsys, *base, "no")
    assert code == 0 and out.startswith("not graded")  # neither option is wrong before anything is measured
    assert run_cli(capsys, "run", "fp16-underflow", "--set", "gradient=1e-8", "--json")[0] == 0
    code, out, _ = run_cli(capsys, *base, "yes", "--json")
    after = json.loads(out)
    assert after["judged"] is True and after["correct"] is True  # flushed_to_zero: float16 flushes 1e-8


@pytest.mark.parametrize("answer", ["", "   "])
def test_an_empty_answer_is_bad_input(capsys, answer):
    code, out, err = run_cli(
        capsys, "--lessons-dir", str(DATA), "check", FIXTURE_LESSON, "why-scale", "--answer", answer
    )
    assert code == 2 and out == "" and "the answer is empty" in err


def test_check_human(capsys):
    code, out, _ = run_cli(
        capsys, "--lessons-dir", str(DATA), "check", FIXTURE_LESSON, "why-scale", "--answer", "it is faster"
    )
    assert code == 0
    assert "not yet" in out and "float16" in out  # the rubric's `missing` feedback


def test_check_unknown_lesson_or_step(capsys):
    code, out, err = run_cli(
        capsys, "--lessons-dir", str(DATA), "check", "fixture-vaild", "why-scale", "--answer", "x", "--json"
    )
    assert code == 2
    assert "did you mean 'fixture-valid'" in json.loads(out)["error"] and FIXTURE_LESSON in err
    code, _, err = run_cli(capsys, "--lessons-dir", str(DATA), "check", FIXTURE_LESSON, "why-scal", "--answer", "x")
    assert code == 2 and "did you mean 'why-scale'" in err and "guess" in err
    code, _, err = run_cli(capsys, "--lessons-dir", str(DATA), "check", FIXTURE_LESSON, "intro", "--answer", "x")
    assert code == 2 and "is a read step" in err


def test_check_builtin_lesson_check_3(capsys):
    from tutor.course.catalog import discover

    discover().get("gpu-training").lesson.step("check-3")  # a renamed check fails here, never skips
    good = (
        "float16 cannot represent very small gradients: they underflow to zero. Scaling the loss "
        "scales every gradient into float16's range, and they are unscaled before optimizer.step()."
    )
    code, out, _ = run_cli(capsys, "check", "gpu-training", "check-3", "--answer", good, "--json")
    assert code == 0 and json.loads(out)["correct"] is True
    code, out, _ = run_cli(capsys, "check", "gpu-training", "check-3", "--answer", "to make it faster", "--json")
    assert code == 0 and json.loads(out)["correct"] is False


def test_progress_without_a_loss_shows_neither_nan_nor_a_rate(capsys):
    """sync-timing reports progress (repeats) that has no loss and no samples: the line says neither."""
    code, out, _ = run_cli(
        capsys, "run", "sync-timing", "--device", "cpu", "--set", "size=64", "--set", "calls=2", "--set", "repeats=2"
    )
    assert code == 0
    steps = [line for line in out.splitlines() if line.startswith("[repeat] step")]
    assert steps and not any("nan" in line or "samples/s" in line for line in steps)


def test_run_output_shows_values_verbatim_not_as_markup(capsys, monkeypatch):
    """A message such as torch's "[enforce fail at alloc_cpu.cpp:127] ..." is a value: the
    metrics table and result tables print its brackets instead of swallowing them as markup."""
    from tutor import experiments
    from tutor.experiments.events import Started, Table

    def fake_start(name, values=None, device=None):
        yield Started(name, "cpu", "CPU", "none")
        yield Table("[bold]t[/bold]", ["what"], [["[enforce fail at x.cpp:1] err"]])
        yield Finished({"error_message": "[enforce fail at alloc_cpu.cpp:127] err == 0"})

    monkeypatch.setattr(experiments, "start", fake_start)
    code, out, _ = run_cli(capsys, "run", "device-basics", "--device", "cpu")
    assert code == 0
    assert "[enforce fail at x.cpp:1]" in out and "[bold]t[/bold]" in out
    assert "[enforce fail at alloc_cpu.cpp:127]" in out.replace("\n", "")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
@pytest.mark.parametrize("command", [("schema",), ("export",)])
def test_output_to_a_pipe_is_written_through_not_replaced(capsys, tmp_path, command):
    """`-o /dev/stdout`, `-o >(cmd)`: the pipe gets the text and stays a pipe (a rename over it had
    replaced it, and a device such as /dev/full, with a regular file)."""
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text(encoding="utf-8")), daemon=True)
    reader.start()
    code, _, err = run_cli(capsys, *command, "-o", str(fifo))
    reader.join(timeout=30)
    assert code == 0, err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert json.loads(got[0])  # the whole document came through the pipe


def test_a_checkpoint_path_that_cannot_be_written_is_bad_input_and_records_no_run(capsys, tmp_path):
    code, out, err = run_cli(capsys, "run", "train", "--set", f"checkpoint={tmp_path}", "--json")
    assert code == 2 and "is a folder, not a file" in json_lines(out)[-1]["message"] and "ValueError" not in err
    (tmp_path / "a-file").write_text("x")
    code, _, err = run_cli(capsys, "run", "train", "--set", f"checkpoint={tmp_path / 'a-file' / 'ck.pt'}")
    assert code == 2 and "is a file, not a folder" in err
    with Progress() as progress:
        assert progress.latest_run(experiment="train") is None


@pytest.mark.skipif(os.name != "posix", reason="a closed pipe")
@pytest.mark.parametrize("json_mode", [False, True])
def test_a_reader_that_goes_away_stops_the_run_quietly_with_141(json_mode):
    """`gpututor run ... | head -1`: the same quiet exit, for people's lines (Rich's) and for --json."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tutor",
            "run",
            "train",
            "--device",
            "cpu",
            "--set",
            "epochs=50",
            "--set",
            "train_samples=640",
            *(["--json"] if json_mode else []),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stdout.readline()  # the first line, then the reader leaves
        proc.stdout.close()
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 141, err.decode()[-2000:]
    assert b"Traceback" not in err


def test_new_with_a_built_in_id_says_it_would_replace_that_lesson(capsys, tmp_path):
    code, _, err = run_cli(capsys, "new", "gpu-training", "-o", str(tmp_path / "gt.yaml"))
    assert code == 0 and "'gpu-training' is a built-in lesson's id" in err
    code, _, err = run_cli(capsys, "new", "my-own", "-o", str(tmp_path / "mine.yaml"))
    assert code == 0 and "built-in" not in err


def test_exercise_file_that_is_a_folder_says_so(capsys, tmp_path):
    code, _, err = run_cli(capsys, "exercise", "gpu-training-practice", "ex2-checkpoint", "--file", str(tmp_path))
    assert code == 2 and "is a folder; give the Python file to grade" in err


def test_doctor_takes_one_measurement_at_a_time(capsys):
    code, _, err = run_cli(capsys, "doctor", "--peak", "--selftest")
    assert code == 2 and "not allowed with" in err


def test_a_device_typo_is_bad_input_for_every_command(capsys):
    code, out, err = run_cli(capsys, "--device", "nonsense", "list")
    assert code == 2 and out == "" and "unknown device 'nonsense'" in err

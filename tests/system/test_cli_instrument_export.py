"""`gpututor instrument` (an instrument's figures without the TUI) and `gpututor export` (the design
ledger and progress as JSON): outputs, exit codes (0 ok, 2 bad input) and messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tutor.cli import main
from tutor.course.catalog import discover
from tutor.course.progress import Progress
from tutor.instruments import REGISTRY

LESSON = "training-iron-law"


@pytest.fixture
def home(tmp_path: Path, monkeypatch) -> Path:
    path = tmp_path / "home"
    monkeypatch.setenv("GPUTUTOR_HOME", str(path))
    return path


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- instrument


def test_instrument_without_name_lists_both(capsys, home):
    code, out, err = run_cli(capsys, "instrument")
    assert code == 0, err
    assert "memory-ledger" in out and "pipeline" in out
    assert "optimizer: sgd | momentum | adam" in out
    assert "checkpointing: on | off" in out
    assert "outputs: parameters, weights_bytes" in out


def test_instrument_list_as_json(capsys, home):
    code, out, _ = run_cli(capsys, "instrument", "--json")
    assert code == 0
    listed = json.loads(out)
    assert set(listed) == set(REGISTRY)
    ctl = listed["memory-ledger"]["controls"]["optimizer"]
    assert ctl == {"kind": "choice", "options": ["sgd", "momentum", "adam"], "default": "adam"}
    assert set(listed["pipeline"]["outputs"]) == set(REGISTRY["pipeline"].outputs)


def test_instrument_json_is_what_compute_gives(capsys, home):
    code, out, err = run_cli(
        capsys, "instrument", "memory-ledger", "--set", "optimizer=sgd", "--set", "precision=fp16", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    inst = REGISTRY["memory-ledger"]
    reading = inst.compute({"optimizer": "sgd", "precision": "fp16"})
    assert doc["instrument"] == "memory-ledger"
    assert doc["settings"] == inst.settings({"optimizer": "sgd", "precision": "fp16"})
    assert doc["outputs"] == reading.outputs
    assert doc["outputs"]["static_gb"] == 6.0 and doc["outputs"]["bytes_per_param"] == 4
    assert doc["verdict"] == reading.verdict and doc["level"] == reading.level
    assert doc["math"] == list(reading.math) and doc["notes"] == list(reading.notes)
    assert doc["reference"] == list(reading.reference)
    assert any("master copy" in n for n in doc["notes"])


def test_instrument_zero3_over_8_gpus_json(capsys, home):
    code, out, err = run_cli(
        capsys, "instrument", "memory-ledger", "--set", "parallel=zero3", "--set", "gpus=8", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    inst = REGISTRY["memory-ledger"]
    assert doc["settings"] == {**inst.defaults(), "parallel": "zero3", "gpus": 8}
    assert doc["outputs"] == inst.compute({"parallel": "zero3", "gpus": 8}).outputs
    o = doc["outputs"]
    # GPT-2 XL, FP32, Adam: 16 B x 1.5e9 / 8 per GPU, plus the root unit and one block gathered in FP32
    assert o["static_bytes"] == 3e9 + 112_793_600 * 4
    assert o["gathered_bytes"] == 112_793_600 * 4
    assert o["gpus_used"] == 8 and o["global_batch"] == 32
    assert "per GPU" in doc["verdict"]
    assert any(line.startswith("adam        = N x 8 B / 8 = 1.50 GB  (ZeRO-3:") for line in doc["math"])
    assert any("ZeRO paper" in ref for ref in doc["reference"])
    # the human form names both new controls
    code, out, err = run_cli(capsys, "instrument", "memory-ledger", "--set", "parallel=zero3", "--set", "gpus=8")
    assert code == 0, err
    assert "parallel=ZeRO-3 / FSDP FULL_SHARD" in out and "gpus=8" in out and "per GPU" in out
    code, out, err = run_cli(capsys, "instrument", "memory-ledger", "--set", "parallel=fsdp")
    assert code == 2 and "'fsdp' is not one of single, ddp, zero1, zero2, zero3" in err


def test_instrument_pipeline_json(capsys, home):
    code, out, _ = run_cli(capsys, "instrument", "pipeline", "--set", "prefetch=on", "--set", "batch=8", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["settings"]["prefetch"] is True and doc["settings"]["batch"] == 8
    assert doc["outputs"] == REGISTRY["pipeline"].compute({"prefetch": True, "batch": 8}).outputs
    assert doc["outputs"]["data_share"] == 0


def test_instrument_unknown_name_suggests(capsys, home):
    code, out, err = run_cli(capsys, "instrument", "memory-ledgr")
    assert code == 2
    assert "unknown instrument 'memory-ledgr'" in err and "did you mean 'memory-ledger'" in err
    assert "available: memory-ledger, pipeline" in err
    assert out == ""
    code, out, err = run_cli(capsys, "instrument", "pipelin", "--json")
    assert code == 2 and "did you mean 'pipeline'" in json.loads(out)["error"]


def test_instrument_bad_value_names_the_valid_ones(capsys, home):
    code, out, err = run_cli(capsys, "instrument", "memory-ledger", "--set", "optimizer=adamw")
    assert code == 2
    assert "'adamw' is not one of sgd, momentum, adam" in err
    assert "Traceback" not in err and out == ""
    code, out, err = run_cli(capsys, "instrument", "pipeline", "--set", "batch=0", "--json")
    assert code == 2 and "outside 1..64" in json.loads(out)["error"]
    code, _, err = run_cli(capsys, "instrument", "pipeline", "--set", "prefetch=maybe")
    assert code == 2 and "expected on or off" in err


def test_instrument_unknown_control(capsys, home):
    code, _, err = run_cli(capsys, "instrument", "memory-ledger", "--set", "optimiser=sgd")
    assert code == 2
    assert "no control 'optimiser'" in err and "optimizer" in err


@pytest.mark.parametrize("bad", ["optimizer", "=sgd", " =sgd"])
def test_instrument_malformed_set(capsys, home, bad):
    code, out, err = run_cli(capsys, "instrument", "memory-ledger", "--set", bad)
    assert code == 2
    assert "--set expects KEY=VALUE" in err and repr(bad) in err
    assert out == ""


def test_instrument_human_output_has_the_verdict(capsys, home):
    code, out, err = run_cli(capsys, "instrument", "memory-ledger", "--set", "budget=laptop")
    assert code == 0, err
    reading = REGISTRY["memory-ledger"].compute({"budget": "laptop"})
    flat = " ".join(out.split())
    assert " ".join(reading.verdict.split()) in flat
    assert "Memory ledger" in out and "optimizer=Adam" in out
    assert "Math peek" not in out
    code, out, _ = run_cli(capsys, "instrument", "memory-ledger", "--math")
    assert code == 0 and "Math peek" in out and "N x 8 B" in out


def test_instrument_mine_uses_the_latest_memory_ledger_run(capsys, home):
    with Progress() as p:
        p.record_run(
            experiment="memory-ledger",
            params={"width": 1024, "layers": 3, "batch_size": 64},
            device={"name": "cpu"},
            metrics={"parameters": 3_150_848, "activation_bytes": 64 * 16384},
            status="finished",
        )
    code, out, err = run_cli(capsys, "instrument", "memory-ledger", "--set", "model=mine", "--set", "batch=8", "--json")
    assert code == 0, err
    o = json.loads(out)["outputs"]
    assert o["parameters"] == 3_150_848
    assert o["activations_bytes"] == 8 * 16384
    assert o["static_bytes"] == 16 * 3_150_848


def test_instrument_mine_without_a_run_is_a_warning_not_an_error(capsys, home):
    code, out, _ = run_cli(capsys, "instrument", "memory-ledger", "--set", "model=mine", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["level"] == "warning" and doc["outputs"]["parameters"] is None


def test_instrument_measured_pipeline_from_the_latest_run(capsys, home):
    metrics = {
        "mfu": 0.01,
        "data_wait_share": 0.5,
        "copy_share": 0.1,
        "forward_share": 0.2,
        "backward_share": 0.15,
        "optimizer_share": 0.05,
        "peak_tflops": 19.5,
        "achieved_tflops": 0.195,
        "model": "mlp",
        "batch_size": 64,
        "dtype": "float32",
        "data_path": "loader",
    }
    with Progress() as p:
        p.record_run(
            experiment="pipeline-breakdown", params={}, device={"name": "Test GPU"}, metrics=metrics, status="finished"
        )
    code, out, err = run_cli(capsys, "instrument", "pipeline", "--set", "profile=measured", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["outputs"]["mfu"] == 0.01 and doc["outputs"]["compute_share"] == pytest.approx(0.4)
    assert "Measured on Test GPU" in doc["verdict"]


# ---------------------------------------------------------------- export


def challenge_moves() -> list[dict]:
    return [
        {"optimizer": "adam", "precision": "fp32", "batch": 4, "checkpointing": False},
        {"optimizer": "sgd", "precision": "fp16", "batch": 1, "checkpointing": True},  # fits
        {"optimizer": "momentum", "precision": "mixed", "batch": 2, "checkpointing": True},
    ]


def record_progress() -> list[dict]:
    """A learner's work on the lesson: two predictions, answers, moves on two instrument steps."""
    inst = REGISTRY["memory-ledger"]
    outputs = []
    with Progress() as p:
        p.lock_prediction(LESSON, "act1-predict", "about 12 GB", None)
        p.lock_prediction(LESSON, "act2-predict", "35", 35.0)
        p.lock_prediction(LESSON, "mfu-predict", "2.5%", 2.5)
        p.record_run(
            experiment="pipeline-breakdown",
            params={},
            device={},
            metrics={"mfu": 0.0123},
            status="finished",
            lesson_id=LESSON,
            step_id="mfu-measure",
        )
        p.record_answer(LESSON, "act1-reflect", "about half of everything", False, "Not every tensor.")
        p.record_answer(LESSON, "act1-reflect", "about half of the activations", True, "Right.")
        p.record_aid(LESSON, "check-trade", "hint")
        p.record_aid(LESSON, "check-trade", "hint")
        p.record_aid(LESSON, "check-trade", "solution")
        p.complete_step(LESSON, "welcome")
        for given in challenge_moves():
            settings = inst.settings({**given, "model": "gpt2-xl", "budget": "laptop"})
            reading = inst.compute(settings)
            p.record_move(LESSON, "challenge", inst.name, settings, reading.outputs)
            outputs.append(reading.outputs)
        pipe = REGISTRY["pipeline"]
        for given in ({}, {"prefetch": True}, {"prefetch": True, "precision": "mixed"}):
            settings = pipe.settings(given)
            p.record_move(LESSON, "pipeline", pipe.name, settings, pipe.compute(settings).outputs)
    return outputs


def test_export_to_a_file_has_the_design_ledger(capsys, home, tmp_path):
    outputs = record_progress()
    target = tmp_path / "ledger.json"
    code, out, err = run_cli(capsys, "export", LESSON, "-o", str(target))
    assert code == 0, err
    assert out == "" and str(target) in err and "1 lessons" in err
    doc = json.loads(target.read_text(encoding="utf-8"))
    assert not (tmp_path / "ledger.json.tmp").exists()
    assert doc["format"] == 1 and doc["gpututor"] and doc["exported_at"]
    assert [lesson["id"] for lesson in doc["lessons"]] == [LESSON]
    record = doc["lessons"][0]
    ledger = record["design_ledger"]
    assert ledger["laptop_fit_achieved"] is True
    least = min(o["total_gb"] for o in outputs)
    assert least == outputs[1]["total_gb"]  # the move that fits
    assert ledger["minimum_memory_gb"] == pytest.approx(least, rel=1e-5)  # float noise tidied away
    assert ledger["minimum_memory_gb"] == float(f"{least:.12g}")
    last = challenge_moves()[-1]
    assert ledger["optimizer"] == last["optimizer"] == "momentum"
    assert ledger["precision"] == "mixed" and ledger["checkpointing"] is True and ledger["batch"] == 2
    pipe = REGISTRY["pipeline"]
    assert ledger["first_mfu_estimate"] == 2.5  # the learner's locked mfu-predict
    assert ledger["modelled_mfu"] == pytest.approx(
        pipe.compute({"prefetch": True, "precision": "mixed"}).outputs["mfu"]
    )
    assert ledger["final_mfu"] == 0.0123  # the latest measured run of the step
    # nothing done on the act 1 ledger step: its entries are null, not missing
    assert ledger["act1_last_optimizer"] is None and ledger["act1_last_precision"] is None

    history = record["instruments"]["challenge"]["history"]
    inst = REGISTRY["memory-ledger"]
    assert [h["settings"] for h in history] == [  # every move, in order
        inst.settings({**m, "model": "gpt2-xl", "budget": "laptop"}) for m in challenge_moves()
    ]
    assert record["instruments"]["challenge"]["goal_reached"] is True
    assert record["predictions"]["act1-predict"]["answer"] == "about 12 GB"
    assert record["predictions"]["act1-predict"]["value"] is None
    assert record["predictions"]["act2-predict"]["value"] == 35.0
    assert record["answers"]["act1-reflect"] == {
        "attempts": 2,
        "correct": True,
        "last_answer": "about half of the activations",
    }
    assert record["answers"]["check-trade"] == {"hints": 2, "solution_shown": True}  # help taken, no answer
    assert record["completed"] == ["welcome"]
    challenge = record["instruments"]["challenge"]
    assert challenge["instrument"] == "memory-ledger" and challenge["moves"] == 3
    assert challenge["goal_reached"] is True
    assert challenge["settings"]["optimizer"] == "momentum" and challenge["outputs"] == outputs[-1]
    assert record["instruments"]["pipeline"]["goal_reached"] is True  # prefetching reached 45% MFU
    assert "ledger" not in record["instruments"]  # no moves there


def test_export_without_moves_has_null_ledger_entries(capsys, home):
    code, out, _ = run_cli(capsys, "export", LESSON)
    assert code == 0
    record = json.loads(out)["lessons"][0]
    assert record["design_ledger"]["laptop_fit_achieved"] is None
    assert record["design_ledger"]["minimum_memory_gb"] is None
    assert record["instruments"] == {} and record["predictions"] == {} and record["answers"] == {}


def test_export_all_lessons_to_stdout(capsys, home):
    record_progress()
    code, out, err = run_cli(capsys, "export")
    assert code == 0, err
    doc = json.loads(out)
    ids = [lesson["id"] for lesson in doc["lessons"]]
    assert ids == [item.lesson.id for item in discover().lessons]
    assert LESSON in ids and "gpu-training" in ids
    mine = next(lesson for lesson in doc["lessons"] if lesson["id"] == LESSON)
    assert mine["design_ledger"]["laptop_fit_achieved"] is True
    other = next(lesson for lesson in doc["lessons"] if lesson["id"] == "gpu-training")
    assert other["design_ledger"] == {} and other["instruments"] == {}


def test_export_after_reset_forgets_the_moves(capsys, home):
    record_progress()
    with Progress() as p:
        assert len(p.moves(LESSON, "challenge")) == 3
        assert p.last_move(LESSON, "challenge").settings["optimizer"] == "momentum"
        p.reset_lesson(LESSON)
        assert p.moves(LESSON, "challenge") == [] and p.last_move(LESSON, "challenge") is None
        assert p.predictions(LESSON) == []
    code, out, _ = run_cli(capsys, "export", LESSON)
    assert code == 0
    assert json.loads(out)["lessons"][0]["design_ledger"]["minimum_memory_gb"] is None


def test_export_unknown_lesson(capsys, home):
    code, out, err = run_cli(capsys, "export", "training-iron-lwa")
    assert code == 2
    assert "unknown lesson 'training-iron-lwa'" in err and "did you mean 'training-iron-law'" in err
    assert out == ""


def test_export_to_an_unwritable_path(capsys, home, tmp_path):
    record_progress()
    target = tmp_path / "no-such-dir" / "ledger.json"
    code, out, err = run_cli(capsys, "export", LESSON, "-o", str(target))
    assert code == 2
    assert "cannot write" in err and str(target.parent.name) in err
    assert "Traceback" not in err and "unexpected error" not in err
    assert not target.exists() and out == ""


def test_export_onto_a_directory_is_bad_input(capsys, home, tmp_path):
    target = tmp_path / "a-directory"
    target.mkdir()
    code, _, err = run_cli(capsys, "export", LESSON, "-o", str(target))
    assert code == 2
    assert "is a directory" in err and "Traceback" not in err
    assert target.is_dir()


def test_export_onto_the_current_directory_is_bad_input(capsys, home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "export", LESSON, "-o", ".")
    assert code == 2 and "is a directory" in err


def test_export_failure_leaves_no_temporary_file(capsys, home, tmp_path, monkeypatch):
    from pathlib import Path

    def refuse(self, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "replace", refuse)
    target = tmp_path / "ledger.json"
    code, _, err = run_cli(capsys, "export", LESSON, "-o", str(target))
    assert code == 2 and "No space left on device" in err
    assert not target.exists() and not (tmp_path / "ledger.json.tmp").exists()


def test_a_stored_run_that_makes_no_sense_is_left_out_not_a_crash(capsys, home):
    with Progress() as p:
        p.record_run(
            experiment="memory-ledger",
            params={"batch_size": 0},
            device={},
            metrics={"parameters": "many", "activation_bytes": None},
            status="finished",
        )
        p.record_run(experiment="pipeline-breakdown", params={}, device={}, metrics={"mfu": "high"}, status="finished")
    code, out, _err = run_cli(capsys, "instrument", "memory-ledger", "--set", "model=mine", "--json")
    assert code == 0 and "No measurement of your model yet" in json.loads(out)["verdict"]
    code, out, _err = run_cli(capsys, "instrument", "pipeline", "--set", "profile=measured", "--json")
    assert code == 0 and "No pipeline-breakdown run yet" in json.loads(out)["verdict"]


def test_check_scores_a_prediction_against_the_instrument_that_reveals_it(capsys, home):
    code, out, _ = run_cli(capsys, "check", LESSON, "act1-predict", "--answer", "about 3 GB")
    assert code == 0 and "computed 12 GB" in out and "4x what you guessed" in out
    code, out, _ = run_cli(capsys, "check", LESSON, "act2-predict", "--answer", "60", "--json")
    verdict = json.loads(out)
    assert verdict["correct"] is True and "58.3%" in verdict["feedback"]


def test_export_includes_review_answers(capsys, home):
    with Progress(home / "progress.db") as p:
        p.record_answer("cpu-vs-gpu", "interview-bug", "forgot zero_grad", False, "How would you notice?")
        p.record_review("cpu-vs-gpu", "interview-bug", "forgot zero_grad; the grad norm grows", True, "")
        p.record_review("cpu-vs-gpu", "intermediate-check", "it grew about 3x", True, "")
    code, out, err = run_cli(capsys, "export", "cpu-vs-gpu")
    assert code == 0, err
    answers = json.loads(out)["lessons"][0]["answers"]
    bug = answers["interview-bug"]
    assert bug["attempts"] == 1 and bug["correct"] is False
    assert [(r["answer"], r["correct"]) for r in bug["reviews"]] == [("forgot zero_grad; the grad norm grows", True)]
    assert answers["intermediate-check"] == {
        "reviews": [
            {"at": answers["intermediate-check"]["reviews"][0]["at"], "answer": "it grew about 3x", "correct": True}
        ]
    }

"""The numbers in the built-in lessons' prose that torch itself gives (the float formats table
against torch.finfo, the GradScaler's defaults, the models' parameter counts). The rest of each
lesson's words and numbers are checked without torch in tests/content; these import it, so they
live in the tier that does."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from lesson_text import all_text, code_blocks

from tutor.course.lesson import Lesson
from tutor.course.loader import load_file

LESSONS = Path(__file__).resolve().parents[2] / "lessons"


@pytest.fixture(scope="module")
def gpu_lab() -> Lesson:
    return load_file(LESSONS / "gpu-lab.yaml")


@pytest.fixture(scope="module")
def gpu_training() -> Lesson:
    return load_file(LESSONS / "gpu-training.yaml")


# ------------------------------------------------------------------ gpu-lab


def _format_rows(lesson: Lesson) -> dict[str, list[str]]:
    table = next(b for b in code_blocks(lesson.step("formats-read").body) if b[0].startswith("format"))
    return {line.split()[0]: line.split()[1:] for line in table[2:]}


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
def test_float_format_table_matches_torch_finfo(gpu_lab, name):
    dtype = getattr(torch, name)
    info = torch.finfo(dtype)
    e, m, largest, normal, subnormal, eps = _format_rows(gpu_lab)[name]
    assert int(m) == -round(math.log2(info.eps)) and int(e) == info.bits - int(m) - 1
    # the table's formulas, with this row's e and m
    e, m = int(e), int(m)
    assert float(largest) == pytest.approx((2 - 2**-m) * 2 ** (2 ** (e - 1) - 1), rel=2e-3)
    assert float(largest) == pytest.approx(info.max, rel=2e-3)
    assert float(normal) == pytest.approx(info.smallest_normal, rel=2e-3)
    assert float(normal) == pytest.approx(2 ** (2 - 2 ** (e - 1)), rel=2e-3)
    tiny = torch.nextafter(torch.zeros(1, dtype=dtype), torch.ones(1, dtype=dtype)).item()
    assert float(subnormal) == pytest.approx(tiny, rel=2e-3)
    assert float(subnormal) == pytest.approx(2 ** (2 - 2 ** (e - 1) - m), rel=2e-3)
    assert float(eps) == pytest.approx(info.eps, rel=2e-3)


def test_tf32_row_and_scaler_defaults_match_torch(gpu_lab):
    assert _format_rows(gpu_lab)["TF32"][:2] == ["8", "10"]
    scaler = torch.amp.GradScaler("cpu")
    text = gpu_lab.step("autocast-read").body
    assert f"2^16 = {scaler.get_scale():,.0f}" in text
    assert f"after {scaler.get_growth_interval():,} good steps" in text
    assert scaler.get_backoff_factor() == 0.5 and "halves the scale" in text
    assert scaler.get_growth_factor() == 2.0 and "doubles the scale" in text


# ------------------------------------------------------------------ gpu-training


def test_gpu_training_numbers_in_prose_match_the_code(gpu_training):
    from tutor.experiments.model import (
        MNISTClassifier,
        TinyClassifier,
        count_parameters,
    )

    text = all_text(gpu_training)
    n = count_parameters(MNISTClassifier())
    assert f"{n:,}" in text  # 235,146
    assert f"{count_parameters(TinyClassifier()):,} parameters" in text  # 490
    macs = 784 * 256 + 256 * 128 + 128 * 10
    assert f"{macs:,}" in text and f"{49 * 8 + 8 * 10:,}" in text
    assert f"{n * 4:,}" in text and f"{3 * n * 4:,}" in text  # checkpoint: weights, + Adam's two
    assert f"{round(60000 * 784 * 4 / 1e6)} MB" in text  # resident MNIST in float32
    f16 = torch.finfo(torch.float16)
    assert f"{f16.max:g}" in text  # 65504
    assert f"{f16.smallest_normal:.1e}" in text  # 6.1e-05
    assert f"{2**-24:.2e}" in text  # 5.96e-08
    assert f"{torch.finfo(torch.bfloat16).eps:.1e}" in text  # 7.8e-03
    assert f"{torch.amp.GradScaler('cpu').get_scale():,.0f}" in text  # 65,536

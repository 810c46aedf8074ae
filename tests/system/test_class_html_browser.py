"""`gpututor class DIR --html FILE` opened in a real browser: Debian's headless chromium, with every
network lookup refused, draws the page; its screenshot is the window's size, not blank, and shows
the charts' own colours (the completion bars and the prediction profile's dots), so the inline SVG
was drawn with nothing fetched.

Skipped only where chromium is not installed; under CI (GPUTUTOR_STRICT_TESTS=1) a skip fails the
run (tests/conftest.py), and .ci/run installs chromium."""

from __future__ import annotations

import math
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import cast

import pytest
from PIL import Image  # comes with torchvision

from tests.unit.test_class_report import bundle, class_of_three, cpu_hash, lesson_record, lessons, prediction, write
from tutor.classroom import html as class_html
from tutor.cli import main

__all__ = ["cpu_hash", "lessons"]  # the fixtures, used by name

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
WINDOW = (1000, 1400)

pytestmark = pytest.mark.skipif(BROWSER is None, reason="chromium is not installed (apt-get install chromium)")


def screenshot(page: Path, png: Path, profile: Path) -> None:
    """The page drawn by headless chromium, offline: a lookup of any host fails and the proxy is a
    closed port, so anything the page tried to fetch would be missing from the picture."""
    assert BROWSER is not None
    subprocess.run(
        [
            BROWSER,
            "--headless=new",
            "--no-sandbox",  # CI containers run as root, where chromium's sandbox will not start
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            f"--user-data-dir={profile}",  # a profile of its own: parallel tests never share one
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--proxy-server=127.0.0.1:9",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            f"--screenshot={png}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=90,
    )


def colours(png: Path) -> tuple[tuple[int, int], Counter[tuple[int, ...]]]:
    """The picture's size, and how many pixels have each colour."""
    with Image.open(png) as image:
        rgb = image.convert("RGB")
        found = cast(list[tuple[int, tuple[int, ...]]], rgb.getcolors(rgb.width * rgb.height))
        return rgb.size, Counter({colour: n for n, colour in found})


def near(colour: tuple[int, ...], hex_colour: str, tolerance: int = 12) -> bool:
    target = tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return all(abs(a - b) <= tolerance for a, b in zip(colour[:3], target))


def test_the_class_report_opens_offline_in_chromium(tmp_path, capsys, cpu_hash):
    folder = tmp_path / "handed-in"
    class_of_three(folder, cpu_hash)
    # a fourth learner with a hostile name, predicting 3x: were the name run as script, no page
    write(
        folder,
        "x.json",
        bundle("<script>alert(1)</script>", [lesson_record(cpu_hash, 5, predictions=[prediction("p", math.log(3))])]),
    )
    page = tmp_path / "class.html"
    assert main(["class", str(folder), "--html", str(page)]) == 0
    assert f"Wrote {page}" in capsys.readouterr().out

    png = tmp_path / "class.png"
    screenshot(page, png, tmp_path / "chromium-profile")
    size, pixels = colours(png)
    assert size == WINDOW
    total = WINDOW[0] * WINDOW[1]
    background, most = pixels.most_common(1)[0]
    assert near(background, "#ffffff") and most < 0.97 * total  # a white page with something on it
    assert len(pixels) > 200  # text is anti-aliased: a drawn page has many shades, a blank one a few
    # the charts, drawn: the completion bars' blue and the profile's red (the class over-predicts)
    assert sum(n for c, n in pixels.items() if near(c, class_html.BLUE)) > 500
    assert sum(n for c, n in pixels.items() if near(c, class_html.RED, 40)) > 30

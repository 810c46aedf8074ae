"""`gpututor inspect` on the nanoGPT-style character model the package ships
(tutor/inspect/examples/char_gpt.py): the FLOPs it counts against a hand count, the memory parts
against the ledger, no finding on the script as shipped, and two mistakes planted in a copy of it
found. A small model keeps each run to seconds."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_inspect import EXAMPLES, inspect, keys

from tutor.inspect import findings

GPT = EXAMPLES / "char_gpt.py"
SIZE = {"batch": 8, "block": 32, "layers": 2, "embd": 64}
ARGS = [
    "--batch-size", str(SIZE["batch"]), "--block-size", str(SIZE["block"]),
    "--n-layer", str(SIZE["layers"]), "--n-embd", str(SIZE["embd"]),
]  # fmt: skip
VOCAB = len(set((EXAMPLES / "corpus.txt").read_text(encoding="utf-8")))


def gpt_flops(batch: int, block: int, layers: int, embd: int, vocab: int) -> int:
    """By hand, a matmul (m x k)(k x n) being 2mkn. Per token, forward: each Block's linear layers
    (query/key/value 3C², the projection C², the MLP 4C² each way) 24C², and attention's two
    matmuls against every position (q @ k^T and att @ v, causal mask or not: 2 x 2TC); then the
    tied lm_head, 2CV. Backward computes each matmul's input and weight gradients: twice the
    forward, since even the first Block's input needs a gradient (the embeddings learn). The
    embedding lookups, LayerNorm, GELU and softmax are no matmuls."""
    per_token = layers * (24 * embd**2 + 4 * block * embd) + 2 * embd * vocab
    return 3 * batch * block * per_token


@pytest.fixture(scope="module")
def clean() -> findings.Report:
    return inspect(GPT, ARGS)


def test_the_shipped_model_is_watched_with_no_finding(clean):
    assert clean.ok, (clean.problem, clean.output_tail)
    assert clean.findings == [], [f.evidence for f in clean.findings]
    assert "distinct; training on cpu" in clean.output_tail


def test_its_flops_are_the_hand_count(clean):
    assert clean.flops_per_step == pytest.approx(gpt_flops(**SIZE, vocab=VOCAB), rel=0.05)


def test_its_memory_parts_are_the_ledger_s(clean):
    parts = {p.name: p for p in clean.memory}
    # weight tying: the shared embedding / lm_head matrix counts once
    for name in ("weights", "gradients"):
        assert parts[name].measured_bytes == parts[name].formula_bytes, name
    # AdamW's two moments a parameter, and a 4-byte step counter per weight tensor the formula leaves out
    tensors = 4 + SIZE["layers"] * 12
    optimizer = parts["optimizer state"]
    assert optimizer.measured_bytes == optimizer.formula_bytes + 4 * tensors
    assert parts["activations"].measured_bytes > 0


def planted(tmp_path: Path, after: str, line: str) -> Path:
    """A copy of char_gpt.py with `line` added after the line `after`, at its indent."""
    text = GPT.read_text(encoding="utf-8")
    at = next(row for row in text.splitlines() if row.strip() == after)
    indent = at[: len(at) - len(at.lstrip())]
    copy = tmp_path / "char_gpt.py"
    copy.write_text(text.replace(at + "\n", f"{at}\n{indent}{line}\n", 1), encoding="utf-8")
    return copy


@pytest.mark.parametrize(
    ("line", "key"),
    [("kept.append(loss)", "losses-kept"), ("print(loss.item()) if iter_num < 0 else loss.item()", "sync-per-step")],
)
def test_a_planted_mistake_is_found(tmp_path, line, key):
    script = planted(tmp_path, "optimizer.step()", line)
    script.write_text(script.read_text().replace("    for iter_num in", "    kept = []\n    for iter_num in", 1))
    report = inspect(script, [*ARGS, "--text", str(EXAMPLES / "corpus.txt")])
    assert report.ok, (report.problem, report.output_tail)
    assert keys(report) == {key}, [f.evidence for f in report.findings]


def test_its_hand_rolled_get_batch_is_timed_as_data(clean):
    # no DataLoader: the data phase is the script's code before the training forward (get_batch)
    data = next(p for p in clean.split if p.name == "data")
    assert data.seconds > 0 and "get_batch" in clean.split_how


def test_a_slow_get_batch_shows_as_data_not_other(tmp_path):
    delay = 0.03  # as if each batch were read from disk
    script = planted(
        tmp_path, 'source = train_data if split == "train" else val_data', f"__import__('time').sleep({delay})"
    )
    report = inspect(script, [*ARGS, "--text", str(EXAMPLES / "corpus.txt")])
    assert report.ok, (report.problem, report.output_tail)
    parts = {p.name: p.seconds for p in report.split}
    assert delay <= parts["data"] < delay + 0.01, parts
    assert parts["other"] < 0.005, parts
    assert keys(report) == set(), [f.evidence for f in report.findings]  # the loader finding is for DataLoaders

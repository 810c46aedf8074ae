"""Every metric on screen in words and its unit: the registry's Metric declarations, the string
form a lesson pack may still use, and how present.py shows each unit (issue 24: no `param_bytes`,
`None` or `True` on screen)."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from tutor import experiments, present
from tutor.experiments.spec import Experiment, Metric, Params

SPECS = Path(experiments.__file__).parent / "specs"
BUILT_IN = {name: exp for name, exp in experiments.REGISTRY.items() if exp.module}
ALL_METRICS = [(exp.name, name, m) for exp in BUILT_IN.values() for name, m in exp.metrics.items()]


def _declared_in_source(path: Path) -> dict[str, ast.expr]:
    """The `metrics={...}` entries of a spec module, as written, with those of a dict it spreads in
    (`**MFU_INTERVAL`) where this module writes that dict (an imported one is checked in its own)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    dicts = {
        t.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
        for t in node.targets
        if isinstance(t, ast.Name)
    }

    def entries(d: ast.Dict) -> dict[str, ast.expr]:
        out: dict[str, ast.expr] = {}
        for k, v in zip(d.keys, d.values, strict=True):
            if k is None:  # **spread
                if isinstance(v, ast.Name) and v.id in dicts:
                    out.update(entries(dicts[v.id]))
            else:
                out[k.value] = v
        return out

    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "metrics" and isinstance(node.value, ast.Dict):
            return entries(node.value)
    raise AssertionError(f"{path.name} declares no metrics")


@pytest.mark.parametrize("module", sorted(p.stem for p in SPECS.glob("*.py") if p.stem != "__init__"))
def test_every_built_in_metric_is_declared_with_a_label_and_a_unit(module):
    """A bare description would leave the label to be cut from it and the unit to be guessed from
    the name; a built-in experiment says both."""
    for name, value in _declared_in_source(SPECS / f"{module}.py").items():
        assert isinstance(value, ast.Call) and getattr(value.func, "id", "") == "Metric", (module, name)
        assert len(value.args) >= 2 or {"label", "unit"} <= {k.arg for k in value.keywords}, (module, name)


@pytest.mark.parametrize("experiment,name,metric", ALL_METRICS, ids=[f"{e}.{n}" for e, n, _ in ALL_METRICS])
def test_a_label_is_a_few_words_and_the_unit_agrees_with_the_name(experiment, name, metric):
    assert isinstance(metric, Metric) and metric.unit in present.METRIC_UNITS
    assert metric.label.strip() == metric.label and 0 < len(metric.label) <= 40, metric.label
    assert ("_" not in name or metric.label != name) and not any(w in metric.label for w in ("None", "True", "False"))
    assert metric.description, "the long text stays: the docs and the lint's hints read it"
    # The naming rules and the declaration agree (a *_bytes in bytes, a *_share a fraction 0..1).
    guessed = present.unit_from_name(name)
    assert not guessed or metric.unit == guessed, (guessed, metric.unit)
    if metric.description.startswith("True "):
        assert metric.unit == "bool"
    if "None" in metric.description:  # the run can report None: say what it means here
        assert metric.none != "n/a" and "None" not in metric.none


def test_metric_units_on_screen_are_one_system_per_experiment():
    """Bytes show in binary units (KiB, MiB, GiB); an experiment reporting MB (1e6) uses no "B"."""
    for exp in BUILT_IN.values():
        units = {m.unit for m in exp.metrics.values()}
        assert not ("MB" in units and ("B" in units or "GiB" in units)), exp.name


def test_experiment_metric_gives_the_declaration_or_the_naming_rules_for_an_undeclared_one():
    train = experiments.get("train")
    assert train.metric("accuracy") is train.metrics["accuracy"]
    extra = train.metric("gradient_bf16_bytes")
    assert extra.label == "gradient bf16 bytes" and extra.unit == "B" and extra.none == "n/a"


def _pack(metrics):
    return Experiment("pack-x", "A pack's experiment", "", Params, metrics, run=lambda p, d: iter(()))


def test_a_packs_description_strings_still_work():
    exp = _pack(
        {
            "seconds": "seconds per product",
            "gflops": "achieved GFLOP/s (higher is better)",
            "peak_bytes": "peak memory (CUDA; None elsewhere)",
            "ok": "True if it matched",
        }
    )
    assert exp.metrics["seconds"] == Metric("seconds per product", "s", "seconds per product")
    assert exp.metrics["gflops"].label == "achieved GFLOP/s" and exp.metrics["gflops"].unit == ""
    assert exp.metrics["peak_bytes"].unit == "B" and exp.metrics["ok"].label == "it matched"
    assert present.metric_value(exp.metrics["seconds"], 0.25) == "250.0 ms"


def test_a_pack_may_mix_metrics_and_strings_and_a_bad_one_is_said():
    exp = _pack({"share": Metric("time waiting", "%", "share of the step", none="n/a off CUDA"), "n": "count"})
    assert present.metric_value(exp.metrics["share"], None) == "n/a off CUDA"
    with pytest.raises(ValueError, match="unknown unit 'bytes'"):
        Metric("memory", "bytes")
    with pytest.raises(ValueError, match="needs a label"):
        Metric(" ", "B")
    with pytest.raises(TypeError, match="metric 'n' must be a Metric or a description"):
        _pack({"n": 3})


@pytest.mark.parametrize(
    "unit,value,shown",
    [
        ("B", 3_151_872, "3.0 MiB (3,151,872 B)"),  # binary units, the exact count beside
        ("B", 0, "0 B"),
        ("MB", 123.456, "123 MB"),  # a run that reports MB (1e6 bytes) keeps them
        ("GiB", 79.19, "79.2 GiB"),
        ("s", 0.0123, "12.3 ms"),
        ("s", 12.34, "12.34 s"),
        ("%", 0.9712, "97.1%"),
        ("x", 3.214, "3.21x"),
        ("/s", 4862.0, "4,862/s"),
        ("TFLOP/s", 12.34, "12.3 TFLOP/s"),
        ("", 787_968, "787,968"),
        ("", 16.0001, "16"),
        ("bool", True, "yes"),
        ("bool", False, "no"),
        ("text", "storage accounting", "storage accounting"),
        ("B", math.nan, "nan"),  # never a made-up size
        ("s", math.inf, "inf"),
        ("B", "n/a", "n/a"),  # a value of another type than declared is shown as it is
    ],
)
def test_present_shows_each_unit(unit, value, shown):
    assert present.metric_value(Metric("m", unit), value) == shown


def test_every_unit_is_covered_above():
    covered = {u for u, _, _ in test_present_shows_each_unit.pytestmark[0].args[1]}
    assert covered == set(present.METRIC_UNITS)


def test_none_is_the_metrics_own_words_and_a_bare_name_uses_the_naming_rules():
    assert present.metric_value(Metric("peak allocated", "B", none="n/a off CUDA"), None) == "n/a off CUDA"
    assert present.metric_value(Metric("checkpoint", "text"), None) == "n/a"
    assert present.metric_value("param_bytes", 1024) == "1.0 KiB (1,024 B)"
    assert present.metric_value("lost_update_share", 0.25) == "25.0%" and present.metric_value("x", None) == "n/a"


def test_no_metric_calls_a_compute_capability_a_cuda_version():
    """'CUDA 8.0+' reads as the 2016 toolkit; TF32 and native bfloat16 need compute capability 8.0
    (Ampere), whatever the CUDA version."""
    for experiment, name, metric in ALL_METRICS:
        for text in (metric.description, metric.none):
            assert "CUDA 8" not in text, (experiment, name, text)


def test_a_run_told_its_edges_takes_them_as_a_lesson_or_a_shell_writes_them():
    """`decide` (DecidedParams): a tuple from a lesson, one number, or `--set decide=2,10`."""
    from tutor.cli.run import parse_sets
    from tutor.experiments.specs.sync_timing import SyncTimingParams

    assert SyncTimingParams(**parse_sets(["decide=2,10"])).decide == (2.0, 10.0)
    assert SyncTimingParams(**parse_sets(["decide=1.5"])).decide == (1.5,)
    assert SyncTimingParams(decide=[0.5, 2]).decide == (0.5, 2.0) and SyncTimingParams().decide == ()
    with pytest.raises(ValueError):
        SyncTimingParams(decide="two")


def test_an_experiment_that_decides_names_one_of_its_metrics_and_takes_the_edges():
    from tutor.experiments.spec import Experiment, Params

    with pytest.raises(ValueError, match="decides 'ratio'"):
        Experiment("x", "x", "", Params, {"ratio": "a ratio"}, decides="ratio")
    for spec in experiments.REGISTRY.values():
        if spec.decides is not None:
            assert f"{spec.decides}_low" in spec.metrics, spec.name  # it repeats for an interval

"""The house rules of imports (docs/ARCHITECTURE.md), read from the source: which folder may
import which, and no import loops. The runtime walls (what an import really loads, in a fresh interpreter) are in
tests/system/test_import_walls.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in (ROOT / "tutor").rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, *, module_level_only: bool) -> set[str]:
    """The modules `path` imports (of any package), resolved to the longest known module name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(nodes, top: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and _is_type_checking(node):
                continue
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found.add(full if full in MODULES else node.module)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if not module_level_only or isinstance(node, ast.ClassDef):
                    visit(node.body, False)
            elif hasattr(node, "body") and isinstance(node.body, list):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    visit(getattr(node, field, []) or [], top)

    visit(tree.body, True)
    return found


def _with_parents(name: str) -> set[str]:
    """Importing a.b.c runs a/__init__ and a/b/__init__ too."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & set(MODULES)


# folder -> folders (and top-level modules) of ours it may import, at any depth of the function
RULES = {
    # pure Python: answers are graded without the tutor, Textual or torch; a prediction of a noisy
    # metric by the interval rule of tutor.measurement, pure Python too
    "tutor.checks": {"tutor.checks", "tutor.measurement.intervals", "tutor"},
    # the statistics that decide are pure Python; the timers, peaks and calibration measure with
    # torch and read devices and the GPU cap where they measure (lazily)
    "tutor.measurement": {
        "tutor.measurement",
        "tutor",
        "tutor.paths",
        "tutor.cpu_load",
        "tutor.threads",
        "tutor.present",
        "tutor.charts",
        "tutor.experiments",
    },
    "tutor.course": {
        "tutor.checks",
        "tutor.course",
        "tutor.experiments",
        "tutor.instruments",
        "tutor.exercises.names",
        "tutor.measurement",
        "tutor.paths",
        "tutor.errors",
        "tutor.settings",
        "tutor.present",
        "tutor.charts",
        "tutor",
    },
    "tutor.experiments": {
        "tutor.experiments",
        "tutor.measurement",
        "tutor.inspect.launch",  # inspect-example: `gpututor inspect` on a shipped script, as a run
        "tutor.inspect.findings",
        "tutor.paths",
        "tutor.errors",
        "tutor.threads",
        "tutor.present",
        "tutor.charts",
        "tutor",
    },
    "tutor.exercises": {
        "tutor.exercises",
        "tutor.course.lesson",
        "tutor.experiments",
        "tutor.measurement.timing",
        "tutor.measurement.intervals",  # an `inspect` requirement's speed-up, judged as a prediction is
        "tutor.measurement.slots",  # a program's turn on a device a class shares
        "tutor.inspect.launch",  # an `inspect` requirement watches the program as `gpututor inspect` does
        "tutor.inspect.findings",
        "tutor.paths",
        "tutor.errors",
        "tutor.threads",
        "tutor.lab",
        "tutor.present",
        "tutor",
    },
    "tutor.instruments": {"tutor.instruments", "tutor"},
    # `gpututor inspect`: the learner's own script run in the sandbox's process (torch only in the
    # child's side: hooks, watched_main), its report beside the memory ledger and the measured roof
    "tutor.inspect": {
        "tutor.inspect",
        "tutor.exercises.sandbox",
        "tutor.exercises.child",
        "tutor.instruments.memory_ledger",
        "tutor.experiments.devices",
        "tutor.measurement.peak",
        "tutor.measurement.vendor_peaks",
        "tutor.paths",  # where the tutor's MNIST is, for the shipped mnist_cnn.py
        "tutor.measurement.slots",  # the class queue's names: a run already in its turn queues no more
        "tutor",
    },
    # bundles a learner submits and the class report: read by the hundred, so pure Python over
    # the course model and the progress store (device facts come from stored runs, not torch)
    "tutor.classroom": {
        "tutor.classroom",
        "tutor.course",
        "tutor.checks",
        "tutor.measurement",
        "tutor.paths",
        "tutor.settings",
        "tutor.present",
        "tutor.charts",
        "tutor",
    },
}
# torch is for the processes that train: the engine, the sandbox, and the headless CLI verbs
# that run experiments in their own process (lazily, inside the verb). An experiment's spec is
# read by the UI and the linter, so it never imports torch; its measurement module does.
NO_TORCH = (
    "tutor.checks",
    "tutor.measurement.intervals",
    "tutor.measurement.method",
    "tutor.measurement.warmup",
    "tutor.measurement.repeats",
    "tutor.ui",
    "tutor.course",
    "tutor.instruments",
    "tutor.classroom",
    "tutor.authoring",
    "tutor.experiments.spec",
    "tutor.experiments.specs",
)


def _ours(name: str) -> bool:
    return name.split(".")[0] == "tutor"


@pytest.mark.parametrize("folder", sorted(RULES))
def test_each_folder_imports_only_what_it_may(folder):
    allowed = RULES[folder]
    broken = []
    for name, path in MODULES.items():
        if name != folder and not name.startswith(folder + "."):
            continue
        for imported in _imports(path, module_level_only=False):
            if not _ours(imported):
                continue
            # "tutor" allows the package itself, not everything under it
            if not any(imported == a or (a != "tutor" and imported.startswith(a + ".")) for a in allowed):
                broken.append(f"{name} imports {imported}")
    assert not broken, "\n".join(broken)


def test_only_the_ui_imports_textual_and_the_ui_and_course_never_torch():
    broken = []
    for name, path in MODULES.items():
        for imported in _imports(path, module_level_only=False):
            top = imported.split(".")[0]
            if top == "textual" and not name.startswith("tutor.ui"):
                broken.append(f"{name} imports {imported}: only tutor/ui draws on the screen")
            if top == "torch" and name.startswith(NO_TORCH):
                broken.append(f"{name} imports {imported}: torch belongs to the engine and the sandbox")
    assert not broken, "\n".join(broken)


def test_there_are_no_import_loops():
    """Loops between modules, counting imports inside functions too (a lazy import is still a
    dependency) and the package __init__ an import runs."""
    graph = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for imported in _imports(path, module_level_only=False):
            for target in _with_parents(imported):
                # A module may import its own package (its __init__ is already running).
                if target != name and not name.startswith(target + "."):
                    graph[name].add(target)
    # Tarjan's strongly connected components: any component of two or more modules is a loop.
    index, low, stack, on_stack, loops = {}, {}, [], set(), []
    counter = [0]

    def connect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                loops.append(sorted(component))

    for v in graph:
        if v not in index:
            connect(v)
    assert not loops, "import loops:\n" + "\n".join(" <-> ".join(c) for c in loops)


def _pattern_pair(a: str, b: str) -> bool:
    """Two modules may share a name where the pairing is the pattern: an experiment's spec beside
    its measurement, a screen named after what it shows, an instrument beside the experiment that
    measures what it computes."""
    folders = {a.rsplit(".", 1)[0], b.rsplit(".", 1)[0]}
    if folders == {"tutor.experiments", "tutor.experiments.specs"} or "tutor.ui.screens" in folders:
        return True
    return {f.removesuffix(".specs") for f in folders} == {"tutor.instruments", "tutor.experiments"}


def test_no_module_name_repeats_outside_the_patterns():
    """Issue 41: jump-to-file lands on the one module a name means; and tutor is the one package."""
    by_name: dict[str, list[str]] = {}
    for name in MODULES:
        if name.split(".")[-1] not in ("tutor",) and MODULES[name].name != "__init__.py":
            by_name.setdefault(name.split(".")[-1], []).append(name)
    clashes = [
        f"{short}: {', '.join(sorted(full))}"
        for short, full in sorted(by_name.items())
        if len(full) > 1 and not all(_pattern_pair(a, b) for i, a in enumerate(full) for b in full[i + 1 :])
    ]
    assert not clashes, "\n".join(clashes)
    assert sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()) == ["tutor"]

"""Loading a lesson file: YAML, then the model, then the checks no schema can express (metrics a
prediction compares, ranges with gaps, experiments' parameters, graded examples), each problem
said with its path:line:col."""

from __future__ import annotations

import ast
import datetime
import difflib
import functools
import itertools
import math
import re
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from tutor import experiments, instruments, present
from tutor.checks.answers import ChoiceAnswer, ChoiceOption, NumberAnswer, TextAnswer
from tutor.course.lesson import (
    LEDGER_AGGREGATES,
    MAX_FILE_BYTES,
    BehaviourRequirement,
    CheckStep,
    CodeCompare,
    ErrorRequirement,
    ExerciseStep,
    FunctionRequirement,
    Goal,
    InspectRequirement,
    InstrumentStep,
    Lesson,
    LessonError,
    LessonIssue,
    OutputRequirement,
    PredictStep,
    PythonRequirement,
    ReadStep,
    RunStep,
    SourceRequirement,
    Step,
    Verify,
)
from tutor.course.lesson_yaml import Path_, Pos, parse, position

_UNION_TAGS = {  # for an error that does not list them (a missing tag)
    "step kind": "read, predict, run, check, exercise, instrument",
    "requirement type": "output, source, report, file, function, behaviour, error, python, inspect",
    "answer type": "choice, number, text",
}
_TAGS = {
    "read",
    "predict",
    "run",
    "check",
    "exercise",
    "instrument",
    "choice",
    "number",
    "text",
    "output",
    "source",
    "report",
    "file",
    "function",
    "behaviour",
    "error",
    "python",
    "inspect",
}


UNKNOWN_EXPERIMENT = "unknown experiment"  # how that issue starts: see without_pack_knock_ons


def without_pack_knock_ons(issues: list[LessonIssue], pack_problems: list[LessonIssue]) -> list[LessonIssue]:
    """The issues less each "unknown experiment" of a lesson beside a folder pack whose
    experiments.py did not load: its experiments were never registered, and the import's own
    error, at its line, is the one to fix."""
    from tutor.experiments.packs import EXPERIMENTS_FILE

    broken = {Path(p.path).resolve().parent for p in pack_problems if Path(p.path).name == EXPERIMENTS_FILE}
    return [
        i for i in issues if not (i.message.startswith(UNKNOWN_EXPERIMENT) and Path(i.path).resolve().parent in broken)
    ]


def _clean_loc(loc: tuple[Any, ...], data: Any) -> tuple[Any, ...]:
    """Drop pydantic's union tags (e.g. 'read', 'choice') so a location matches the YAML path."""
    out: list[Any] = []
    cur = data
    after_union = True  # a tag comes right after the list index (or the key) of a union value
    for part in loc:
        tagged = after_union and isinstance(cur, dict) and part in _TAGS and cur.get("kind", cur.get("type")) == part
        after_union = False
        if tagged:
            # The discriminated union's branch name, not a key of the file (even where a
            # field has the same name: an instrument step's `instrument` key).
            continue
        if (isinstance(cur, dict) and part in cur) or (
            isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur)
        ):
            out.append(part)
            cur = cur[part]
            after_union = True
        else:
            out.append(part)
            cur = None
    return tuple(out)


def _where(loc: tuple[Any, ...], data: Any) -> str:
    """A location as an instructor reads it: "step 'check-1' answer.rubric.require[0].any"."""
    head, rest = "", loc
    if len(loc) >= 2 and loc[0] == "steps" and isinstance(loc[1], int):
        steps = data.get("steps") if isinstance(data, dict) else None
        step = steps[loc[1]] if isinstance(steps, list) and 0 <= loc[1] < len(steps) else None
        sid = step.get("id") if isinstance(step, dict) else None
        head = f"step {sid!r}" if isinstance(sid, str) else f"steps[{loc[1]}]"
        rest = loc[2:]
    tail = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in rest).lstrip(".")
    return " ".join(x for x in (head, tail) if x)


def _known_keys() -> list[str]:
    models = (
        Lesson,
        ReadStep,
        PredictStep,
        RunStep,
        CheckStep,
        CodeCompare,
        Verify,
        ChoiceAnswer,
        NumberAnswer,
        TextAnswer,
        InstrumentStep,
        Goal,
    )
    return sorted({k for m in models for k in m.model_fields})


_STEP_MODELS = {
    typing.get_args(m.model_fields["kind"].annotation)[0]: m
    for m in (ReadStep, PredictStep, RunStep, CheckStep, ExerciseStep, InstrumentStep)
}


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models a field can hold, through Optional, list and Annotated unions."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _keys_at(loc: tuple[Any, ...], data: Any) -> list[str] | None:
    """The keys the mapping at `loc` takes, its model found by walking the lesson's models along
    `loc` (a union picked by the mapping's own `kind` or `type`); None where that is unclear."""
    models: list[type[BaseModel]] = [Lesson]
    node = data
    for part in loc:
        if isinstance(part, int):
            node = node[part] if isinstance(node, list) and part < len(node) else None
        else:
            node = node.get(part) if isinstance(node, dict) else None
            models = [
                m
                for model in models
                if part in model.model_fields
                for m in _models_in(model.model_fields[part].annotation)
            ]
        if len(models) > 1 and isinstance(node, dict):
            for tag in ("kind", "type"):
                if tag in node:
                    models = [
                        m
                        for m in models
                        if tag in m.model_fields and node[tag] in typing.get_args(m.model_fields[tag].annotation)
                    ]
    return list(models[0].model_fields) if len(models) == 1 else None


def _step_fields(loc: tuple[Any, ...], data: Any) -> list[str] | None:
    """[kind, *its keys] when loc is a step of a known kind, else None."""
    if len(loc) != 2 or loc[0] != "steps" or not isinstance(data, dict):
        return None
    steps = data.get("steps")
    step = steps[loc[1]] if isinstance(steps, list) and isinstance(loc[1], int) and loc[1] < len(steps) else None
    if not isinstance(step, dict):
        return None
    model = _STEP_MODELS.get(step.get("kind"))
    return [step["kind"], *model.model_fields] if model else None


def _did_you_mean(word: Any, choices: Iterable[str], cutoff: float = 0.6) -> str:
    close = difflib.get_close_matches(str(word), sorted(choices), n=1, cutoff=cutoff)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _unquoted_word(value: Any, msg: str) -> str:
    """YAML 1.1 reads an unquoted off/no as false and on/yes as true: where the parameter wanted
    that word as text, say so (pydantic says only that False is not 'off')."""
    if not isinstance(value, bool):
        return ""
    for word in ("off", "no") if value is False else ("on", "yes"):
        if f"'{word}'" in msg:
            return f'; YAML reads an unquoted {word} as {str(value).lower()}: write "{word}"'
    return ""


def _got(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return ""
    text = repr(value)
    return f" (got {text})" if len(text) <= 60 else ""


def _schema_issues(e: ValidationError, data: Any, marks: dict[Path_, Pos], path: str) -> list[LessonIssue]:
    errors = [
        (err, _clean_loc(tuple(err["loc"]), data))
        for err in e.errors()
        # reported from the file itself, with both positions (see _duplicate_step_ids)
        if "duplicate step id" not in str(err.get("msg", ""))
    ]
    missing: dict[tuple[Any, ...], set[str]] = {}
    for err, loc in errors:
        if err["type"] == "missing" and loc:
            missing.setdefault(loc[:-1], set()).add(str(loc[-1]))

    # A misspelt key ('promt') also makes the real one ('prompt') missing: report it once.
    misspelt: dict[tuple[Any, ...], str] = {}
    for err, loc in errors:
        if err["type"] == "extra_forbidden" and loc:
            close = difflib.get_close_matches(str(loc[-1]), sorted(missing.get(loc[:-1], ())), n=1, cutoff=0.5)
            if close:
                misspelt[loc] = close[0]
    explained = {(*loc[:-1], key) for loc, key in misspelt.items()}

    issues: list[LessonIssue] = []

    def add(pos: Pos, where: str, message: str) -> None:
        issues.append(LessonIssue(path, pos[0], pos[1], f"{where}: {message}" if where else message))

    for err, loc in errors:
        kind = err["type"]
        ctx = err.get("ctx") or {}
        if kind == "extra_forbidden" and loc:
            key = str(loc[-1])
            if loc in misspelt:
                hint = f" (did you mean {misspelt[loc]!r}?)"
            elif (fields := _step_fields(loc[:-1], data)) is not None:
                # 'prompt' on an exercise step is a real key of other steps: name this kind's keys.
                article = "an" if fields[0][0] in "aeiou" else "a"
                hint = _did_you_mean(key, fields, 0.7) or f"; {article} {fields[0]} step takes: {', '.join(fields[1:])}"
            elif (keys := _keys_at(loc[:-1], data)) is not None:
                hint = _did_you_mean(key, keys, 0.6) or f"; it takes: {', '.join(keys)}"
            else:
                hint = _did_you_mean(key, [k for k in _known_keys() if k != key], 0.7)
            add(position(marks, loc, at_key=True), _where(loc[:-1], data), f"unknown key {key!r}{hint}")
        elif kind == "missing" and loc:
            if loc in explained:
                continue
            add(position(marks, loc), _where(loc[:-1], data), f"missing required key {loc[-1]!r}")
        elif kind in ("union_tag_invalid", "union_tag_not_found"):
            key = str(ctx.get("discriminator", "kind")).strip("'\"")
            what = "step kind" if key == "kind" else "requirement type" if "requirements" in loc else "answer type"
            # pydantic names the tags the union accepts ("'output', 'source', ..."); the quotes go.
            expected = ", ".join(t.strip(" '\"") for t in str(ctx.get("expected_tags", "")).split(",") if t.strip())
            expected = expected or _UNION_TAGS[what]
            if kind == "union_tag_invalid":
                tag = ctx.get("tag")
                add(
                    position(marks, (*loc, key)),
                    _where(loc, data),
                    f"unknown {what} {tag!r}{_did_you_mean(tag, expected.split(', '))}; expected one of {expected}",
                )
            else:
                add(position(marks, loc), _where(loc, data), f"missing key {key!r} (one of {expected})")
        elif kind == "string_type" and loc and loc[-1] == "hint" and isinstance(err.get("input"), list):
            # hint: is one text; the tiers are `hints:`
            shown = ", ".join(repr(h) if isinstance(h, str) else str(h) for h in err["input"][:2])
            more = ", ..." if len(err["input"]) > 2 else ""
            add(
                position(marks, loc, at_key=True),
                _where(loc[:-1], data),
                f"hint is one text, and this is a list (did you mean hints: [{shown}{more}]? a learner sees them "
                "one at a time)",
            )
        elif kind == "list_type" and loc and loc[-1] == "hints" and isinstance(err.get("input"), str):
            add(
                position(marks, loc, at_key=True),
                _where(loc[:-1], data),
                "hints is a list, shown one at a time: write hints: [...] with each hint an item (or hint: for one)",
            )
        elif (
            kind == "string_type"
            and isinstance(err.get("input"), (int, float))
            and not isinstance(err.get("input"), bool)
        ):
            add(position(marks, loc), _where(loc, data), "this reads as a number, not text: put it in quotes")
        elif kind == "string_type" and isinstance(err.get("input"), (datetime.date, bool)):
            reads = "true or false" if isinstance(err.get("input"), bool) else "a date"
            add(position(marks, loc), _where(loc, data), f"this reads as {reads}, not text: put it in quotes")
        elif kind == "string_pattern_mismatch" and loc and loc[-1] == "id":
            add(
                position(marks, loc),
                _where(loc, data),
                f"ids use lowercase letters, digits and dashes, like 'check-1'{_got(err.get('input'))}",
            )
        elif kind == "string_pattern_mismatch" and loc and loc[-1] == "name":
            add(
                position(marks, loc),
                _where(loc, data),
                f"a Python function name: letters, digits and _, like 'train_one_epoch'{_got(err.get('input'))}",
            )
        else:
            msg = str(err.get("msg", "invalid value")).replace(" after validation", "").removeprefix("Value error, ")
            # A rule across a mapping's keys ("give `hints` or `hint`, not both") points at the key it
            # names that comes last in the file, not at the mapping's start.
            node = err.get("input")
            named = [
                position(marks, (*loc, k), at_key=True)
                for k in re.findall(r"`(\w+)`", msg)
                if isinstance(node, dict) and k in node
            ]
            pos = max(named) if named else position(marks, loc)
            add(pos, _where(loc, data) or "lesson", f"{msg}{_got(err.get('input'))}")
    return issues


def _duplicate_step_ids(data: dict[str, Any], marks: dict[Path_, Pos], path: str) -> list[LessonIssue]:
    issues = []
    first: dict[str, int] = {}
    steps = data.get("steps")
    for i, step in enumerate(steps if isinstance(steps, list) else []):
        sid = step.get("id") if isinstance(step, dict) else None
        if not isinstance(sid, str):
            continue
        if sid in first:
            line, col = position(marks, ("steps", i, "id"))
            earlier = position(marks, ("steps", first[sid], "id"))[0]
            issues.append(LessonIssue(path, line, col, f"duplicate step id {sid!r} (first used at line {earlier})"))
        else:
            first[sid] = i
    return issues


def _semantic_issues(data: dict[str, Any], marks: dict[Path_, Pos], path: str) -> list[LessonIssue]:
    """Checks beyond the schema: experiments exist, params fit, compared metrics exist.

    Works on the parsed YAML rather than the validated model, so a lesson with schema
    errors still gets these reported in the same pass.
    """
    issues: list[LessonIssue] = []

    def add(loc: tuple[Any, ...], message: str, at_key: bool = False) -> None:
        line, col = position(marks, loc, at_key)
        issues.append(LessonIssue(path, line, col, message))

    def check_experiment(loc: tuple[Any, ...], name: Any, params: Any) -> None:
        if not isinstance(name, str):
            return  # the schema reports a non-string
        if name not in experiments.REGISTRY:
            # A close match is the likely fix; only without one is the whole list worth its length.
            hint = (
                _did_you_mean(name, experiments.REGISTRY) or f"; available: {', '.join(sorted(experiments.REGISTRY))}"
            )
            add((*loc, "experiment"), f"{UNKNOWN_EXPERIMENT} {name!r}{hint}")
            return
        if not isinstance(params, dict):
            return
        exp = experiments.REGISTRY[name]
        for key in exp.file_params():
            if key in params:
                add(
                    (*loc, "params", key),
                    f"experiment {name!r} parameter {key!r} names a file to write on the "
                    f"learner's machine; a lesson may not set it (a learner can: gpututor run {name} "
                    f"--set {key}=PATH)",
                    at_key=True,
                )
        try:
            exp.make_params(params)
        except ValidationError as e:
            names = list(exp.params.model_fields)
            for err in e.errors():
                param = err["loc"][0] if err["loc"] else None
                ploc = (*loc, "params", param) if param is not None else (*loc, "params")
                if err["type"] == "extra_forbidden":
                    add(
                        ploc,
                        f"experiment {name!r} has no parameter {param!r}{_did_you_mean(str(param), names)}; "
                        f"it takes: {', '.join(names)}",
                        at_key=True,
                    )
                elif param is None:  # a check across parameters (batch_size a multiple of micro_batches)
                    add(ploc, f"experiment {name!r} params: {err['msg'].removeprefix('Value error, ')}")
                else:
                    add(
                        ploc,
                        f"experiment {name!r} parameter {param!r}: {err['msg'].removeprefix('Value error, ')}"
                        f"{_got(err.get('input'))}{_unquoted_word(err.get('input'), err['msg'])}",
                    )

    steps = data.get("steps")
    steps = steps if isinstance(steps, list) else []
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            continue
        loc = ("steps", i)
        kind = step.get("kind")
        if kind == "run":
            check_experiment(loc, step.get("experiment"), step.get("params", {}))
            issues += _tweak_issues(step, loc, marks, path)
        elif kind == "check":
            verify = step.get("verify")
            if isinstance(verify, dict):
                check_experiment((*loc, "verify"), verify.get("experiment"), verify.get("params", {}))
            issues += _check_answer_issues(step, loc, marks, path)
        elif kind == "instrument":
            issues += _instrument_issues(step, loc, marks, path, steps)
        elif kind == "predict" and not isinstance(step.get("compare"), str):
            for key in ("at", "against"):
                if key in step:
                    add(
                        (*loc, key),
                        f"step {step.get('id')!r}: `{key}` names the settings a prediction is judged at, and this "
                        "step compares nothing: give it `compare` (or leave `at` and `against` out)",
                        at_key=True,
                    )
        elif kind == "predict" and isinstance(step.get("compare"), str):
            issues += _range_issues(step, loc, marks, path)
            metric = step["compare"]
            run = next(
                (s for s in steps[i + 1 :] if isinstance(s, dict) and s.get("kind") in ("run", "instrument")), None
            )
            if run is not None:
                issues += _named_settings_issues(step, loc, run, marks, path)
            if run is None:
                add(
                    (*loc, "compare"),
                    f"step {step.get('id')!r} compares {metric!r} but no run or instrument "
                    "step follows it: a prediction is revealed by the next one after it (put this step before it)",
                )
            elif run.get("kind") == "instrument":
                name = run.get("instrument")
                inst = instruments.REGISTRY.get(name) if isinstance(name, str) else None
                if inst is not None and metric not in inst.outputs:
                    add(
                        (*loc, "compare"),
                        f"instrument {inst.name!r} (step {run.get('id')!r}) has no output "
                        f"{metric!r}{_did_you_mean(metric, inst.outputs)}; it computes: {', '.join(inst.outputs)}",
                    )
            elif isinstance(run.get("experiment"), str) and run["experiment"] in experiments.REGISTRY:
                metrics = experiments.REGISTRY[run["experiment"]].metrics
                if metric not in metrics:
                    add(
                        (*loc, "compare"),
                        f"experiment {run['experiment']!r} (step {run.get('id')!r}) has no "
                        f"metric {metric!r}{_did_you_mean(metric, metrics)}; it reports: {_reported(metrics)}",
                    )
                    continue
                declared = experiments.REGISTRY[run["experiment"]].metric(metric)
                if declared.unit not in ("text", "bool") and _unranged_choice(step.get("answer")):
                    add(
                        (*loc, "answer", "options"),
                        f"step {step.get('id')!r} compares the number {metric!r} with "
                        "options that have no `min`/`max`, so no measurement can land in one: give each option "
                        "the range it stands for",
                        at_key=True,
                    )
                unit = step.get("unit", "")
                problem = isinstance(unit, str) and (
                    _ratio_unit_problem(unit, declared.unit)
                    if "against" in step
                    else _unit_problem(unit, declared.unit, step.get("answer"))
                )
                if problem:
                    add(
                        (*loc, "unit") if "unit" in step else (*loc, "compare"),
                        f"step {step.get('id')!r}: {metric!r} of experiment {run['experiment']!r} {problem}",
                    )
    return issues


def _named_settings_issues(
    step: dict[str, Any], loc: tuple[Any, ...], run: dict[str, Any], marks: dict[Path_, Pos], path: str
) -> list[LessonIssue]:
    """A prediction's `at` and `against` against the step that reveals it: a run step's tweaks
    (a run counts only at settings the learner can pick) or an instrument's controls; and a ratio
    of two settings that differ."""
    issues: list[LessonIssue] = []

    def add(where: tuple[Any, ...], message: str, at_key: bool = False) -> None:
        line, col = position(marks, (*loc, *where), at_key)
        issues.append(LessonIssue(path, line, col, f"step {step.get('id')!r}: {message}"))

    named: dict[str, dict[str, Any]] = {k: step[k] for k in ("at", "against") if isinstance(step.get(k), dict)}
    top: dict[str, Any]
    bottom: dict[str, Any]
    if run.get("kind") == "run":
        tweak: dict[str, Any] = run["tweak"] if isinstance(run.get("tweak"), dict) else {}
        for field_name, settings in named.items():
            for key, value in settings.items():
                offered = tweak.get(key)
                if not isinstance(offered, list):
                    add(
                        (field_name, key),
                        f"{field_name} {key}: run step {run.get('id')!r} offers no setting {key!r} to switch"
                        f"{_did_you_mean(str(key), list(tweak))}; a prediction is judged only at settings a "
                        f"learner can pick (its tweak offers: {', '.join(tweak) or 'none'})",
                        at_key=True,
                    )
                elif value not in offered:
                    add(
                        (field_name, key),
                        f"{field_name} {key}={value!r} is not one of the values run step {run.get('id')!r} "
                        f"offers: {offered}",
                    )
        params: dict[str, Any] = run["params"] if isinstance(run.get("params"), dict) else {}
        start = {
            k: params[k] if k in params and params[k] in v else v[0]
            for k, v in tweak.items()
            if isinstance(v, list) and v
        }
        top, bottom = {**start, **named.get("at", {})}, {**start, **named.get("against", {})}
    elif run.get("kind") == "instrument":
        name = run.get("instrument")
        inst = instruments.REGISTRY.get(name) if isinstance(name, str) else None
        if inst is None:
            return issues  # the instrument step says so
        controls = [c.name for c in inst.controls]
        for field_name, settings in named.items():
            for key, value in settings.items():
                if key not in controls:
                    add(
                        (field_name, key),
                        f"{field_name}: instrument {name!r} (step {run.get('id')!r}) has no control {key!r}"
                        f"{_did_you_mean(str(key), controls)}; it has: {', '.join(controls)}",
                        at_key=True,
                    )
                    continue
                try:
                    inst.control(key).parse(value)
                except instruments.SettingsError as e:
                    add((field_name, key), f"{field_name} {e}")
        base: dict[str, Any] = run["set"] if isinstance(run.get("set"), dict) else {}
        scenario: dict[str, Any] = run["scenario"] if isinstance(run.get("scenario"), dict) else {}
        try:  # as the reveal computes them: `at` over set, else the scenario
            top = inst.settings({**base, **(named.get("at") or scenario)})
            bottom = inst.settings({**base, **named.get("against", {})})
        except (instruments.SettingsError, TypeError, ValueError):
            return issues  # said above, or by the instrument step
    else:
        return issues
    if "against" in named and not issues and top == bottom:
        add(
            ("against",),
            "`against` names the settings the prediction is judged at too: a ratio of a setting "
            "over itself is 1 whatever is measured; name the other setting to compare with",
            at_key=True,
        )
    return issues


def _ratio_unit_problem(given: str, declared: str) -> str | None:
    """A prediction with `against` compares a ratio of two measurements: read in x."""
    if declared in ("text", "bool"):
        return "is not a number, so it has no ratio: leave `against` out"
    if given.strip() != "x":
        return (
            "is read as a ratio with `against` (its value at `at` over its value at `against`), a number of "
            'times: write unit: "x" and give the answer in x'
        )
    return None


def _unit_problem(given: str, declared: str, answer: Any) -> str | None:
    """Why a predict step's `unit` misreads the metric it compares, whose unit the registry
    declares (tutor/experiments/spec.py Metric.unit); None when it reads it right. The step's
    unit is the one the measurement is read in: "%" turns a share 0.704 into 70.4 before the
    options' ranges and the learner's number are compared with it, and a number answer in
    another unit ("ms" for a metric in "s") is converted from it."""
    from tutor.checks.number import unit_info

    ranged = isinstance(answer, dict) and answer.get("type") == "choice" and not _unranged_choice(answer)
    theirs = answer.get("unit") if isinstance(answer, dict) and answer.get("type") == "number" else None
    if not (ranged or theirs is not None) or declared in ("text", "bool"):
        return None  # words, or options matched by their text: no number is read in a unit
    given, theirs = given.strip(), (theirs.strip() if isinstance(theirs, str) else "")
    if declared == "%" and given != "%":
        said = "no unit" if not given else f'unit "{given}"'
        return (
            f"is a share from 0 to 1, shown in percent; with {said}, this step reads it as a fraction "
            '(a run showing 70% is read as 0.7, in none of your percent ranges): write unit: "%" and give its ranges and answer in percent'
        )
    if given == "%" and declared != "%":
        shown = f'"{declared}"' if declared else "none (a plain number)"
        return f'is not a share: unit "%" would read it as one and show it times 100; its unit is {shown}' + (
            f': write unit: "{declared}"' if declared else ": leave unit out"
        )
    if not declared:
        return None  # a plain number: the step's unit names what it counts
    if given and given != declared and unit_info(given) != unit_info(declared):
        return (
            f'is measured in "{declared}" ({present.METRIC_UNITS[declared]}), and this step has unit "{given}": '
            f'write unit: "{declared}", the unit the measurement is read in (the answer may use another of '
            "the same kind)"
        )
    read_in = unit_info(given or declared)
    if not given and theirs and unit_info(theirs) != unit_info(declared):
        return (
            f'is measured in "{declared}", and this step has no unit, so it is compared with the answer as '
            f'if it were in "{theirs}": write unit: "{declared}"'
        )
    other = unit_info(theirs)
    if read_in and other and read_in[1] != other[1]:
        return (
            f'is read in "{given or declared}", and the answer\'s unit "{theirs}" is not one it converts to: '
            f"give the answer a unit of the same kind ({read_in[1]})"
        )
    return None


def _check_answer_issues(
    step: dict[str, Any], loc: tuple[Any, ...], marks: dict[Path_, Pos], path: str
) -> list[LessonIssue]:
    """A check's answer must be one a learner can get right: a choice with a correct option, a
    number with a value or a metric its verify run reports."""
    answer = step.get("answer")
    if not isinstance(answer, dict):
        return []  # the schema reports it
    where = (*loc, "answer")
    issues: list[LessonIssue] = []

    def add(at: tuple[Any, ...], message: str, at_key: bool = False) -> None:
        line, col = position(marks, at, at_key)
        issues.append(LessonIssue(path, line, col, f"step {step.get('id')!r} {message}"))

    options = answer.get("options")
    known = set(ChoiceOption.model_fields)
    if (
        answer.get("type") == "choice"
        and isinstance(options, list)
        and len(options) >= 2
        and not any(isinstance(o, dict) and (o.get("correct") is True or set(o) - known) for o in options)
    ):
        # (an option with a misspelt key, `corect: true`, is reported as that)
        add(
            (*where, "options"),
            "answer: no option has `correct: true`, so no answer can pass: mark the right one(s)",
            at_key=True,
        )
    if answer.get("type") != "number":
        return issues
    metric, verify = answer.get("from_metric"), step.get("verify")
    if metric is None and answer.get("value") is None:
        add(
            where,
            "answer: a number check needs the right answer: `value: N`, or `from_metric: NAME` (a metric of "
            "its verify run)",
            at_key=True,
        )
    elif isinstance(metric, str) and not isinstance(verify, dict):
        add(
            (*where, "from_metric"),
            f"answer: from_metric {metric!r} is read from this check's verify run, and it has "
            "none: add `verify: {experiment: NAME}`, or give the answer as `value`",
            at_key=True,
        )
    elif isinstance(metric, str) and isinstance(verify, dict) and verify.get("experiment") in experiments.REGISTRY:
        metrics = experiments.REGISTRY[verify["experiment"]].metrics
        if metric not in metrics:
            add(
                (*where, "from_metric"),
                f"from_metric: experiment {verify['experiment']!r} (its verify run) has no metric "
                f"{metric!r}{_did_you_mean(metric, metrics)}; it reports: {_reported(metrics)}",
            )
    return issues


def _unranged_choice(answer: Any) -> bool:
    """A choice whose options all lack a range (and could be matched by their text alone)."""
    options = answer.get("options") if isinstance(answer, dict) and answer.get("type") == "choice" else None
    return (
        isinstance(options, list)
        and len(options) >= 2
        and not any(isinstance(o, dict) and ("min" in o or "max" in o) for o in options)
    )


def _reported(metrics: Any) -> str:
    """The metrics a run reports, each spread (NAME_low, NAME_high) said once beside its NAME."""
    ends = {n for n in metrics for end in ("_low", "_high") if n.endswith(end) and n[: -len(end)] in metrics}
    spread = [n for n in metrics if f"{n}_low" in ends]
    text = ", ".join(n for n in metrics if n not in ends)
    if spread:
        text += f"; {', '.join(spread)} also as NAME_low and NAME_high, the ends of the run's repeats"
    return text


def _range_issues(step: dict[str, Any], loc: tuple[Any, ...], marks: dict[Path_, Pos], path: str) -> list[LessonIssue]:
    """A ranged prediction's options must cover every measurement from 0 up, once each."""
    issues: list[LessonIssue] = []
    answer = step.get("answer")
    options = answer.get("options") if isinstance(answer, dict) and answer.get("type") == "choice" else None
    if not isinstance(options, list):
        return issues

    def bound(option: Any, key: str) -> float | None:
        value = option.get(key) if isinstance(option, dict) else None
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def add(j: int, key: str | None, message: str) -> None:
        line, col = position(marks, (*loc, "answer", "options", j, *([key] if key else [])))
        issues.append(LessonIssue(path, line, col, f"step {step.get('id')!r} option {j + 1}: {message}"))

    ranged = [j for j, o in enumerate(options) if bound(o, "min") is not None or bound(o, "max") is not None]
    if not ranged:
        return issues  # options compared by their text (an error's name, a device)
    # An option without a range is a distractor no measurement lands in ("it crashes"): allowed.
    spans = sorted(
        ((bound(options[j], "min"), bound(options[j], "max"), j) for j in ranged),
        key=lambda s: -math.inf if s[0] is None else s[0],
    )
    for low, high, j in spans:
        if low is not None and high is not None and high <= low:
            add(j, "max", f"max {high:g} is not above min {low:g}: no measurement falls in it")
    low, _, first = spans[0]
    if low is not None and low > 0:
        add(first, "min", f"a measurement below {low:g} would match no option: start the lowest range at 0")
    _, high, last = spans[-1]
    if high is not None:
        add(
            last,
            "max",
            f"a measurement of {high:g} or more would match no option: leave out max on the "
            "highest range (it then means 'and above')",
        )
    for (_, high, j), (low, _, k) in itertools.pairwise(spans):
        if high is None or low is None:
            continue  # an open end in the middle: reported as an overlap below
        if high < low:
            add(
                k,
                "min",
                f"a measurement from {high:g} to {low:g} would match no option: start this range "
                f"at {high:g}, where option {j + 1} ends",
            )
        elif high > low:
            add(
                k,
                "min",
                f"overlaps option {j + 1} from {low:g} to {high:g}: a measurement there counts for "
                "one of them only; start this range where the other ends",
            )
    for (_, high, j), (_, _, k) in itertools.pairwise(spans):
        if high is None:
            add(j, None, f"has no max but option {k + 1} starts above it: give it a max")
    return issues


def _tweak_issues(step: dict[str, Any], loc: tuple[Any, ...], marks: dict[Path_, Pos], path: str) -> list[LessonIssue]:
    """Every value a run step offers the learner must be a valid parameter of its experiment."""
    issues: list[LessonIssue] = []
    name = step.get("experiment")
    exp = experiments.REGISTRY.get(name) if isinstance(name, str) else None
    tweak, params = step.get("tweak"), step.get("params", {})
    if exp is None or not isinstance(tweak, dict) or not isinstance(params, dict):
        return issues
    names = list(exp.params.model_fields)
    for key, values in tweak.items():
        where = (*loc, "tweak", key)
        if key in exp.file_params():
            line, col = position(marks, where, at_key=True)
            issues.append(
                LessonIssue(
                    path,
                    line,
                    col,
                    f"step {step.get('id')!r} tweak: experiment {exp.name!r} "
                    f"parameter {key!r} names a file to write; a lesson may not offer it",
                )
            )
            continue
        if key not in names:
            line, col = position(marks, where, at_key=True)
            issues.append(
                LessonIssue(
                    path,
                    line,
                    col,
                    f"step {step.get('id')!r} tweak: experiment {exp.name!r} has "
                    f"no parameter {key!r}{_did_you_mean(key, names)}; it takes: {', '.join(names)}",
                )
            )
            continue
        if not isinstance(values, list) or not values:
            line, col = position(marks, where)
            issues.append(
                LessonIssue(
                    path,
                    line,
                    col,
                    f"step {step.get('id')!r} tweak {key!r}: give a list of values to offer, such as [64, 256]",
                )
            )
            continue
        if key in params and params[key] not in values:
            line, col = position(marks, (*loc, "params", key))
            issues.append(
                LessonIssue(
                    path,
                    line,
                    col,
                    f"step {step.get('id')!r}: params {key}={params[key]!r} "
                    f"is not one of the tweak values {values}; the learner could not pick it again",
                )
            )
        for j, value in enumerate(values):
            try:
                exp.make_params({**params, key: value})
            except ValidationError as e:
                msg = e.errors()[0]["msg"].removeprefix("Value error, ")
                line, col = position(marks, (*where, j))
                issues.append(
                    LessonIssue(
                        path,
                        line,
                        col,
                        f"step {step.get('id')!r} tweak {key!r}: {value!r}: {msg}{_unquoted_word(value, msg)}",
                    )
                )
    return issues


def _instrument_issues(
    step: dict[str, Any], loc: tuple[Any, ...], marks: dict[Path_, Pos], path: str, steps: list[Any]
) -> list[LessonIssue]:
    """An instrument step's names and values: the instrument, its controls, outputs and ledger."""
    issues: list[LessonIssue] = []

    def add(where: tuple[Any, ...], message: str, at_key: bool = False) -> None:
        line, col = position(marks, (*loc, *where), at_key)
        issues.append(LessonIssue(path, line, col, f"step {step.get('id')!r}: {message}"))

    name = step.get("instrument")
    if not isinstance(name, str):
        return issues
    inst = instruments.REGISTRY.get(name)
    if inst is None:
        hint = _did_you_mean(name, instruments.REGISTRY) or f"; available: {', '.join(sorted(instruments.REGISTRY))}"
        add(("instrument",), f"unknown instrument {name!r}{hint}")
        return issues
    controls = [c.name for c in inst.controls]
    for field_name in ("set", "scenario"):
        settings = step.get(field_name)
        for key, value in settings.items() if isinstance(settings, dict) else []:
            if key not in controls:
                add(
                    (field_name, key),
                    f"instrument {name!r} has no control {key!r}{_did_you_mean(key, controls)}; "
                    f"it has: {', '.join(controls)}",
                    at_key=True,
                )
                continue
            try:
                inst.control(key).parse(value)
            except instruments.SettingsError as e:
                add((field_name, key), str(e))
    fixed = step.get("fixed")
    for j, key in enumerate(fixed if isinstance(fixed, list) else []):
        if key not in controls:
            add(("fixed", j), f"fixed names no control of {name!r}: {key!r}{_did_you_mean(key, controls)}")
    goal = step.get("goal")
    if isinstance(goal, dict) and isinstance(goal.get("output"), str):
        if goal["output"] not in inst.outputs:
            add(
                ("goal", "output"),
                f"instrument {name!r} has no output {goal['output']!r}{_did_you_mean(goal['output'], inst.outputs)}",
            )
        elif (
            "equals" in goal and inst.outputs_kind.get(goal["output"]) is bool and not isinstance(goal["equals"], bool)
        ):
            add(
                ("goal", "equals"),
                f"output {goal['output']!r} is true or false: write equals: true (or false), not {goal['equals']!r}",
            )
        fixed_names = set(fixed) if isinstance(fixed, list) else set()
        if all(c in fixed_names for c in controls):
            add(("goal",), "a goal the learner cannot reach: every control is fixed")
    ledger = step.get("ledger")
    for key, expr in ledger.items() if isinstance(ledger, dict) else []:
        problem = _ledger_problem(expr, controls, list(inst.outputs), steps)
        if problem:
            add(("ledger", key), f"ledger {key!r}: {problem}")
        else:
            for other in steps:
                if other is step:
                    break
                if isinstance(other, dict) and isinstance(other.get("ledger"), dict) and key in other["ledger"]:
                    add(("ledger", key), f"ledger {key!r} is already filled by step {other.get('id')!r}", at_key=True)
    return issues


def _ledger_problem(expr: Any, controls: list[str], outputs: list[str], steps: list[Any]) -> str | None:
    if not isinstance(expr, str):
        return "expected text such as 'outputs.mfu', 'min:outputs.total_gb' or 'prediction.STEP'"
    by_id = {s["id"]: s for s in steps if isinstance(s, dict) and isinstance(s.get("id"), str)}
    kind, _, rest = expr.partition(".")
    if kind == "prediction":
        target = by_id.get(rest)
        return (
            None
            if target is not None and target.get("kind") == "predict"
            else f"no predict step {rest!r}{_did_you_mean(rest, [i for i, s in by_id.items() if s.get('kind') == 'predict'])}"
        )
    if kind == "run":
        step_id, _, metric = rest.partition(".")
        target = by_id.get(step_id)
        if target is None or target.get("kind") != "run":
            runs = [i for i, s in by_id.items() if s.get("kind") == "run"]
            return f"no run step {step_id!r}{_did_you_mean(step_id, runs)} (write run.STEP.METRIC)"
        name = target.get("experiment")
        exp = experiments.REGISTRY.get(name) if isinstance(name, str) else None
        if exp is not None and metric not in exp.metrics:
            return f"experiment {exp.name!r} has no metric {metric!r}{_did_you_mean(metric, exp.metrics)}"
        return None
    aggregate, _, ref = expr.rpartition(":")
    if aggregate and aggregate not in LEDGER_AGGREGATES:
        return f"unknown aggregate {aggregate!r}; use one of {', '.join(LEDGER_AGGREGATES)}"
    kind, _, name = ref.partition(".")
    if kind == "settings":
        return None if name in controls else f"no control {name!r}{_did_you_mean(name, controls)}"
    if kind == "outputs":
        return None if name in outputs else f"no output {name!r}{_did_you_mean(name, outputs)}"
    return f"{expr!r} should start with 'settings.', 'outputs.', 'prediction.' or 'run.'"


@functools.cache
def _step_adapter() -> TypeAdapter[Any]:
    return TypeAdapter(Step)  # built on first use: only a lesson with errors needs it


def _valid_steps(data: dict[str, Any], lesson_dir: Path | None) -> list[tuple[int, Any]]:
    """(index, step) for each step that is valid on its own, in a lesson that as a whole is not:
    its rubric and requirements are checked in the same pass as the other steps' errors."""
    steps = data.get("steps")
    valid = []
    for i, raw in enumerate(steps if isinstance(steps, list) else []):
        try:
            valid.append((i, _step_adapter().validate_python(raw, context={"lesson_dir": lesson_dir})))
        except ValidationError:
            pass  # reported by the lesson's own validation
    return valid


def _rubric_issues(
    steps: list[tuple[int, Any]], marks: dict[Path_, Pos], path: str, grade_examples: bool
) -> list[LessonIssue]:
    """Rubric phrases that cannot grade well (bad regex, a phrase that shrinks to one common word),
    and exercise requirements the checker cannot run (a regex that does not compile, an unknown probe)."""
    from tutor.checks.text import lint_rubric

    issues = []
    for i, step in steps:
        if isinstance(step, ExerciseStep):
            issues += _requirement_issues(step, i, marks, path)
            continue
        rubric = getattr(getattr(step, "answer", None), "rubric", None)
        if rubric is None:
            continue
        problems = lint_rubric(rubric)
        for problem in problems:
            line, col = position(marks, ("steps", i, "answer", "rubric"))
            issues.append(LessonIssue(path, line, col, f"step {step.id!r} rubric: {problem}"))
        if isinstance(step, CheckStep) and not problems:
            issues += _graded_example_issues(step, i, marks, path, grade_examples)
    return issues


def _graded_example_issues(
    step: CheckStep, i: int, marks: dict[Path_, Pos], path: str, grade_examples: bool
) -> list[LessonIssue]:
    """A text check whose own reference answer, or a listed right answer, its rubric rejects (or a
    listed wrong answer it accepts): the learner would be graded against the author's intent."""
    from tutor.checks import grade
    from tutor.checks.text import explain_negations

    spec = step.answer
    if not isinstance(spec, TextAnswer) or spec.rubric is None:
        return []  # only a rubric has examples to grade
    rubric = spec.rubric

    def negations(answer: str, verdict: Any) -> str:
        """Why a required idea did not count: the phrase matched, and a negation removed it."""
        said = explain_negations(answer, rubric, verdict.missing)
        return "".join(f"; {s}" for s in said)

    issues = []
    reference = spec.reference
    if reference:
        verdict = grade(reference, step.answer)
        if not verdict.correct:
            line, col = position(marks, ("steps", i, "answer", "reference"))
            issues.append(
                LessonIssue(
                    path,
                    line,
                    col,
                    f"step {step.id!r}: its reference answer fails its own "
                    f"rubric ({verdict.feedback}{negations(reference, verdict)})",
                )
            )
    if not grade_examples:
        return issues
    for kind, answers, want in (("right", step.examples.right, True), ("wrong", step.examples.wrong, False)):
        for j, answer in enumerate(answers):
            verdict = grade(answer, step.answer)
            if verdict.correct != want:
                line, col = position(marks, ("steps", i, "examples", kind, j))
                said = (
                    "rejects it" + (f" ({verdict.feedback}{negations(answer, verdict)})" if verdict.feedback else "")
                    if want
                    else "accepts it"
                )
                issues.append(
                    LessonIssue(
                        path,
                        line,
                        col,
                        f"step {step.id!r}: example {kind}[{j}] {answer!r} is listed as {kind}, but the rubric {said}",
                    )
                )
    return issues


def _requirement_issues(step: ExerciseStep, i: int, marks: dict[Path_, Pos], path: str) -> list[LessonIssue]:
    from tutor.exercises.names import BEHAVIOURS, DISTRIBUTED, INSPECT_FINDINGS, PROBES

    issues = []
    for j, req in enumerate(step.requirements):
        problem, at = None, None  # at: the key whose value is wrong, else the requirement itself
        if isinstance(req, FunctionRequirement) and req.probe not in PROBES:
            close = _did_you_mean(req.probe, PROBES)
            problem, at = (
                (f"unknown probe {req.probe!r}" + (close or f"; available: {', '.join(sorted(PROBES))}")),
                "probe",
            )
        elif isinstance(req, FunctionRequirement) and step.launch is not None:
            problem = (
                "a function probe calls the learner's function in one process; a step with launch runs "
                "several (judge them with behaviour checks)"
            )
        elif isinstance(req, BehaviourRequirement) and req.check not in BEHAVIOURS:
            close = _did_you_mean(req.check, BEHAVIOURS)
            problem, at = (
                (f"unknown behaviour check {req.check!r}" + (close or f"; available: {', '.join(sorted(BEHAVIOURS))}")),
                "check",
            )
        elif isinstance(req, BehaviourRequirement) and req.check in DISTRIBUTED and step.launch is None:
            problem = (
                f"behaviour check {req.check!r} compares the processes of a torchrun launch: give the step "
                "launch: {nproc: 2}"
            )
        elif isinstance(req, InspectRequirement) and req.finding is not None and req.finding not in INSPECT_FINDINGS:
            close = _did_you_mean(req.finding, INSPECT_FINDINGS)
            problem, at = (
                (f"unknown finding {req.finding!r}" + (close or f"; available: {', '.join(sorted(INSPECT_FINDINGS))}")),
                "finding",
            )
        elif isinstance(req, InspectRequirement) and req.finding is None and req.min_speedup is None:
            problem = "an inspect requirement needs a finding that must be gone, a min_speedup, or both"
        elif isinstance(req, InspectRequirement) and step.launch is not None:
            problem = "gpututor inspect watches one process; a step with launch runs several"
        elif isinstance(req, PythonRequirement):
            found = _grader_issue(req, path)
            if isinstance(found, LessonIssue):  # the grader file itself does not parse: point into it
                issues.append(found)
                continue
            if found:
                line, col = position(marks, ("steps", i, "requirements", j, "grader"))
                issues.append(LessonIssue(path, line, col, f"step {step.id!r} requirement {req.id!r}: {found}"))
            continue
        elif isinstance(req, (OutputRequirement, SourceRequirement, ErrorRequirement)):
            try:
                re.compile(req.pattern)
            except re.error as e:
                problem, at = f"pattern does not compile: {e}", "pattern"
        if problem:
            line, col = position(marks, ("steps", i, "requirements", j, *([at] if at else [])))
            issues.append(LessonIssue(path, line, col, f"step {step.id!r} requirement {req.id!r}: {problem}"))
    ids = [m.fails for m in step.mistakes]
    known = {r.id for r in step.requirements}
    for j, fails in enumerate(ids):
        if fails not in known:
            line, col = position(marks, ("steps", i, "mistakes", j))
            issues.append(
                LessonIssue(
                    path,
                    line,
                    col,
                    f"step {step.id!r} mistake fails {fails!r}, which is not one "
                    f"of its requirements: {', '.join(sorted(known))}",
                )
            )
    return issues


def _number_warnings(lesson: Lesson, marks: dict[Path_, Pos], path: str) -> list[LessonIssue]:
    """Number checks that grade differently from how they read: a default tolerance on a whole
    number (235 steps accepts 211.5 to 258.5), a band the accepted interval or earlier bands
    swallow (its feedback is never shown)."""
    from tutor.checks.number import accepted_interval, band_reach, tolerance_said

    issues = []

    def warn(loc: tuple[Any, ...], message: str) -> None:
        line, col = position(marks, loc)
        issues.append(LessonIssue(path, line, col, message, "warning"))

    for i, step in enumerate(lesson.steps):
        spec = getattr(step, "answer", None)
        if not isinstance(step, CheckStep) or not isinstance(spec, NumberAnswer):
            continue
        target = spec.value
        defaulted = not {"tolerance", "abs_tolerance"} & spec.model_fields_set
        if target is not None:
            lo, hi = accepted_interval(spec, target)
            if defaulted and float(target).is_integer() and target != 0:
                warn(
                    ("steps", i, "answer", "value"),
                    f"step {step.id!r}: no tolerance given, so the default 10% applies to {target:g}: every "
                    f"answer from {lo:g} to {hi:g} is graded right. For a count, write abs_tolerance: 0 (exact) "
                    "or the tolerance you mean.",
                )
        for reach in band_reach(spec, target):
            band = spec.ranges[reach.index]
            shown = f"{'' if band.min is None else f'{band.min:g}'}..{'' if band.max is None else f'{band.max:g}'}"
            where = ("steps", i, "answer", "ranges", reach.index)
            if reach.example is None:
                warn(
                    where,
                    f"step {step.id!r}: range {reach.index + 1} ({shown}) is never reached, so its "
                    f"feedback is never shown: {reach.why}",
                )
            elif target is not None and not band.correct:
                b_lo = -math.inf if band.min is None else band.min
                b_hi = math.inf if band.max is None else band.max
                if b_lo <= hi and lo <= b_hi:
                    warn(
                        where,
                        f"step {step.id!r}: range {reach.index + 1} ({shown}) overlaps the answers graded "
                        f"right ({lo:g} to {hi:g}, {tolerance_said(spec)} of {target:g}): from "
                        f"{max(lo, b_lo):g} to {min(hi, b_hi):g} its feedback is never shown",
                    )
    return issues


def lint_text(text: str, path: str = "<lesson>", *, grade_examples: bool = False) -> tuple[Lesson, list[LessonIssue]]:
    """The lesson and its warnings (see `load_text`, which raises on errors the same way)."""
    lesson, marks = _load(text, path, grade_examples=grade_examples)
    return lesson, _number_warnings(lesson, marks, path) + _concept_warnings(lesson, marks, path)


def _concept_warnings(lesson: Lesson, marks: dict[Path_, Pos], path: str) -> list[LessonIssue]:
    """A concept the prediction profile never counts: it scores a number, or a choice whose
    options carry min/max, against the metric `compare` names (tutor/course/profile.py)."""
    issues = []
    for i, step in enumerate(lesson.steps):
        if not isinstance(step, PredictStep) or step.concept is None:
            continue
        spec = step.answer
        quantity = isinstance(spec, NumberAnswer) or (
            isinstance(spec, ChoiceAnswer) and any(o.min is not None or o.max is not None for o in spec.options)
        )
        if not (step.compare and quantity):
            line, col = position(marks, ("steps", i, "concept"))
            issues.append(
                LessonIssue(
                    path,
                    line,
                    col,
                    f"step {step.id!r}: concept {step.concept!r} is never counted "
                    "in the prediction profile, which scores only a number, or a choice whose "
                    "options carry min/max, against the metric compare names",
                    "warning",
                )
            )
    return issues


def _grader_issue(req: PythonRequirement, path: str) -> str | LessonIssue | None:
    """A python requirement's grader read, not run (loading a lesson runs no code): the file
    exists and defines the function at its top level, taking the one argument it is called with."""
    where = req.grader_path()
    if where is None:
        return "a grader is found beside the lesson file, and this lesson was not loaded from one"
    if not where.is_file():
        return f"grader file {req.grader_file!r} not found beside the lesson (looked for {where})"
    shown = str(Path(path).parent / req.grader_file)
    try:
        tree = ast.parse(where.read_bytes(), filename=shown)
    except SyntaxError as e:
        return LessonIssue(
            shown, e.lineno or 1, e.offset or 1, f"SyntaxError: {e.msg} (the grader of requirement {req.id!r})"
        )
    except (OSError, ValueError) as e:
        return f"grader file {req.grader_file!r} cannot be read: {e}"
    defined: dict[str, ast.AST] = {}

    def collect(nodes: list[ast.stmt]) -> None:  # top-level names, also under if/try
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined[node.name] = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            defined[name.id] = node
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    defined[(alias.asname or alias.name).split(".")[0]] = node
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for block in ("body", "orelse", "finalbody"):
                    collect(getattr(node, block, []))
                for handler in getattr(node, "handlers", []):
                    collect(handler.body)

    collect(tree.body)
    name = req.grader_function
    node = defined.get(name)
    if node is None:
        functions = [n for n, d in defined.items() if isinstance(d, ast.FunctionDef)]
        hint = _did_you_mean(name, defined) or (f"; it defines: {', '.join(functions)}" if functions else "")
        return f"{req.grader_file} defines no function {name!r}{hint}"
    if isinstance(node, ast.AsyncFunctionDef):
        return f"{name} in {req.grader_file} is async; a grader is a plain function"
    if isinstance(node, ast.FunctionDef):
        args = node.args
        positional = len(args.posonlyargs) + len(args.args)
        required = positional - len(args.defaults) + sum(d is None for d in args.kw_defaults)
        if (positional == 0 and args.vararg is None) or required > 1:
            return (
                f"{name} in {req.grader_file} (line {node.lineno}) must take one argument, the learner's run: "
                f"def {name}(run):"
            )
    return None


def load_text(text: str, path: str = "<lesson>", *, grade_examples: bool = False) -> Lesson:
    """Parse and validate one lesson; raise LessonError listing every problem found, in file order.

    grade_examples: also grade every check's listed right and wrong answers (lint does; the TUI
    skips it at start-up, where it would cost tens of milliseconds)."""
    return _load(text, path, grade_examples=grade_examples)[0]


def _load(text: str, path: str, *, grade_examples: bool) -> tuple[Lesson, dict[Path_, Pos]]:
    parsed = parse(text, path)
    data, marks = parsed.data, parsed.marks
    if not isinstance(data, dict):
        raise LessonError([LessonIssue(path, 1, 1, "a lesson file must be a mapping with id, title and steps")])
    issues = [
        LessonIssue(path, pos[0], pos[1], f"duplicate key {key!r} (first at line {first}); YAML keeps only the last")
        for pos, key, first in parsed.duplicate_keys
    ]
    issues += [
        LessonIssue(
            path,
            pos[0],
            pos[1],
            f"YAML tag '{tag.replace('tag:yaml.org,2002:', '!!')}' is not "
            "allowed: a lesson holds plain text, numbers, lists and mappings",
        )
        for pos, tag in parsed.tags
    ]
    issues += [
        LessonIssue(
            path,
            pos[0],
            pos[1],
            f"control character {char!r} in this text: it would reach the "
            "learner's terminal as it is (an escape sequence can clear the screen); remove it",
        )
        for pos, char in parsed.controls
    ]
    issues += _duplicate_step_ids(data, marks, path)
    issues += _semantic_issues(data, marks, path)
    lesson = None
    # A python requirement's grader file is found beside the lesson file ("<lesson>": no file).
    lesson_dir = None if path.startswith("<") else Path(path).resolve().parent
    try:
        lesson = Lesson.model_validate(data, context={"lesson_dir": lesson_dir})
    except ValidationError as e:
        issues += _schema_issues(e, data, marks, path)
    steps = list(enumerate(lesson.steps)) if lesson is not None else _valid_steps(data, lesson_dir)
    issues += _rubric_issues(steps, marks, path, grade_examples)
    if issues or lesson is None:
        raise LessonError(sorted(_dedupe(issues), key=lambda i: (i.line, i.col)))
    return lesson, marks


def _dedupe(issues: list[LessonIssue]) -> list[LessonIssue]:
    seen: set[tuple[int, int, str]] = set()
    out = []
    for i in issues:
        key = (i.line, i.col, i.message)
        if key not in seen:
            seen.add(key)
            out.append(i)
    return out


def load_file(path: str | Path, *, grade_examples: bool = False) -> Lesson:
    return load_text(_read_text(path), str(path), grade_examples=grade_examples)


def lint_file(path: str | Path, *, grade_examples: bool = True) -> tuple[Lesson, list[LessonIssue]]:
    """The lesson and its warnings; raises LessonError like `load_file`."""
    return lint_text(_read_text(path), str(path), grade_examples=grade_examples)


def _read_text(path: str | Path) -> str:
    """A lesson file's text, or LessonError saying why it cannot be one."""
    p = Path(path)
    shown = str(path)
    try:
        raw = p.read_bytes()
    except IsADirectoryError:
        raise LessonError([LessonIssue(shown, 1, 1, "is a directory, not a lesson file")]) from None
    except OSError as e:
        raise LessonError([LessonIssue(shown, 1, 1, f"cannot read file: {e.strerror or e}")]) from None
    if len(raw) > MAX_FILE_BYTES:
        raise LessonError([LessonIssue(shown, 1, 1, f"file too large ({len(raw)} bytes; limit {MAX_FILE_BYTES})")])
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise LessonError([LessonIssue(shown, 1, 1, "UTF-16 text: save the lesson file as UTF-8")])
    if b"\x00" in raw:
        raise LessonError([LessonIssue(shown, 1, 1, "binary file: a lesson must be UTF-8 YAML text")])
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line_start = raw.rfind(b"\n", 0, e.start) + 1
        line = raw[: e.start].count(b"\n") + 1
        col = len(raw[line_start : e.start].decode("utf-8", errors="replace")) + 1
        raise LessonError(
            [
                LessonIssue(
                    shown, line, col, f"not UTF-8 text (byte 0x{raw[e.start]:02x}): save the lesson file as UTF-8"
                )
            ]
        ) from None
    return text

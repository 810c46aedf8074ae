"""YAML with positions: a lesson file parsed safely (PyYAML's safe loader only), with the line and
column of every key and value, so each problem can be pointed at."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml

from tutor.course.lesson import MAX_NODES, LessonError, LessonIssue

Pos = tuple[int, int]
Path_ = tuple[str | int, ...]
KEY = "__key__"  # marks[(*path, key, KEY)] is where a mapping key is written; marks[path] its value


class _Budget(Exception):
    pass


@dataclass
class _Parsed:
    data: Any
    marks: dict[Path_, Pos]
    duplicate_keys: list[tuple[Pos, str, int]]  # (where, key, line of the first one)
    tags: list[tuple[Pos, str]] = field(default_factory=list)  # (where, tag): `!!python/...`, `!custom`
    controls: list[tuple[Pos, str]] = field(default_factory=list)  # (where, character): "\x1b" in a string


# Control characters (a YAML escape such as "\e" makes them) would reach the learner's terminal
# as they are: an escape sequence can clear the screen, retitle the window or fake a link.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

# What YAML resolves plain values to (a date included); any other tag was written on purpose.
_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp")}


def _to_python(node: yaml.Node, where: Path_, parsed: _Parsed, budget: list[int]) -> Any:
    """Construct plain Python from a composed YAML node, recording each value's position."""
    budget[0] -= 1
    if budget[0] < 0:
        raise _Budget
    marks = parsed.marks
    marks[where] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if node.tag not in _PLAIN_TAGS:
        parsed.tags.append((marks[where], node.tag))
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _scalar(key_node) if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            key = str(key) if not isinstance(key, str) else key
            key_pos = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if key in out:
                # PyYAML silently keeps the last of two equal keys; an instructor wants to know.
                parsed.duplicate_keys.append((key_pos, key, marks[(*where, key, KEY)][0]))
            marks[(*where, key, KEY)] = key_pos
            out[key] = _to_python(value_node, (*where, key), parsed, budget)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_to_python(v, (*where, i), parsed, budget) for i, v in enumerate(node.value)]
    assert isinstance(node, yaml.ScalarNode)  # YAML's nodes are mappings, sequences and scalars
    value = _scalar(node)
    if isinstance(value, str) and (bad := _CONTROL.search(value)):
        parsed.controls.append((marks[where], bad.group()))
    return value


_constructor = yaml.constructor.SafeConstructor()


# YAML 1.2 reads a plain 1e12 or 1e-9 as a number; PyYAML (YAML 1.1) wants a dot ("1.0e12")
# and would hand back a string. Editors validating against `gpututor schema` read 1.2.
_FLOAT_1_2 = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def _scalar(node: yaml.ScalarNode) -> Any:
    if node.tag == "tag:yaml.org,2002:str" and not node.style and _FLOAT_1_2.fullmatch(node.value):
        return float(node.value)
    try:
        return _constructor.construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError):  # ValueError: an int of more than 4300 digits
        return node.value


# PyYAML's messages name the parser state; these say what to fix.
_YAML_HINTS = [
    ("'\\t'", "tabs cannot indent YAML: use spaces"),
    (
        "mapping values are not allowed here",
        "check this line's indentation, or put a value that contains ': ' in quotes",
    ),
    ("expected <block end>", "check the indentation: this line does not line up with the lines above it"),
    ("could not find expected ':'", "a key needs a colon after it (or put the text in quotes)"),
    ("did not find expected key", "check the indentation of this line and the one above it"),
    ("did not find expected '-' indicator", "list items must line up under each other"),
    ("found character '@' that cannot start any token", "put a value that starts with @ in quotes"),
    ("found character '`' that cannot start any token", "put a value that starts with ` in quotes"),
]


# PyYAML's words for a line that lines up with no block above it ("expected <block end>, but
# found '?'"): said instead by the columns the line could start at (_misaligned).
_MISALIGNED = ("expected <block end>", "did not find expected key", "did not find expected '-' indicator")


def _open_columns(lines: list[str], row: int) -> dict[int, str]:
    """The 1-based columns a line after lines[:row] may start at, each "key" or "item" (a list's
    '- '): those of the line above, then of each less indented line above that, as YAML nests."""
    columns: dict[int, str] = {}
    limit = None
    for line in reversed(lines[:row]):
        body = line.lstrip(" ")
        if not body.strip() or body.startswith("#"):
            continue
        indent = len(line) - len(body)
        if limit is not None and indent >= limit:
            continue
        start = indent
        for item in re.finditer(r"-(?: +|$)", body):  # "- - key": each item's content starts a block
            if body[: item.start()].strip("- "):
                break
            columns.setdefault(start + 1, "item")
            start = indent + item.end()
        columns.setdefault(start + 1, "key")
        limit = indent
        if indent == 0:
            break
    return dict(sorted(columns.items()))


def _said(columns: list[int]) -> str:
    return (
        f"column {columns[0]}" if len(columns) == 1 else f"columns {', '.join(map(str, columns[:-1]))} or {columns[-1]}"
    )


def _misaligned(text: str, row: int) -> tuple[Pos, str] | None:
    """Where a line that lines up with no block above it starts, and what to do, in plain
    words; None when that is not the trouble (a tab: PyYAML's words, with their hint)."""
    lines = text.splitlines()
    if not 0 <= row < len(lines) or "\t" in lines[row][: len(lines[row]) - len(lines[row].lstrip())]:
        return None
    col = len(lines[row]) - len(lines[row].lstrip(" ")) + 1
    columns = _open_columns(lines, row)
    keys = [c for c, kind in columns.items() if kind == "key" and c != col]
    if columns.get(col) == "item" and not lines[row].lstrip(" ").startswith("-"):
        return (row + 1, col), (
            f"bad indentation: this line starts at column {col}, where the '- ' items of a "
            "list start: begin a new item with '- '"
            + (f", or line it up with the keys above it ({_said(keys)})" if keys else "")
        )
    if col in columns or not columns:
        return None
    return (row + 1, col), (
        f"bad indentation: this line starts at column {col}, which lines up with no line above "
        f"it (they start at {_said(list(columns))}): line it up with the keys of the mapping it "
        "belongs to, or with the '- ' of its list"
    )


def _deeper_than_above(text: str, row: int) -> tuple[Pos, str] | None:
    """A key on a line indented deeper than the key above it ("mapping values are not allowed
    here"): YAML read the line as more of the text above, where ': ' cannot be."""
    lines = text.splitlines()
    above = next((line for line in reversed(lines[:row]) if line.strip() and not line.lstrip().startswith("#")), None)
    if not 0 <= row < len(lines) or above is None:
        return None
    col = len(lines[row]) - len(lines[row].lstrip(" ")) + 1
    keys = [c for c, kind in _open_columns(lines, row).items() if kind == "key"]
    if not keys or col <= keys[-1] or ":" not in above:
        return None
    return (row + 1, col), (
        f"bad indentation: this line starts at column {col}, deeper than the key above it "
        f"(column {keys[-1]}), so YAML reads it as more of that key's text, and ': ' inside a "
        f"text needs quotes: line it up with the keys above it ({_said(keys)}), or quote the text"
    )


def _yaml_issue(e: yaml.MarkedYAMLError, path: str, text: str = "") -> LessonIssue:
    problem, context = e.problem or "", e.context or ""
    mark = e.problem_mark or e.context_mark
    said = f"{context} {problem}"
    plain = None
    if mark and any(m in said for m in _MISALIGNED):
        plain = _misaligned(text, mark.line)
    elif mark and "mapping values are not allowed here" in said:
        plain = _deeper_than_above(text, mark.line)
    if plain is not None:
        (line, col), msg = plain
        return LessonIssue(path, line, col, f"YAML syntax: {msg}")
    if "end of stream" in problem and "quoted scalar" in context and e.context_mark is not None:
        # The end of the file is not where the mistake is: the quote that never closes is.
        mark, msg = e.context_mark, "this quoted string is never closed"
    else:
        msg = " ".join(x for x in (context, problem) if x) or "invalid YAML"
        hint = next((h for needle, h in _YAML_HINTS if needle in msg), "")
        if hint:
            msg = f"{msg} ({hint})"
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    return LessonIssue(path, line, col, f"YAML syntax: {msg}")


_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: 20x faster, same marks


_BRACKETS = re.compile(r"[\[\]{}]")
_LEAD = re.compile(r"^[ \t]*((?:[-?][ \t]+)*)", re.MULTILINE)
DEEP = 200  # nesting beyond this goes to the pure-Python loader


def _nests_deeply(text: str) -> bool:
    """libyaml composes in C, one stack frame per level, and crashes the process (SIGSEGV)
    some 25,000 levels down; the pure-Python loader raises RecursionError, which lint reports.
    Nesting comes from open brackets, runs of '- ' or '? ' and indentation: an estimate."""
    depth = 0
    for m in _BRACKETS.finditer(text):
        depth = depth + 1 if m.group() in "[{" else max(0, depth - 1)
        if depth > DEEP:
            return True
    return any(len(m.group(0)) > 10 * DEEP or len(m.group(1)) > 2 * DEEP for m in _LEAD.finditer(text))


def _compose(text: str) -> yaml.Node | None:
    """Compose with libyaml when it is there; a broken file is parsed again by the pure-Python
    loader, whose error messages (and positions) are the ones lint reports."""
    if _nests_deeply(text):
        return yaml.compose(text, Loader=yaml.SafeLoader)
    try:
        return yaml.compose(text, Loader=_FAST_LOADER)
    except yaml.YAMLError:
        if _FAST_LOADER is yaml.SafeLoader:
            raise
    return yaml.compose(text, Loader=yaml.SafeLoader)


def parse(text: str, path: str) -> _Parsed:
    try:
        node = _compose(text)
    except yaml.MarkedYAMLError as e:
        raise LessonError([_yaml_issue(e, path, text)]) from None
    except yaml.YAMLError as e:
        raise LessonError([LessonIssue(path, 1, 1, f"YAML: {e}")]) from None
    except RecursionError:
        raise LessonError([LessonIssue(path, 1, 1, "YAML nested too deeply")]) from None
    if node is None:
        raise LessonError([LessonIssue(path, 1, 1, "empty file: a lesson needs id, title and steps")])
    parsed = _Parsed(None, {}, [])
    try:
        parsed.data = _to_python(node, (), parsed, [MAX_NODES])
    except _Budget:
        raise LessonError(
            [LessonIssue(path, 1, 1, f"document too large (more than {MAX_NODES} values, or an alias bomb)")]
        ) from None
    except RecursionError:
        raise LessonError([LessonIssue(path, 1, 1, "YAML nested too deeply")]) from None
    return parsed


def parse_yaml(text: str, path: str) -> tuple[Any, dict[Path_, Pos]]:
    """Parse one YAML document safely: (data, positions); raise LessonError with positions on failure.

    positions[path] is the (line, col) of the value at `path` (a tuple of keys and indexes);
    positions[(*path, "__key__")] is where a mapping key itself is written.
    """
    parsed = parse(text, path)
    return parsed.data, parsed.marks


def position(marks: dict[Path_, Pos], loc: Iterable[Any], at_key: bool = False) -> Pos:
    """Where to point for a location: the value there (or its key, with at_key), else the
    deepest enclosing value that exists (a missing key points at the mapping it belongs in)."""
    loc = tuple(loc)
    if at_key and (*loc, KEY) in marks:
        return marks[(*loc, KEY)]
    for n in range(len(loc), -1, -1):
        if loc[:n] in marks:
            return marks[loc[:n]]
    return (1, 1)

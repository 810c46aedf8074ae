"""What every instrument is made of: controls in, a Reading out.

An instrument is a calculator a lesson embeds: the learner moves controls, the
instrument recomputes its outputs from formulas at once, and shows them as a chart,
figures, and the formulas themselves with the numbers put in ("math peek"). Pure
Python: no torch, no Textual, so the TUI, `gpututor instrument --json` and the tests
compute exactly the same thing.

Memory is labelled in GB (10^9 bytes) everywhere; GiB (2^30 bytes) appears only beside
it, and always named, because GPU memory is sold in GiB and written "GB".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

GB = 10**9
GIB = 2**30


class SettingsError(ValueError):
    """A control value the instrument does not accept; the message says which values it does."""


def _sig3(value: float) -> str:
    value = float(f"{value:.3g}")  # round first, so 9.9996 is "10.0", not "10.00"
    digits = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:,.{digits}f}"


def gb(n: float) -> str:
    """Bytes in decimal units, three significant figures: '6.00 GB', '90.1 GB', '51.4 MB', '2.80 TB'."""
    if n == 0:
        return "0 GB"
    for unit, size in (("TB", 10**12), ("GB", GB), ("MB", 10**6), ("kB", 10**3)):
        if abs(float(f"{n:.3g}")) >= size:  # 999.96 MB rounds to 1.00 GB, not "1,000 MB"
            return f"{_sig3(n / size)} {unit}"
    return f"{n:,.0f} B"


def gb_gib(n: float) -> str:
    """'85.9 GB (80.0 GiB)': both units, each named (MB and MiB below a GiB)."""
    if abs(n) >= GIB:
        return f"{gb(n)} ({n / GIB:,.1f} GiB)"
    return f"{gb(n)} ({n / 2**20:,.1f} MiB)"


def percent(share: float) -> str:
    return f"{share * 100:.0f}%"


# ---------------------------------------------------------------- controls


def _brief(raw: Any, limit: int = 60) -> str:
    """A value the user gave, quoted in an error: a page of text is not repeated back."""
    text = repr(raw) if isinstance(raw, str) else repr(str(raw))
    return text if len(text) <= limit else text[: limit - 2] + "…'"


@dataclass(frozen=True)
class Control:
    """One input. `choice` and `toggle` take one of `options`; a `stepper` takes any number
    from its first to its last option (a whole number unless an option is a float: a price, a
    rate), and its keys step through the options."""

    name: str
    label: str
    kind: Literal["choice", "toggle", "stepper"]
    options: tuple[Any, ...]
    default: Any
    labels: tuple[str, ...] = ()  # shown instead of the raw option values
    help: str = ""
    fmt: str = ""  # how a stepper's value without a label is shown: "{:,} W", "${:,.2f} per GPU-hour"
    # The only outputs this control can change (empty: any). A goal on another output is searched
    # without it, so a what-if or a price does not multiply `lesson test`'s search; a test checks it.
    affects: tuple[str, ...] = ()

    @property
    def decimal(self) -> bool:
        """A stepper over real numbers (a price, a rate), not whole ones."""
        return self.kind == "stepper" and any(isinstance(o, float) for o in self.options)

    def label_of(self, value: Any) -> str:
        if self.kind == "toggle":
            return "on" if value else "off"
        if value in self.options and self.labels:
            return self.labels[self.options.index(value)]
        if self.fmt:
            return self.fmt.format(value)
        return f"{value:,}" if isinstance(value, int) else str(value)

    def parse(self, raw: Any) -> Any:
        """A value from YAML or the command line ('on', 'adam', '16') -> the option it means."""
        text = str(raw).strip().lower()
        if self.kind == "toggle":
            if isinstance(raw, bool):
                return raw
            if text in ("on", "true", "yes", "1"):
                return True
            if text in ("off", "false", "no", "0"):
                return False
            raise SettingsError(f"{self.name}: expected on or off, got {_brief(raw)}")
        if self.kind == "stepper" and self.decimal:
            return self._parse_decimal(raw)
        if self.kind == "stepper":
            digits = str(raw).replace(",", "").replace("_", "")
            try:
                value = int(digits) if len(digits) <= 30 else None
            except ValueError:
                value = None
            lo, hi = self.options[0], self.options[-1]
            if value is None and len(digits) > 30 and digits.lstrip("+-").isdigit():
                raise SettingsError(f"{self.name}: {_brief(raw)} is outside {lo}..{hi}")
            if value is None:
                raise SettingsError(f"{self.name}: expected a whole number, got {_brief(raw)}")
            if not lo <= value <= hi:
                raise SettingsError(f"{self.name}: {value} is outside {lo}..{hi}")
            return value
        for option in self.options:
            if text == str(option).lower():
                return option
        raise SettingsError(f"{self.name}: {_brief(raw)} is not one of {', '.join(map(str, self.options))}")

    def _parse_decimal(self, raw: Any) -> float:
        """'2.5', '$2.50', 3 -> a float within the stepper's range (no nan, no infinity)."""
        text = str(raw).strip().replace(",", "").replace("_", "").removeprefix("$")
        try:
            value = float(text) if len(text) <= 30 and not isinstance(raw, bool) else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise SettingsError(f"{self.name}: expected a number, got {_brief(raw)}")
        lo, hi = self.options[0], self.options[-1]
        if not lo <= value <= hi:
            raise SettingsError(f"{self.name}: {value:g} is outside {lo:g}..{hi:g}")
        return value

    def step(self, value: Any, direction: int) -> Any:
        """The next option to the left (-1) or right (+1); toggles flip; ends stay put."""
        if self.kind == "toggle":
            return not value
        if self.kind == "stepper":
            if direction > 0:
                return next((o for o in self.options if o > value), value)
            return next((o for o in reversed(self.options) if o < value), value)
        i = self.options.index(value) if value in self.options else 0
        return self.options[max(0, min(len(self.options) - 1, i + direction))]


# ---------------------------------------------------------------- outputs


@dataclass(frozen=True)
class Segment:
    name: str
    value: float  # bytes, seconds or a share, as the chart's unit says
    style: str  # a Rich colour
    off: bool = False  # switched off by the learner: named in the legend, not drawn or added up


@dataclass(frozen=True)
class Bar:
    label: str
    segments: tuple[Segment, ...]

    @property
    def total(self) -> float:
        """What the bar draws: the segments switched on."""
        return sum(s.value for s in self.segments if not s.off)


@dataclass(frozen=True)
class Chart:
    unit: Literal["bytes", "share"]
    bars: tuple[Bar, ...]
    limit: float | None = None  # a budget line (bytes)
    limit_label: str = ""


@dataclass(frozen=True)
class Gauge:
    label: str
    value: float | None  # 0..1
    marks: tuple[tuple[str, float], ...] = ()  # reference points on the same scale


@dataclass(frozen=True)
class Reading:
    """What an instrument computed for one set of control values."""

    outputs: dict[str, Any]  # plain JSON values: what --json prints and predictions compare with
    chart: Chart
    verdict: str
    level: Literal["ok", "warning", "error"] = "ok"
    figures: tuple[tuple[str, str], ...] = ()  # (label, value) lines under the chart
    gauge: Gauge | None = None
    math: tuple[str, ...] = ()  # the formulas with this reading's numbers in them
    reference: tuple[str, ...] = ()  # the course's figures, labelled as such
    notes: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()  # controls that do not affect this reading (hidden in the TUI)


@dataclass
class Context:
    """What an instrument may know about this learner and machine (all optional)."""

    device_name: str | None = None
    device_memory: int | None = None  # bytes of the device training would use here
    my_model: dict[str, Any] | None = None  # from the latest memory-ledger run
    my_pipeline: dict[str, Any] | None = None  # from the latest pipeline-breakdown run


class Instrument:
    name: str = ""
    title: str = ""
    summary: str = ""
    controls: tuple[Control, ...] = ()
    outputs: dict[str, str] = {}  # name -> what it is (units in the text)
    outputs_kind: dict[str, type] = {}  # outputs that are not numbers (for lint: a goal's `equals`)

    def control(self, name: str) -> Control:
        for c in self.controls:
            if c.name == name:
                return c
        raise SettingsError(f"{self.name} has no control {name!r}; it has: {', '.join(c.name for c in self.controls)}")

    def defaults(self) -> dict[str, Any]:
        return {c.name: c.default for c in self.controls}

    def settings(self, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Defaults overridden by `given` (raw values are parsed); SettingsError names a bad one."""
        out = self.defaults()
        for name, raw in (given or {}).items():
            out[name] = self.control(name).parse(raw)
        return out

    def compute(self, settings: Mapping[str, Any], context: Context | None = None) -> Reading:
        raise NotImplementedError

    def compute_outputs(self, settings: Mapping[str, Any], context: Context | None = None) -> dict[str, Any]:
        """compute(...).outputs, without the words: what a search over many settings needs
        (`gpututor lesson test` looking for a goal's fewest moves). An instrument may do it faster."""
        return self.compute(settings, context).outputs

    def needs_context(self, settings: Mapping[str, Any]) -> bool:
        """Whether these settings read the learner's runs or this device (else: arithmetic only)."""
        return False

    def describe(self, settings: Mapping[str, Any]) -> str:
        """'prefetching on, precision mixed (FP16/BF16 autocast)': some control values in words."""
        parts = []
        for name, raw in settings.items():
            control = self.control(name)
            parts.append(f"{control.label.lower()} {control.label_of(control.parse(raw))}")
        return ", ".join(parts)

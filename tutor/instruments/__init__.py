"""Instruments: interactive calculators a lesson's `instrument` step embeds.

Each one turns control values into a Reading (outputs, a chart, the formulas with the
numbers in). Pure Python and instant, so the TUI recomputes on every key press and
`gpututor instrument NAME --set k=v --json` prints exactly what the TUI shows.
"""

from __future__ import annotations

from tutor.instruments.instrument import Context, Control, Instrument, Reading, SettingsError
from tutor.instruments.memory_ledger import MemoryLedger
from tutor.instruments.pipeline import Pipeline

REGISTRY: dict[str, Instrument] = {i.name: i for i in (MemoryLedger(), Pipeline())}

__all__ = ["REGISTRY", "Context", "Control", "Instrument", "Reading", "SettingsError"]

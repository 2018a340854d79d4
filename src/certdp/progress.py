"""Progress of long runs: every engine reports through one callback type.

A callback receives :class:`ProgressEvent` objects: ``stage`` names the step ('round',
'component', 'lambda', 'phase', 'user', ...), ``message`` is one line for a person, and
``record`` holds the step's numbers (bounds, gap, seconds) for programs that plot or log them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping


@dataclass(frozen=True)
class ProgressEvent:
    """One step of a long run."""

    stage: str
    message: str
    record: Mapping[str, Any] = field(default_factory=dict)


Progress = Callable[[ProgressEvent], None]


def report(progress: Progress | None, stage: str, message: str, record: Mapping[str, Any] | None = None) -> None:
    """Send one event to ``progress`` (nothing when it is None)."""
    if progress is not None:
        progress(ProgressEvent(stage, message, dict(record or {})))


def bounds_line(word: str, rec: Mapping[str, Any], counter: str, what: str) -> str:
    """The one-line message of a decomposition round: bounds, gap and a counter."""
    return (f"{word} {rec['iteration']}: lower {rec['lower_bound']:.6g}, upper {rec['upper_bound']:.6g}, "
            f"gap {rec['gap']:.3g}, {what} {rec.get(counter, '?')}")

"""certdp: privacy mechanisms that are optimal and still scale.

The one entry per job: :func:`solve` computes a mechanism for a :class:`Space` (built from a
dataset by :func:`build_space`), :func:`verify` and :func:`certdp.audit.audit_file` check one
exactly, :func:`certdp.views.build_view` builds a private view of a table, and
:func:`certdp.lrgeo.protocol.run_round` runs one LR-Geo round. docs/architecture.md shows
where everything lives.
"""

from .audit import verify
from .certify import certify
from .datasets import build_space, parse_dataset
from .graph import MDPGraph
from .lp.outcome import SolverLimitError, Status
from .measures import expected_loss, quantile_loss, worst_case_loss
from .mechanism import Mechanism, SolveResult
from .progress import ProgressEvent
from .solve import METHODS, solve
from .space import Space

__version__ = "0.2.0"

__all__ = [
    "METHODS", "MDPGraph", "Mechanism", "ProgressEvent", "SolveResult", "SolverLimitError", "Space", "Status",
    "build_space", "certify", "expected_loss", "parse_dataset", "quantile_loss", "solve", "verify", "worst_case_loss",
]

"""certdp: privacy mechanisms that are optimal and still scale.

The one entry per job: :func:`solve` computes a mechanism for a :class:`Space` (built from a
dataset by :func:`build_space`), :func:`verify` and :func:`certdp.audit.audit_file` check one
exactly, :func:`certdp.views.build_view` builds a private view of a table, and
:func:`certdp.lrgeo.protocol.run_round` runs one LR-Geo round. docs/architecture.md shows
where everything lives.

The names below are imported when first used (PEP 562), so that ``import certdp`` costs
nothing until then: the ``certdp`` command answers Ctrl-C from its first milliseconds
(:mod:`certdp.cli.interrupt`), which it can only do once its own code runs.
"""

from __future__ import annotations

import importlib
import sys
import types

TYPE_CHECKING = False       # typing.TYPE_CHECKING, without importing typing at start-up

__version__ = "0.2.0"

_EXPORTS = {
    "METHODS": "solve", "MDPGraph": "graph", "Mechanism": "mechanism", "ProgressEvent": "progress",
    "SolveResult": "mechanism", "SolverLimitError": "lp.outcome", "Space": "space", "Status": "lp.outcome", "build_space": "datasets",
    "certify": "certify", "expected_loss": "measures", "parse_dataset": "datasets", "quantile_loss": "measures",
    "solve": "solve", "verify": "audit", "worst_case_loss": "measures",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
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


class _Package(types.ModuleType):
    """The package's module: an exported name is imported from its module on first use, and so
    is a subpackage named as an attribute (``certdp.views``). Two
    exports share their name with the module that defines them (``solve``, ``certify``); the
    import system binds such a module to the package when it loads it, and the package keeps
    the function instead, as ``from .solve import solve`` would."""

    def __getattr__(self, name: str) -> object:
        if name not in _EXPORTS:        # a subpackage, as ``certdp.views`` after ``import certdp``
            try:
                return importlib.import_module(f"{self.__name__}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{self.__name__}.{name}":
                    raise
                raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(f"{self.__name__}.{_EXPORTS[name]}"), name)
        setattr(self, name, value)
        return value

    def __setattr__(self, name: str, value: object) -> None:
        if isinstance(value, types.ModuleType) and _EXPORTS.get(name) == name \
                and value.__name__ == f"{self.__name__}.{name}":
            value = getattr(value, name)
        super().__setattr__(name, value)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(_EXPORTS))


sys.modules[__name__].__class__ = _Package

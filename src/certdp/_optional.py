"""Optional dependencies: import them where they are used, with an error that names the extra
to install when they are missing."""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingExtraError(ImportError):
    """An optional dependency is not installed."""


def require(module: str | tuple[str, ...], extra: str, purpose: str) -> ModuleType:
    """Import ``module`` (or the first of several alternatives that imports), or raise
    :class:`MissingExtraError` saying which extra provides it."""
    names = (module,) if isinstance(module, str) else module
    why = []
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError as exc:
            why.append(str(exc))
    shown = " or ".join(repr(n) for n in names)
    raise MissingExtraError(f"{purpose} needs the optional dependency {shown}, which is not installed "
                            f"({'; '.join(why)}); install it with: pip install 'certdp[{extra}]'")

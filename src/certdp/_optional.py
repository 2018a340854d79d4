"""Optional dependencies: import them where they are used, with an error that names the extra
to install when they are missing."""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingExtraError(ImportError):
    """An optional dependency is not installed."""


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import ``module``, or raise :class:`MissingExtraError` saying which extra provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(f"{purpose} needs the optional dependency {module!r}, which is not installed "
                                f"({exc}); install it with: pip install 'certdp[{extra}]'") from None

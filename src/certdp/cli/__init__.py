"""The ``certdp`` command: one module per family of subcommands (``mechanisms``: solve,
compare, demo; ``files``: audit, perturb; ``views``: view build / query / compare; ``lrgeo``;
``text``: sanitize), all on the group in ``common``, which also holds what they share."""

from . import files, lrgeo, mechanisms, text, views  # noqa: F401  (registers the subcommands)
from .common import main

__all__ = ["main"]

"""The ``certdp`` command: one module per family of subcommands (``mechanisms``: solve,
compare, demo; ``files``: audit, perturb; ``views``: view build / query / compare; ``lrgeo``),
all on the group in ``common``, which also holds what they share. The group imports them
when its commands are first needed, after its signal handling is in place
(:data:`~certdp.cli.common.COMMAND_MODULES`)."""

from .common import main

__all__ = ["main"]

"""The ``certdp`` command: one module per family of subcommands (``mechanisms``: solve,
compare, demo; ``files``: audit, perturb; ``views``: view build / query / compare; ``lrgeo``;
``text``: sanitize), all on the group in ``common`` (``main``), which also holds what they
share.

:func:`run` is the program (the installed ``certdp`` and ``python -m certdp.cli``): it puts
the stop handling of :mod:`certdp.cli.interrupt` in place before anything else is imported,
so that a Ctrl-C is answered the same way from the command's first milliseconds. ``main``,
the group itself (for click's test runner and for embedding), is imported when first asked
for, and imports the subcommands when they are first needed
(:data:`~certdp.cli.common.COMMAND_MODULES`).
"""

from __future__ import annotations

__all__ = ["main", "run"]


def run() -> None:
    """Run the ``certdp`` command on ``sys.argv`` and exit."""
    from .interrupt import stop_guard

    with stop_guard(lasting=True):
        from .common import main

        main()


def __getattr__(name: str) -> object:
    if name == "main":
        from .common import main

        return main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

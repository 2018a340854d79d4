"""``python -m certdp.cli``: the ``certdp`` command without its installed entry point."""

from . import run

run()

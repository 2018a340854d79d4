"""``python -m scaledp.cli``: the ``scaledp`` command without its installed entry point."""

from . import main

main()

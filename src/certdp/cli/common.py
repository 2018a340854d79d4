"""What every ``certdp`` subcommand shares: the command group (with ``-v``/``-q`` for logging),
one-line errors, the live progress line, tables in the format asked for (``--format``),
output-path and seed handling, deprecated option names, and number formatting."""

from __future__ import annotations

import csv
import importlib
import json
import logging
import math
import os
import secrets
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import click
from rich.console import Console
from rich.table import Table

from .._optional import MissingExtraError
from ..lp.outcome import SolverLimitError
from ..progress import ProgressEvent
from .interrupt import finish, stop_guard, stop_requested

COMMAND_MODULES = ("mechanisms", "files", "views", "lrgeo", "text")
"""The modules of ``certdp.cli`` that define the subcommands. The group imports them (and
with them numpy, scipy, HiGHS...) when its commands are first needed: inside the command's
signal handling, so that Ctrl-C during those imports is answered like anywhere else."""

# Lines are never wrapped at the terminal's (or a pipe's default 80) width: a message or a path
# cut in two is harder to read and to copy than a long line.
err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)
log = logging.getLogger("certdp.cli")


class OneLineErrors(click.Group):
    """A command group whose usage errors (a missing option, a value of the wrong type) are one
    line, ``Error: ...``, with exit status 2, like every other bad input; and whose commands
    stop on SIGINT, SIGTERM and SIGHUP as :mod:`certdp.cli.interrupt` describes (one line,
    exit status 128 + the signal's number, no partial file, no process left)."""

    _loaded = False

    @property
    def commands(self) -> dict[str, click.Command]:   # type: ignore[override]
        """The subcommands, their modules imported on first use (:data:`COMMAND_MODULES`)."""
        if not self._loaded:
            self._loaded = True
            for name in COMMAND_MODULES:
                importlib.import_module(f"{__package__}.{name}")
        return self._commands

    @commands.setter
    def commands(self, value: dict[str, click.Command]) -> None:
        """Set by click when the group is made."""
        self._commands = value

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        """Run the command; in standalone mode a usage error is one ``Error:`` line with exit status 2."""
        with stop_guard():      # in force already when run as the program (certdp.cli.run)
            if not standalone_mode:
                return super().main(*args, standalone_mode=False, **kwargs)
            try:
                rv = super().main(*args, standalone_mode=False, **kwargs)
            except click.UsageError as exc:
                click.echo(f"Error: {exc.format_message()}", err=True)
                sys.exit(exc.exit_code)
            except click.ClickException as exc:
                exc.show()
                sys.exit(exc.exit_code)
            except click.exceptions.Abort:
                if stop_requested():
                    finish("main")
                click.echo("Aborted: nothing was written", err=True)
                sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a stop signal ends the process here, before click would turn it
        into an Abort (and print an empty line)."""
        try:
            return super().invoke(ctx)
        except BaseException:
            if stop_requested():
                finish("main")
            raise


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(verbose: int, quiet: bool) -> None:
    """Log records of the ``certdp`` loggers on stderr: warnings by default, INFO with ``-v``,
    DEBUG with ``-vv``, errors only with ``-q``. The library itself never configures handlers;
    the command does, for itself."""
    level = logging.ERROR if quiet else {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logger = logging.getLogger("certdp")
    for h in list(logger.handlers):
        if getattr(h, "certdp_cli", False):
            logger.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT, "%H:%M:%S"))
    handler.certdp_cli = True   # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="certdp")
@click.option("-v", "--verbose", count=True, help="log what runs on stderr (-v: steps, -vv: details)")
@click.option("-q", "--quiet", "quiet_all", is_flag=True,
              help="errors only: no progress lines, no log records below ERROR")
@click.pass_context
def main(ctx: click.Context, verbose: int, quiet_all: bool) -> None:
    """certdp: privacy mechanisms that are optimal and still scale."""
    configure_logging(verbose, quiet_all)
    ctx.meta["certdp.quiet"] = quiet_all
    err.quiet = quiet_all          # notes and warnings on stderr too; errors are echoed by click


class BadInput(click.ClickException):
    """Bad input: one line naming the option or file and what is wrong, exit status 2."""

    exit_code = 2


class Unverifiable(click.ClickException):
    """A mechanism file that does not carry what is needed to check it: exit status 3."""

    exit_code = 3


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())


class WorkerFailure(click.ClickException):
    """A worker process was lost (killed, out of memory, its machine gone) and could not be
    replaced: exit status 4."""

    exit_code = 4


@contextmanager
def friendly_errors() -> Iterator[None]:
    """Turn bad input into a one-line error (exit 2), a solver limit or a missing extra into a
    one-line failure (exit 1), a lost worker into a one-line failure (exit 4), never a
    traceback. A stop signal (Ctrl-C) ends the process as :mod:`certdp.cli.interrupt` says,
    whatever it was raised as on its way here."""
    try:
        yield
    except BaseException as exc:
        if stop_requested():
            finish("main")
        from ..audit import MechanismFileError
        from ..lp.executors import WorkerLost

        if isinstance(exc, (ValueError, TypeError, MechanismFileError)):
            raise BadInput(_one_line(exc)) from None
        if isinstance(exc, (SolverLimitError, MissingExtraError)):
            raise click.ClickException(_one_line(exc)) from None
        if isinstance(exc, WorkerLost):
            raise WorkerFailure(_one_line(exc)) from None
        if isinstance(exc, MemoryError):
            raise click.ClickException("out of memory: the instance is too large for this machine") from None
        raise


def fmt(v: Any, digits: int = 4) -> str:
    """``v`` for a table cell: '-' for None, floats to ``digits`` significant digits."""
    if v is None:
        return "-"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        return f"{v:.{digits}g}"
    return str(v)


# ------------------------------------------------------------------------- progress
class Live:
    """A live progress line on stderr while a run lasts: on a terminal a spinner with the
    elapsed time and the last step, refreshed twice a second; on a pipe or a log file one line
    every ``every`` seconds. ``quiet`` shows nothing. Use it as the ``progress`` callback."""

    def __init__(self, what: str, *, quiet: bool = False, every: float = 5.0) -> None:
        self.what = what
        self.quiet = quiet
        self.every = every
        self.message = "starting"
        self.counts: tuple[int, int] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._status: Any = None
        self.t0 = time.perf_counter()

    def __call__(self, e: ProgressEvent) -> None:
        done, total = e.record.get("done"), e.record.get("total")
        if isinstance(done, int) and isinstance(total, int) and total > 0:
            self.counts = (done, total)
        self.message = e.message
        log.debug("%s: %s", self.what, e.message)

    def line(self) -> str:
        """The progress line: elapsed seconds, what runs, builds done out of the total with an
        estimate of the time left (the mean time of a build so far, times the builds left), and
        the last step."""
        elapsed = time.perf_counter() - self.t0
        head = f"[{elapsed:7.1f}s] {self.what}"
        if self.counts is not None:
            done, total = self.counts
            head += f" ({done}/{total} done"
            head += f", about {elapsed / done * (total - done):.0f} s left)" if 0 < done < total else ")"
        return f"{head}: {self.message}"

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop.wait(0.5):
            if self._status is not None:
                self._status.update(self.line())
            elif time.perf_counter() - last >= self.every:
                last = time.perf_counter()
                print(self.line(), file=sys.stderr, flush=True)

    def __enter__(self) -> "Live":
        self.t0 = time.perf_counter()
        ctx = click.get_current_context(silent=True)
        if ctx is not None and ctx.find_root().meta.get("certdp.quiet"):
            self.quiet = True
        if not self.quiet:
            if err.is_terminal:
                self._status = err.status(self.line())
                self._status.start()
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._status is not None:
            self._status.stop()


# ------------------------------------------------------------------- files and seeds
class PathArg(click.Path):
    """``click.Path`` for every path option and argument: a NUL byte, which the operating
    system cannot take (``os.stat`` raises on it inside click's own check), is a usage error
    like any other bad path instead of an exception."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Refuse a path holding a NUL byte as a usage error, then check it as ``click.Path`` does."""
        if (isinstance(value, str) and "\x00" in value) or (isinstance(value, bytes) and b"\x00" in value):
            self.fail("a path cannot contain a NUL byte", param, ctx)
        return super().convert(value, param, ctx)


def check_output_path(path: str | None, suffix: str = "") -> Path | None:
    """The path a result will be written to (``suffix`` added when missing), checked before any
    work: not a folder, and its folder exists (or can be made) and is writable."""
    if path is None:
        return None
    if not str(path).strip():
        raise ValueError("--out: empty path")
    p = Path(path)
    if suffix and p.suffix != suffix:
        p = p.with_name(p.name + suffix)
    if p.is_dir():
        raise ValueError(f"--out: {p} is a folder; give a file name")
    parent = p.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"--out: {parent} is not a folder, so {p} cannot be written")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ValueError(f"--out: {p} cannot be written (permission denied in {parent})")
    return p


def resolve_seed(seed: int | None) -> int:
    """The given seed, or a fresh one from the operating system's entropy (recorded in the
    output, so the run can be repeated)."""
    if seed is None:
        return secrets.randbits(32)
    if seed < 0:
        raise ValueError(f"--seed must be >= 0, got {seed}")
    return seed


def deprecated(new: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A callback for an old option name: warns on stderr and passes the value on to ``new``."""
    def cb(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is not None and ctx.get_parameter_source(param.name) == click.core.ParameterSource.COMMANDLINE:
            err.print(f"warning: {param.opts[0]} is deprecated; use {new}")
            ctx.meta[f"alias:{new}"] = value
        return value
    return cb


def alias_value(ctx: click.Context, new: str, value: Any) -> Any:
    """``value`` of option ``new``, or the value given under its deprecated name."""
    old = ctx.meta.get(f"alias:{new}")
    return old if old is not None and value is None else value


# ------------------------------------------------------------------------------ tables
FORMATS = ("table", "markdown", "csv", "json")


def table_format(f: Callable[..., Any]) -> Callable[..., Any]:
    """The ``--format`` option of a command that prints a table (stored for :func:`print_table`)."""
    def remember(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        ctx.meta["certdp.format"] = value
        return value
    return click.option("--format", "table_fmt", type=click.Choice(FORMATS), default=None, expose_value=False,
                        callback=remember, is_eager=True,
                        help="table (boxes), markdown, csv or json [table on a terminal, markdown on a pipe]")(f)


def _cells(table: Table) -> tuple[list[str], list[list[str]]]:
    heads = [str(c.header) for c in table.columns]
    cols = [[str(v) for v in c.cells] for c in table.columns]
    rows = [list(r) for r in zip(*cols)] if cols else []
    return heads, rows


def render_table(table: Table, fmt_: str) -> str:
    """``table`` as text in ``fmt_`` ('table', 'markdown', 'csv' or 'json'), never cut to a
    width: 'table' draws boxes as wide as the content; 'markdown' a GitHub table under its title;
    'csv' a header and rows; 'json' a list of objects keyed by the column headers."""
    heads, rows = _cells(table)
    title = str(table.title) if table.title else ""
    if fmt_ == "markdown":
        esc = [[c.replace("|", "\\|") for c in r] for r in [heads, *rows]]
        lines = ([f"**{title}**", ""] if title else []) + ["| " + " | ".join(esc[0]) + " |",
                                                           "|" + "|".join("---" for _ in heads) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in esc[1:]]
        return "\n".join(lines) + "\n"
    if fmt_ == "csv":
        from io import StringIO
        buf = StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(heads)
        w.writerows(rows)
        return buf.getvalue()
    if fmt_ == "json":
        return json.dumps([dict(zip(heads, r)) for r in rows]) + "\n"
    wide = Console(width=100_000, file=None, force_terminal=False, no_color=True, record=True)
    with wide.capture() as cap:
        wide.print(table)
    return "\n".join(line.rstrip() for line in cap.get().splitlines()) + "\n"


def note(text: str) -> None:
    """A line that goes with a table: on stdout under a table or markdown, on stderr when the
    table is csv or json (so that stdout stays one machine-readable document)."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.meta.get("certdp.format") in ("csv", "json"):
        click.echo(text, err=True)
    else:
        out.print(text, highlight=False)


def print_table(table: Table) -> None:
    """Print ``table`` on stdout in the format of ``--format``; without it, as boxes on a
    terminal and as markdown when stdout is a pipe or a file (readable, never cut to 80
    columns)."""
    ctx = click.get_current_context(silent=True)
    chosen = ctx.meta.get("certdp.format") if ctx is not None else None
    if chosen is None:
        chosen = "table" if out.is_terminal else "markdown"
    if chosen == "table" and out.is_terminal:
        out.print(table)
        return
    click.echo(render_table(table, chosen), nl=False)

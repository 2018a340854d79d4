"""What every ``certdp`` subcommand shares: the command group, one-line errors, the live
progress line, output-path and seed handling, deprecated option names, and number formatting."""

from __future__ import annotations

import importlib
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

from .._optional import MissingExtraError
from ..lp.outcome import SolverLimitError
from ..progress import ProgressEvent
from .interrupt import finish, stop_guard, stop_requested

COMMAND_MODULES = ("mechanisms", "files", "views", "lrgeo")
"""The modules of ``certdp.cli`` that define the subcommands. The group imports them (and
with them numpy, scipy, HiGHS...) when its commands are first needed: inside the command's
signal handling, so that Ctrl-C during those imports is answered like anywhere else."""

err = Console(stderr=True)
out = Console()


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
        self._commands = value

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
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


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="certdp")
def main() -> None:
    """certdp: privacy mechanisms that are optimal and still scale."""


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
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._status: Any = None
        self.t0 = time.perf_counter()

    def __call__(self, e: ProgressEvent) -> None:
        self.message = e.message

    def line(self) -> str:
        return f"[{time.perf_counter() - self.t0:7.1f}s] {self.what}: {self.message}"

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


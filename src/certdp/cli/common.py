"""What every ``certdp`` subcommand shares: the command group (with ``-v``/``-q`` for logging),
one-line errors, the option types (bounded numbers, output paths), the instance options, the
live progress line, tables in the format asked for (``--format``), seeds, deprecated option
names, and number formatting.

Every number option is bounded by construction: the group gives each option or argument
declared with ``type=int`` the type :class:`Integer` (0 to :data:`INT_MAX`) and each one
declared with ``type=float`` the type :class:`Real` (finite, 0 or a magnitude in
[:data:`REAL_MIN`, :data:`REAL_MAX`]), so no value reaches numpy, HiGHS or the arithmetic
where it would overflow, and a new option cannot forget its bounds. An option whose meaning
needs more (``--eta inf``) declares ``Real(allow_inf=True)``; each engine still checks its own
range (``--subsets`` at most the records...). Every output path option uses
:class:`OutputPath` or :class:`OutputFolder`, the rule of :func:`certdp._io.output_path`,
checked before any work."""

from __future__ import annotations

import csv
import importlib
import json
import logging
import math
import secrets
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import click
import numpy as np
from rich.console import Console
from rich.table import Table

from .._io import output_path
from ..datasets import build_space, parse_dataset
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


INT_MAX = 2**32 - 1
"""The largest value of an integer option: a recorded seed (32 bits) fits, and a count beyond
it (draws, records, iterations, workers) is beyond any machine's memory or time."""
REAL_MAX = 1e12
REAL_MIN = 1e-12
"""The magnitudes a float option may have (besides 0): far beyond any epsilon, distance, gap,
tolerance or time limit that means something, and far from where products, exponentials
or reciprocals overflow or underflow in float64."""


class Integer(click.types.IntParamType):
    """An integer option in ``[lo, hi]`` (default 0 to :data:`INT_MAX`)."""

    def __init__(self, lo: int = 0, hi: int = INT_MAX) -> None:
        self.lo, self.hi = lo, hi

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        """``value`` as an integer in range, or a usage error naming the option."""
        v = super().convert(value, param, ctx)
        if not self.lo <= v <= self.hi:
            self.fail(f"{v} is out of range; it must be an integer from {self.lo} to {self.hi}", param, ctx)
        return v


class Real(click.types.FloatParamType):
    """A float option: finite (``inf`` too when ``allow_inf``), never NaN, and 0 or of a
    magnitude in [:data:`REAL_MIN`, :data:`REAL_MAX`] (a literal such as ``1e400`` that
    overflows to inf is refused)."""

    def __init__(self, *, allow_inf: bool = False) -> None:
        self.allow_inf = allow_inf

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        """``value`` as a float in range, or a usage error naming the option."""
        v = super().convert(value, param, ctx)
        if math.isnan(v):
            self.fail(f"{value!r} is not a number", param, ctx)
        if math.isinf(v):
            if self.allow_inf and v > 0 and str(value).strip().lower() in ("inf", "+inf", "infinity", "+infinity"):
                return v
            self.fail(f"{value!r} is not a finite number" + (" (inf is written 'inf')" if self.allow_inf else ""),
                      param, ctx)
        if v != 0 and not REAL_MIN <= abs(v) <= REAL_MAX:
            self.fail(f"{value!r} is out of range; a number here is 0 or of magnitude {REAL_MIN:g} to {REAL_MAX:g}",
                      param, ctx)
        return v


def _bounded(params: list[click.Parameter]) -> None:
    """Give every plain int and float parameter its bounded type (see the module docstring)."""
    for p in params:
        if p.type is click.INT:
            p.type = Integer()
        elif p.type is click.FLOAT:
            p.type = Real()


class Command(click.Command):
    """A subcommand whose number parameters are bounded (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _bounded(self.params)


class OneLineErrors(click.Group):
    """A command group whose usage errors (a missing option, a value of the wrong type) are one
    line, ``Error: ...``, with exit status 2, like every other bad input; whose commands and
    subgroups have bounded number parameters; and whose commands stop on SIGINT, SIGTERM and
    SIGHUP as :mod:`certdp.cli.interrupt` describes (one line, exit status 128 + the signal's
    number, no partial file, no process left)."""

    command_class = Command
    group_class = type
    _loaded = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _bounded(self.params)

    @property   # type: ignore[override]
    def commands(self) -> dict[str, click.Command]:
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


class AuditExit(click.ClickException):
    """A mechanism file that is not passed: its own exit status (1 failed, 3 unverifiable,
    4 no pairs; :data:`certdp.audit.EXIT_STATUS`) and one line saying why."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]


def _one_line(exc: BaseException | str) -> str:
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())


class WorkerFailure(click.ClickException):
    """A worker process was lost (killed, out of memory, its machine gone) and could not be
    replaced: exit status 5."""

    exit_code = 5


@contextmanager
def friendly_errors() -> Iterator[None]:
    """Turn bad input (and a file system error) into a one-line error (exit 2), a solver limit
    or a missing extra into a one-line failure (exit 1), a lost worker into a one-line failure
    (exit 5), never a
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
        if isinstance(exc, OSError):    # a file system error no reader turned into a message of its own
            raise BadInput(_one_line(f"{exc.filename + ': ' if exc.filename else ''}{exc.strerror or exc}")) from None
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
    """``click.Path`` for every path option and argument that is read: a NUL byte, which the
    operating system cannot take, and any ``OSError`` of click's own check (a name too long, a
    folder that cannot be searched) are usage errors like any other bad path instead of
    exceptions."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Refuse a path holding a NUL byte as a usage error, then check it as ``click.Path`` does."""
        if (isinstance(value, str) and "\x00" in value) or (isinstance(value, bytes) and b"\x00" in value):
            self.fail("a path cannot contain a NUL byte", param, ctx)
        try:
            return super().convert(value, param, ctx)
        except OSError as exc:
            self.fail(f"{str(value)[:60]!r}: {(exc.strerror or type(exc).__name__)}", param, ctx)


class OutputPath(click.ParamType):
    """An output file option: the rule of :func:`certdp._io.output_path` (``suffix`` added
    when missing; a folder, a special file or a name that cannot be written refused), checked
    when the command line is read, before any work. The value is the :class:`~pathlib.Path`
    to write."""

    name = "file"

    def __init__(self, suffix: str = "") -> None:
        self.suffix = suffix

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        """The file to write, checked (:func:`certdp._io.output_path`), or one ``Error:`` line."""
        if isinstance(value, Path):
            return value
        try:
            return output_path(value, self.suffix, what=param.opts[0] if param is not None else "path")
        except ValueError as exc:
            raise BadInput(_one_line(exc)) from None


class OutputFolder(click.ParamType):
    """An output folder option: an existing folder, or one that can be created, where files can
    be written (checked as :class:`OutputPath` checks a file in it)."""

    name = "folder"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        """The folder to write into, checked, or one ``Error:`` line."""
        what = param.opts[0] if param is not None else "folder"
        try:
            p = Path(value)
            if p.exists() and not p.is_dir():
                raise ValueError(f"{what}: {p} is not a folder")
            output_path(p / "certdp-probe", what=what)
        except (ValueError, OSError) as exc:
            raise BadInput(_one_line(exc)) from None
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



# ------------------------------------------------------------------- the instance
def _instance_option_list(owner: bool, seed: bool = True) -> list[Callable[..., Any]]:
    """The options that describe an instance; ``owner``: as the data's owner gives them to
    check a mechanism file against the data (none required; the seed is the owner's,
    :func:`owner_space`); ``seed`` False names it ``--instance-seed`` (``perturb``'s ``--seed``
    seeds its draws)."""
    return [
        click.option("--dataset", required=not owner,
                     help=("the owner's data, to check the file against it: " if owner else "")
                     + "grid:ROWSxCOLS | gaussian:N:DIM | road:NODES.csv,EDGES.csv:N | embedding:FILE:N"),
        click.option("--cell", type=float, default=1.0, show_default=True, help="grid: cell size (km)"),
        click.option("--outputs", "outputs", type=int, default=None,
                     help="K outputs sampled from the records (default: all)"),
        click.option("--epsilon", type=float, required=not owner,
                     help="privacy budget per distance unit" + (" (with --dataset)" if owner else "")),
        click.option("--eta", type=Real(allow_inf=True), required=not owner,
                     help="neighbour threshold in distance units ('inf': every pair, as in paper 002)"
                     + (" (with --dataset)" if owner else "")),
        click.option("--cost", type=click.Choice(["distance", "travel"]), default="distance", show_default=True),
    ] + [click.option("--seed" if seed else "--instance-seed", "seed" if seed else "instance_seed", type=int, default=None,
                      help="seed for the records, outputs and destinations drawn (default: "
                      + ("none: needed when the instance draws any of them)" if owner else "drawn and recorded)"))]


def instance_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options that describe the instance, the same in every command that builds one."""
    for o in reversed(_instance_option_list(owner=False) + [
            click.option("--quiet", is_flag=True, help="no progress line on stderr")]):
        f = o(f)
    return f


def owner_options(*, seed: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options of every command that uses a mechanism file (``audit``, ``perturb``): the
    owner's instance, built as ``solve`` builds it, to check the file against the data
    (:func:`owner_space`), and ``--allow-no-pairs``. ``seed`` False: the instance's seed is
    ``--instance-seed`` (``perturb``'s ``--seed`` seeds its draws)."""
    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        for o in reversed(_instance_option_list(owner=True, seed=seed) + [
                click.option("--allow-no-pairs", is_flag=True,
                             help="accept a file that protects no pair (no two records within eta)")]):
            f = o(f)
        return f
    return decorate


def space_from_options(dataset: str, cell: float, outputs: int | None, epsilon: float, eta: float, cost: str,
                       seed: int):
    """The instance the options describe, built by the one dataset parser."""
    ds = parse_dataset(dataset, cell=cell, seed=seed)
    return build_space(ds, epsilon=epsilon, eta=eta, n_outputs=outputs, cost=cost, seed=seed)


def owner_space(dataset: str | None, cell: float, outputs: int | None, epsilon: float | None,
                eta: float | None, cost: str, seed: int | None = None, instance_seed: int | None = None,
                **_: Any):
    """The owner's instance from ``owner_options`` (None without ``--dataset``). Its seed is the
    owner's (``--seed``; ``perturb``'s ``--instance-seed``), never the one the file records:
    the seed picks which of the owner's records are rows 0, 1, ... of the matrix, and a file
    solved on another draw of the same data would pass against that draw while the owner
    perturbs their own. Without it the instance must not depend on a seed (built with two
    seeds, the same records, outputs and costs), or the options are refused."""
    seed = seed if seed is not None else instance_seed
    if dataset is None:
        given = [n for n, v in (("--epsilon", epsilon), ("--eta", eta), ("--outputs", outputs), ("--seed", seed))
                 if v is not None]
        if given:
            raise ValueError(f"{', '.join(given)} describe the owner's data and need --dataset")
        return None
    missing = [n for n, v in (("--epsilon", epsilon), ("--eta", eta)) if v is None]
    if missing:
        raise ValueError(f"--dataset needs {' and '.join(missing)}: the owner states the guarantee the file must give")
    if seed is not None:
        return space_from_options(dataset, cell, outputs, epsilon, eta, cost, seed)  # type: ignore[arg-type]
    a, b = (space_from_options(dataset, cell, outputs, epsilon, eta, cost, s) for s in (0, 1))  # type: ignore[arg-type]
    same = (a.n_records == b.n_records and np.array_equal(a.output_records, b.output_records)
            and np.array_equal(a.cost, b.cost)
            and (np.array_equal(a.points, b.points) if a.points is not None
                 else np.array_equal(a.distance_matrix, b.distance_matrix)))
    if not same:
        raise ValueError("--seed: this instance draws its records, outputs or destinations with a seed; give the "
                         "seed you built it with (a seed the file records is its writer's word, not evidence)")
    return a


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

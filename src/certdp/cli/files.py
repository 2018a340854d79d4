"""``certdp audit`` and ``certdp perturb``: what one does with a mechanism file."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import click
import numpy as np
from rich.table import Table

from .. import _validate as V
from ..audit import audit_file
from ..mechanism import Mechanism
from .common import PathArg, Unverifiable, fmt, friendly_errors, main, out, print_table, table_format


@main.command()
@click.argument("file", type=PathArg(dir_okay=False))
@click.option("--q", type=float, default=0.95, show_default=True, help="quantile for L_q")
@click.option("--json", "as_json", is_flag=True)
@table_format
def audit(file: str, q: float, as_json: bool) -> None:
    """Audit a mechanism file from its own contents: recompute every protected pair from the
    records' coordinates (or distances) and eta, check exact epsilon-mDP on them, and report
    the losses. Exit status 0 if it passes, 1 if it fails, 3 if the file does not carry what is
    needed to check it, 2 if it cannot be read."""
    with friendly_errors():
        rep = audit_file(file, q=q)
    if as_json:
        click.echo(json.dumps(rep.as_dict()))
    else:
        t = Table(title=f"audit of {file}")
        t.add_column("quantity")
        t.add_column("value", justify="right")
        rows: list[tuple[str, object]] = [("records x outputs", f"{rep.n_records} x {rep.n_outputs}")]
        v = rep.verify
        if v is not None:
            rows += [("epsilon", v.epsilon), ("pairs checked (recomputed)", v.pairs_checked),
                     ("inequalities checked", v.inequalities_checked), ("violations", v.violations),
                     ("max loss per unit distance", v.max_loss_per_distance), ("max |row sum - 1|", v.max_row_error),
                     ("expected loss", rep.expected_loss), ("worst-case loss", rep.worst_case_loss),
                     (f"L_{q:g} loss", rep.quantile_loss)]
        rows.append((rep.status.upper(), ""))
        for k, val in rows:
            t.add_row(k, fmt(val, 6))
        print_table(t)
        for p in rep.problems:
            out.print(f"- {p}")
    if rep.status == "unverifiable":
        raise Unverifiable(f"{file} cannot be checked: " + "; ".join(rep.problems))
    if not rep.passed:
        sys.exit(1)


@main.command()
@click.argument("file", type=PathArg(dir_okay=False))
@click.option("--input", "input_path", type=PathArg(dir_okay=False, allow_dash=True), default="-",
              show_default=True, help="CSV of record indices (one per line, or a 'record' column); - for stdin")
@click.option("--seed", type=int, default=None, help="reproducible draws (default: OS secure randomness)")
def perturb(file: str, input_path: str, seed: int | None) -> None:
    """Perturb record indices with a mechanism: CSV 'record,output' on stdout. The file must
    pass its audit first."""
    with friendly_errors():
        if seed is not None:
            V.int_in_range("--seed", seed, 0)
        mech = Mechanism.load(file)
        if input_path == "-":
            text = sys.stdin.read()
        else:
            p = Path(input_path)
            if not p.is_file():
                raise ValueError(f"--input: file not found: {p}")
            try:
                text = p.read_text()
            except UnicodeDecodeError:
                raise ValueError(f"--input: {p} is not a text (CSV) file") from None
        records = parse_records(text, mech.n_records)
        outs = mech.perturb(records, rng=seed)
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["record", "output"])
    for r, o in zip(records.tolist(), outs.tolist()):
        w.writerow([r, o])


def _index(text: str, line: int, n: int) -> int:
    t = text.strip()
    if not t.lstrip("-").isdigit():
        raise ValueError(f"input line {line}: {t!r} is not a record index (an integer from 0 to {n - 1})")
    v = int(t)
    if not 0 <= v < n:
        raise ValueError(f"input line {line}: record {v} is out of range; records must be in [0, {n - 1}]")
    return v


def parse_records(text: str, n: int) -> np.ndarray:
    """Record indices from CSV text: one per line, or a 'record' column under a header."""
    rows = [(i + 1, r) for i, r in enumerate(csv.reader(text.splitlines())) if r and any(c.strip() for c in r)]
    if not rows:
        raise ValueError("input has no record indices")
    col = 0
    first = [c.strip() for c in rows[0][1]]
    if "record" in first:
        col = first.index("record")
        rows = rows[1:]
        if not rows:
            raise ValueError("input has a header but no record indices")
    try:
        return np.array([_index(r[col], line, n) for line, r in rows], dtype=np.int64)
    except IndexError:
        raise ValueError(f"input rows must all have a 'record' column (column {col + 1})") from None

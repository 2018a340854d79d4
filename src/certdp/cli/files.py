"""``certdp audit`` and ``certdp perturb``: what one does with a mechanism file."""

from __future__ import annotations

import csv
import json
import re
import sys
from typing import Any

import click
import numpy as np
from rich.table import Table

from .. import _validate as V
from .._io import read_bytes
from ..audit import AuditReport, audit_with_pairs, read_mechanism_file
from ..mechanism import Mechanism
from .common import (PathArg, fmt, friendly_errors, main, note, owner_options, owner_space, print_table,
                     table_format)


@main.command()
@click.argument("file", type=PathArg(dir_okay=False))
@owner_options(seed=True)
@click.option("--q", type=float, default=0.95, show_default=True, help="quantile for L_q")
@click.option("--json", "as_json", is_flag=True)
@table_format
def audit(file: str, q: float, as_json: bool, **owner: Any) -> None:
    """Audit a mechanism file: recompute every protected pair, check that the file lists
    exactly those, and check exact epsilon-mDP on them; report the losses.

    From the file alone the pairs come from the file's own coordinates (or distances) and eta;
    with --dataset (and --epsilon, --eta and the other options of `solve`) the owner's
    instance is rebuilt from the owner's data, and any difference in records, distances,
    metric, eta, epsilon, outputs, costs or prior fails the file (docs/audit.md). Exit status
    0 passed, 1 failed, 2 unreadable or a bad option, 3 unverifiable (the file lacks what is
    needed to check it), 4 no pairs (the file protects no pair; --allow-no-pairs accepts it)."""
    with friendly_errors():
        q = V.open_unit("--q", q, upper_closed=True)
        f = read_mechanism_file(file)
        space = owner_space(**owner)
        rep = audit_with_pairs(f, q=q, space=space, allow_no_pairs=owner["allow_no_pairs"])[0]
    if as_json:
        click.echo(json.dumps(rep.as_dict()))
    else:
        _print_audit(file, rep, q)
    if rep.exit_status:
        click.echo(rep.summary(), err=True)
        sys.exit(rep.exit_status)


def _print_audit(file: str, rep: AuditReport, q: float) -> None:
    t = Table(title=f"audit of {file}")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    rows: list[tuple[str, object]] = [("records x outputs", f"{rep.n_records} x {rep.n_outputs}"),
                                      ("pairs recomputed from", rep.against), ("pairs checked", rep.pairs_checked)]
    v = rep.verify
    if v is not None:
        rows += [("epsilon", v.epsilon), ("inequalities checked", v.inequalities_checked), ("violations", v.violations),
                 ("max loss per unit distance", v.max_loss_per_distance), ("max |row sum - 1|", v.max_row_error),
                 ("expected loss", rep.expected_loss), ("worst-case loss", rep.worst_case_loss),
                 (f"L_{q:g} loss", rep.quantile_loss)]
    rows.append((rep.status.upper().replace("_", " "), ""))
    for k, val in rows:
        t.add_row(k, fmt(val, 6))
    print_table(t)
    for p in rep.problems:
        note(f"- {p}")


@main.command()
@click.argument("file", type=PathArg(dir_okay=False))
@owner_options(seed=False)
@click.option("--input", "input_path", type=PathArg(dir_okay=False, allow_dash=True), default="-",
              show_default=True, help="CSV of record indices (one per line, or a 'record' column); - for stdin")
@click.option("--seed", type=int, default=None, help="reproducible draws (default: OS secure randomness)")
def perturb(file: str, input_path: str, seed: int | None, **owner: Any) -> None:
    """Perturb record indices with a mechanism: CSV 'record,output' on stdout. The file must
    pass its audit first (the same audit, with the same options, as `certdp audit`)."""
    with friendly_errors():
        f = read_mechanism_file(file)
        mech = Mechanism.load(f, space=owner_space(**owner),
                              allow_no_pairs=owner["allow_no_pairs"])
        if input_path == "-":
            text = sys.stdin.read()
        else:
            try:
                text = read_bytes(input_path, "--input").decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"--input: {input_path} is not a text (CSV) file") from None
        records = parse_records(text, mech.n_records)
        outs = mech.perturb(records, rng=seed)
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["record", "output"])
    for r, o in zip(records.tolist(), outs.tolist()):
        w.writerow([r, o])


def _index(text: str, line: int, n: int) -> int:
    t = text.strip()
    if not re.fullmatch(r"-?[0-9]+", t):    # ASCII digits: str.isdigit also takes '٣' and '１'
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

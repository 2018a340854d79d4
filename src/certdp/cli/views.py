"""``certdp view build | query | compare``: private views of multidimensional tables (paper 004)."""

from __future__ import annotations

import json
import math
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import click
from rich.table import Table

from .. import _validate as V
from .._io import load_json, write_json
from .._optional import require
from .common import (BadInput, Live, OutputPath, PathArg, err, fmt, friendly_errors, main, out, print_table,
                     resolve_seed, table_format)


@main.group()
def view() -> None:
    """Private views of multidimensional tables (RIPOST and its competitors)."""


def _load_frame(table: str, domains_file: str | None, names: str | None, preset: str | None):
    """The table as a DataFrame, and the public domains the preset and the --domains file give."""
    from ..views import adult
    from ..views.tensor import Domain, read_table

    doms: dict[str, Domain] = {}
    col_names = [c.strip() for c in names.split(",")] if names else None
    if preset == "adult":
        names_file = Path(table).with_name("adult.names")
        if not names_file.is_file():
            raise ValueError(f"--preset adult reads the public value sets from {names_file}, which is missing")
        doms.update(adult.domains(names_file))
        frame = adult.read(table)
    else:
        if Path(table).suffix in (".parquet", ".pq"):     # pandas reads Parquet through an optional engine
            require(("pyarrow", "fastparquet"), "parquet", f"reading the Parquet table {table}")
        frame = read_table(table, col_names)
    if domains_file:
        try:
            raw = load_json(Path(domains_file).read_bytes(), f"--domains file {domains_file}")
        except OSError as exc:
            raise ValueError(f"--domains: cannot read {domains_file}: {exc.strerror or exc}") from None
        if not isinstance(raw, dict):
            raise ValueError("--domains must be a JSON object: column -> {values: [...]} or {low, high, bins}")
        for c, d in raw.items():
            try:
                doms[c] = Domain.from_dict(d, name=c)
            except (ValueError, TypeError) as exc:
                raise ValueError(f"--domains file {domains_file}: {exc}") from None
    return frame, doms


def _columns(columns: str) -> list[str]:
    cols = [c.strip() for c in columns.split(",") if c.strip()]
    if not cols:
        raise ValueError("--columns must name at least one column")
    return cols


def _load_tensor(table: str, columns: str, domains_file: str | None, names: str | None, preset: str | None,
                 accept_data_leak: bool, overflow: str):
    from ..views.tensor import CountTensor

    cols = _columns(columns)
    frame, doms = _load_frame(table, domains_file, names, preset)
    doms = {c: d for c, d in doms.items() if c in cols}
    return CountTensor.from_frame(frame, cols, doms, accept_data_leak=accept_data_leak, overflow=overflow)


@contextmanager
def _budget_errors() -> Iterator[None]:
    """A release the ledger refuses is one line and exit status 2, like bad input."""
    from ..views.budget import BudgetExceeded

    try:
        yield
    except BudgetExceeded as exc:
        raise BadInput(" ".join(str(exc).split())) from None


def _view_params(method: str, alpha, gamma, beta, k, os_, leaf_budget: str | None = None,
                 variant: str = "improved", query_columns: int = 2) -> dict[str, Any]:
    from ..views.build import WORKLOAD_PARAM

    if method == "ripost":
        return {"alpha": alpha, "gamma": gamma, "beta": beta, "k": k, "os": os_, "leaf_budget": leaf_budget,
                "variant": variant}
    if method in WORKLOAD_PARAM:
        return {WORKLOAD_PARAM[method]: query_columns}
    return {}


_table_options = [
    click.argument("table", type=PathArg(dir_okay=False)),
    click.option("--columns", required=True, help="comma-separated columns of the tensor"),
    click.option("--domains", "domains_file", type=PathArg(dir_okay=False), default=None,
                 help="JSON: column -> {\"values\": [...]} or {\"low\": a, \"high\": b, \"bins\": n}"),
    click.option("--names", default=None, help="column names of a CSV without a header line"),
    click.option("--preset", type=click.Choice(["adult"]), default=None,
                 help="public schema of a known table (adult: names and value sets from adult.names)"),
    click.option("--accept-data-leak", is_flag=True,
                 help="read undeclared domains from the data (leaks privacy; warns with the columns)"),
    click.option("--overflow", type=click.Choice(["refuse", "bin"]), default="refuse", show_default=True,
                 help="values outside a declared domain: refuse, or count them in an <overflow> bin"),
]


def _with_table_options(f):
    for opt in reversed(_table_options):
        f = opt(f)
    return f


@view.command("build")
@_with_table_options
@click.option("--epsilon", type=float, default=0.1, show_default=True)
@click.option("--method", type=click.Choice(["ripost", "privtree", "hdpview", "identity", "hdmm", "dawa", "privbayes",
                                            "mst", "aim"]), default="ripost", show_default=True,
              help="privbayes needs the synth extra, mst and aim the pgm extra")
@click.option("--variant", type=click.Choice(["improved", "paper"]), default="improved", show_default=True,
              help="ripost: Algorithms 1-3 as published (paper) or with PrivTree's phase 1 and biased tests "
                   "(improved; docs/views.md)")
@click.option("--alpha", type=float, default=None, help="ripost: decomposition share (paper 0.3, improved 0.5)")
@click.option("--gamma", type=float, default=None, help="ripost: phase-1 share (paper 0.9, improved 0.5)")
@click.option("--beta", type=float, default=None, help="ripost: convergence-test share (paper 0.4, improved 0.9)")
@click.option("--k", "k", type=int, default=4, show_default=True, help="ripost: series S^k")
@click.option("--os", "os_", type=int, default=4, show_default=True, help="ripost: series offset (>= k)")
@click.option("--leaf-budget", type=click.Choice(["rest", "fixed"]), default=None,
              help="ripost: each leaf gets what its path left (rest; improved's) or Algorithm 1's (1 - alpha) eps "
                   "(fixed; paper's)")
@click.option("--query-columns", type=int, default=2, show_default=True,
              help="hdmm, aim: columns a query restricts (the workload they optimise for; a saved aim or mst "
                   "view answers queries over at most this many columns)")
@click.option("--seed", type=int, default=None,
              help="reproducible noise, for experiments only (default: OpenDP's secure samplers)")
@click.option("--ledger", "ledger_file", type=PathArg(dir_okay=False), default=None,
              help="privacy ledger of the table (created if missing): the release is charged to it first, and "
                   "refused when the table's releases would spend more than its total budget")
@click.option("--total-budget", type=float, default=None,
              help="total epsilon of every release about this table (with --ledger; fixed by the first release)")
@click.option("--out", "out_path", type=OutputPath(".json"), required=True,
              help="view file (.json added when missing)")
@click.option("--quiet", is_flag=True, help="no progress line on stderr")
@click.option("--json", "as_json", is_flag=True)
def view_build(table, columns, domains_file, names, preset, accept_data_leak, overflow, epsilon, method, variant,
               alpha, gamma, beta, k, os_, leaf_budget, query_columns, seed, ledger_file, total_budget, out_path, quiet,
               as_json) -> None:
    """Build an epsilon-DP view of TABLE over --columns and save it.

    With --ledger, the release is charged to the table's budget in that file before any noise
    is drawn (docs/views.md, "A budget across releases")."""
    from ..views.build import NOT_RELEASES, build_view
    from ..views.sampling import BACKEND
    from ..views.session import Session
    from ..views.tensor import CountTensor
    from ..views.view import MarginalView

    with friendly_errors(), _budget_errors():
        if seed is not None:
            V.int_in_range("--seed", seed, 0)
        V.int_in_range("--query-columns", query_columns, 1, 64)
        if total_budget is not None and ledger_file is None:
            raise ValueError("--total-budget needs --ledger FILE (the total is kept in the ledger)")
        if seed is not None and ledger_file is not None:
            raise ValueError("--seed makes the noise reproducible from the seed the view file records (an "
                             "experiment, not a release), and a ledger counts releases: drop --seed or --ledger")
        if total_budget is not None:
            V.positive_float("--total-budget", total_budget)
        if accept_data_leak and ledger_file is not None:
            raise ValueError("--accept-data-leak releases the domains outside any budget; it cannot be used with "
                             "--ledger (declare the domains with --domains)")
        target = out_path
        if ledger_file is not None and Path(target).resolve() == Path(ledger_file).resolve():
            raise ValueError("--out names the ledger file: the view would replace the ledger and the charges it "
                             "holds; write the view elsewhere")
        cols = _columns(columns)
        frame, doms = _load_frame(table, domains_file, names, preset)
        doms = {c: d for c, d in doms.items() if c in cols}
        params = _view_params(method, alpha, gamma, beta, k, os_, leaf_budget, variant, query_columns)
        t0 = time.perf_counter()
        session = None
        if ledger_file is not None:
            session = Session(frame, total_budget, ledger=ledger_file)
            tensor = session.tensor(cols, doms, overflow=overflow)
            with Live(f"{method} view", quiet=quiet) as live:
                v = session.build_view(method, epsilon, columns=cols, domains=doms, overflow=overflow, rng=seed,
                                       note=f"view file {target}", progress=live, **params)
        else:
            tensor = CountTensor.from_frame(frame, cols, doms, accept_data_leak=accept_data_leak, overflow=overflow)
            with Live(f"{method} view", quiet=quiet) as live:
                v = build_view(tensor, method, epsilon, seed, progress=live, **params)
        secs = time.perf_counter() - t0
        v.params["seed"] = seed
        v.params["sampler"] = ("numpy, seeded (an experiment, not a release)" if seed is not None else
                               f"numpy (not a release: {NOT_RELEASES[method]})"
                               if method in NOT_RELEASES else BACKEND)
        written = v.save(target, degree=query_columns) if isinstance(v, MarginalView) else v.save(target)
    info = {"method": method, "columns": list(tensor.columns), "domain_cells": tensor.domain_size,
            "blocks": v.n_blocks, "epsilon": epsilon, "spent": v.spent, "seconds": secs, "seed": seed,
            "sampler": v.params["sampler"], "out": str(written)}
    if session is not None:
        info.update({"ledger": str(ledger_file), "table_spent": session.spent, "table_remaining": session.remaining,
                     "table_total": session.total})
    if as_json:
        click.echo(json.dumps(info))
        return
    out.print(f"{method} view of {len(tensor.columns)} columns ({tensor.cells_text} cells): "
              f"{v.n_blocks} blocks, spent {v.spent:.6g} of epsilon {epsilon:g}, {secs:.2f} s -> {written}",
              markup=False, highlight=False)
    if session is not None:
        out.print(f"table budget: {session.spent:.6g} of {session.total:g} spent, {session.remaining:.6g} left "
                  f"(ledger {ledger_file})", markup=False, highlight=False)
    elif not quiet:
        err.print("note: no --ledger, so this release is not counted against a total budget across releases "
                  "(docs/views.md)", markup=False, highlight=False)


@view.command("query")
@click.argument("view_file", type=PathArg(dir_okay=False))
@click.argument("queries", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True)
@table_format
def view_query(view_file, queries, as_json) -> None:
    """Answer range count queries such as "age=20..30 sex=Male" from a view file alone (no
    table, no domain file, no budget: the view is already private). One row per query: the
    query, its estimate and the standard deviation of the estimate's noise (nan, null in
    --json, where the method does not make it known or it is past float64's range)."""
    from ..views.view import load_view

    with friendly_errors():
        answers = load_view(view_file).answer(list(queries))
    rows = [{"query": q, "estimate": float(e) if math.isfinite(e) else None,
             "std": float(sd) if math.isfinite(sd) else None}
            for q, e, sd in zip(answers["query"], answers["estimate"], answers["std"])]
    if as_json:
        click.echo(json.dumps(rows, allow_nan=False))
        return
    t = Table(title=f"{len(rows)} queries on {view_file}")
    for c in ("query", "estimate", "std"):
        t.add_column(c, justify="left" if c == "query" else "right")
    for r in rows:
        t.add_row(r["query"], fmt(r["estimate"], 6) if r["estimate"] is not None else "nan",
                  fmt(r["std"], 3) if r["std"] is not None else "nan")
    print_table(t)


@view.command("ledger")
@click.argument("ledger_file", type=PathArg(dir_okay=False))
@click.option("--json", "as_json", is_flag=True)
@table_format
def view_ledger(ledger_file, as_json) -> None:
    """Show a privacy ledger: per table, its total budget, what its releases spent and what is
    left."""
    from ..views.ledger import ledger_summary

    with friendly_errors():
        rows = ledger_summary(ledger_file)
    if as_json:
        click.echo(json.dumps(rows))
        return
    t = Table(title=f"privacy ledger {ledger_file}")
    for c in ("table", "total", "spent", "remaining", "releases"):
        t.add_column(c, justify="left" if c == "table" else "right")
    for r in rows:
        t.add_row(r["table"][:23] + "...", fmt(r["total"]), fmt(r["spent"], 6), fmt(r["remaining"], 6),
                  str(r["releases"]))
    print_table(t)


@view.command("compare")
@_with_table_options
@click.option("--methods", default="ripost,hdpview,privtree,identity", show_default=True,
              help="comma-separated, among ripost, privtree, hdpview, identity, hdmm, dawa, privbayes, mst, aim")
@click.option("--epsilon", type=float, default=0.1, show_default=True)
@click.option("--queries", type=int, default=3000, show_default=True, help="random range queries")
@click.option("--query-columns", type=int, default=2, show_default=True, help="columns each query restricts")
@click.option("--reps", type=int, default=10, show_default=True, help="repetitions per method")
@click.option("--seed", type=int, default=None, help="seed for workload and noise (default: drawn and recorded)")
@click.option("--out", "out_path", type=OutputPath(".json"), default=None,
              help="write the table as JSON (.json added when missing)")
@click.option("--quiet", is_flag=True, help="no progress line on stderr")
@click.option("--json", "as_json", is_flag=True)
@table_format
def view_compare(table, columns, domains_file, names, preset, accept_data_leak, overflow, methods, epsilon, queries,
                 query_columns, reps, seed, out_path, quiet, as_json) -> None:
    """RMSE of several view methods on one random range-query workload (R-RMSE vs RIPOST).

    An experiment on your own data, not a release: the errors are measured against the true
    answers, so the table it prints is not private and must not be published. It therefore
    takes no --ledger and charges none (docs/views.md)."""
    from ..experiments.views import compare_views

    with friendly_errors():
        names_ = [m.strip() for m in methods.split(",") if m.strip()]
        V.int_in_range("--queries", queries, 1)
        V.int_in_range("--query-columns", query_columns, 1)
        seed = resolve_seed(seed)
        target = out_path
        tensor = _load_tensor(table, columns, domains_file, names, preset, accept_data_leak, overflow)
        with Live(f"comparing {', '.join(names_)}", quiet=quiet) as live:
            rows, _, skipped_by = compare_views(tensor, names_, epsilon, queries, query_columns, reps, seed,
                                                progress=live)
        skipped = [f"{m} skipped: {why}" for m, why in skipped_by.items()]
        report = {"columns": list(tensor.columns), "epsilon": epsilon, "seed": seed,
                  "rows": [r.as_dict() for r in rows], "skipped": skipped}
        if target is not None:
            write_json(target, report)
    if as_json:
        click.echo(json.dumps(report))
        return
    for msg in skipped:
        err.print(msg)
    t = Table(title=f"{len(tensor.columns)} columns, {tensor.cells_text} cells, eps={epsilon:g}, "
                    f"{queries} queries on {query_columns} columns, {reps} reps")
    for c in ("method", "RMSE", "± sd", "R-RMSE", "blocks", "sec", "spent"):
        t.add_column(c, justify="left" if c == "method" else "right")
    for r in rows:
        t.add_row(r.method, fmt(r.rmse_mean), fmt(r.rmse_std, 3), fmt(r.relative, 3), fmt(r.blocks_mean),
                  fmt(r.seconds_mean, 3), fmt(r.spent_max))
    print_table(t)

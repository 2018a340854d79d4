"""``certdp solve``, ``certdp compare`` and ``certdp demo``: mechanisms for a dataset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import click
import numpy as np
from rich.table import Table

from .. import _validate as V
from .._io import write_json
from ..audit import audit_file
from ..datasets import build_space, parse_dataset
from ..measures import quantile_loss, uniform_loss
from ..mechanism import Mechanism, SolveResult
from ..solve import METHODS, option_help, option_table
from ..solve import solve as solve_space
from .common import (Live, OutputFolder, OutputPath, err, fmt, friendly_errors, instance_options, main, note,
                     out, print_table, resolve_seed, space_from_options, table_format)


def method_option(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The click option of method option ``name``, made from the registry (:data:`certdp.solve.METHODS`):
    its type, its choices (the union over the methods that take it), its help with each
    method's default; a flag pair ``--X/--no-X`` for a True/False option. Its value is None
    unless given, so the method's own default applies."""
    entries = option_table()[name]
    kind = entries[0][1].kind
    flag = "--" + name.replace("_", "-")
    help_text = option_help(name)
    if kind is bool:
        return click.option(f"{flag}/--no-{name.replace('_', '-')}", name, default=None, help=help_text)
    choices = list(dict.fromkeys(c for _, opt in entries for c in opt.choices))
    return click.option(flag, name, type=click.Choice(choices) if choices else kind, default=None, help=help_text)


def method_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Every method option the command line takes, in the registry's order."""
    names = [n for n, entries in option_table().items() if entries[0][1].command_line]
    for name in reversed(names):
        f = method_option(name)(f)
    return f


def given_options(ctx: click.Context, params: dict[str, Any]) -> dict[str, Any]:
    """The method options the user set on the command line."""
    return {name: value for name, value in params.items()
            if name in option_table() and ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE}


def flag_name(name: str) -> str:
    """The command-line flag of method option ``name`` (``--X/--no-X`` for a True/False one)."""
    flag = name.replace("_", "-")
    return f"--{flag}/--no-{flag}" if option_table()[name][0][1].kind is bool else f"--{flag}"


def run_method(space, method: str, options: dict[str, Any], quiet: bool, live: Live | None = None) -> SolveResult:
    """Solve with a live progress line on stderr (``live``'s, when a command runs several
    solves under one line); an option the method does not take, or a bad value, is named by its
    command-line flag."""
    m = METHODS[method]
    unknown = sorted(set(options) - set(m.options))
    if unknown:
        raise ValueError(f"--method {method} does not take {', '.join(flag_name(n) for n in unknown)}")
    checked = {name: m.options[name].checked(flag_name(name), v, space) for name, v in options.items()}
    if live is not None:
        return solve_space(space, method, progress=live, **checked)
    with Live(f"{method} on {space.name}", quiet=quiet) as own:
        return solve_space(space, method, progress=own, **checked)


def exact(res: SolveResult) -> Mechanism:
    """The certified mechanism of ``res`` (ValueError for a sampled one, which has no matrix)."""
    if not isinstance(res.mechanism, Mechanism):
        raise ValueError(f"{res.method} has no exact matrix (its losses are Monte Carlo estimates)")
    return res.mechanism


@main.command()
@instance_options
@click.option("--method", type=click.Choice(list(METHODS)), default="lp", show_default=True,
              help="; ".join(f"{m.name}: {m.summary}" for m in METHODS.values()))
@method_options
@click.option("--plot", "plot_dir", type=OutputFolder(), default=None,
              help="outputs, benders: write convergence.png and (benders, 2-D data) partition.png here")
@click.option("--out", "target", type=OutputPath(".npz"), default=None,
              help="write the mechanism (.npz added when missing)")
@click.option("--json", "as_json", is_flag=True, help="print a machine-readable summary on stdout")
@table_format
@click.pass_context
def solve(ctx: click.Context, dataset: str, cell: float, outputs: int | None, epsilon: float, eta: float, cost: str,
          seed: int | None, quiet: bool, method: str, plot_dir: Path | None, target: Path | None, as_json: bool,
          **method_params: Any) -> None:
    """Compute a certified mDP mechanism for a dataset."""
    with friendly_errors():
        options = given_options(ctx, method_params)
        seed = resolve_seed(seed)
        if "seed" in METHODS[method].options:
            options["seed"] = seed
        if target and method in ("madlib", "laplace"):
            raise ValueError(f"--out: {method} has no exact matrix to write (its losses are Monte Carlo estimates)")
        if plot_dir and method not in ("outputs", "benders"):
            raise ValueError(f"--plot draws the rounds of outputs or benders; --method {method} has none")
        space = space_from_options(dataset, cell, outputs, epsilon, eta, cost, seed)
        res = run_method(space, method, options, quiet)
        summary = res.summary()
        summary["seed"] = seed
        if target is not None:
            summary["out"] = str(exact(res).save(target))
        if plot_dir:
            _plots(res, space, plot_dir, method)
    if as_json:
        click.echo(json.dumps(summary))
        return
    _print_solve(res, summary, space, method, epsilon, eta)


def _plots(res: SolveResult, space, plot_dir: Path, method: str) -> None:
    from ..plots import convergence_plot, partition_map

    written = [convergence_plot(res.history, Path(plot_dir) / "convergence.png",
                                f"{method} on {space.name}: N={space.n_records}, K={space.n_outputs}")]
    if "partition_labels" in res.stats and space.points is not None and space.points.shape[1] == 2:
        written.append(partition_map(space.points, res.stats["partition_labels"], res.stats["boundary_mask"],
                                     Path(plot_dir) / "partition.png",
                                     f"{res.stats['partition']['method']}, M={res.stats['subsets']}",
                                     latlon=space.metric == "haversine"))
    for p in written:
        err.print(f"plot written to {p}", highlight=False)


def _print_solve(res: SolveResult, summary: dict[str, Any], space, method: str, epsilon: float, eta: float) -> None:
    t = Table(title=f"{method} on {space.name} (N={space.n_records}, K={space.n_outputs}, eps={epsilon:g}, eta={eta:g})")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    keys: tuple[str, ...] = ("status", "objective", "expected_loss", "worst_case_loss", "lower_bound", "gap",
                             "iterations", "seconds", "constraints_before", "constraints_after", "audit_passed", "seed")
    if not isinstance(res.mechanism, Mechanism):
        keys = ("status", "draws", "expected_loss", "expected_loss_se", "worst_case_loss", "worst_case_loss_se",
                "quantile_loss", "quantile_loss_se", "seconds", "seed")
    for k in keys:
        t.add_row(k, fmt(summary.get(k)))
    stats = res.stats
    for k in ("variables", "nonzeros", "r", "lambda", "spanner_edges"):
        if k in stats and k not in keys:
            t.add_row(k, fmt(stats[k]))
    if "certify_mixing" in stats:
        t.add_row("certify mixing", fmt(stats["certify_mixing"]))
    if stats.get("components"):
        t.add_row("mDP graph components", fmt(stats["components"]))
    print_table(t)
    if res.message:
        err.print(res.message)
    if stats.get("components", 1) > 1:
        err.print(f"note: the mDP graph has {stats['components']} connected components "
                  f"(largest {stats['largest_component']} records); each was solved separately")
    if "out" in summary:
        out.print(f"mechanism written to {summary['out']}")


@main.command()
@instance_options
@click.option("--methods", default="expmech,constopt,spanner", show_default=True,
              help=f"comma-separated, from {','.join(METHODS)}")
@method_option("r")
@method_option("lambdas")
@method_option("delta")
@method_option("draws")
@click.option("--tight-delta", type=float, default=1e-3, show_default=True, help="delta of epsilon_tight")
@click.option("--match-tight", type=float, default=None,
              help="calibrate each method's epsilon (from --epsilon) until its measured epsilon_tight is this "
                   "within 1%, as paper 002 compares methods")
@click.option("--q", type=float, default=0.95, show_default=True,
              help="quantile of L_q (also the loss that picks constopt's lambda)")
@method_option("time_limit")
@click.option("--out", "target", type=OutputPath(".json"), default=None,
              help="write the table as JSON (.json added when missing)")
@click.option("--json", "as_json", is_flag=True)
@table_format
@click.pass_context
def compare(ctx: click.Context, dataset: str, cell: float, outputs: int | None, epsilon: float, eta: float,
            cost: str, seed: int | None, quiet: bool, methods: str, tight_delta: float, match_tight: float | None,
            q: float, target: Path | None, as_json: bool, **method_params: Any) -> None:
    """Run several methods on one instance: time, LP size, epsilon_tight, L_q, losses.

    With --match-tight T every method is run at the epsilon where its measured epsilon_tight
    is T (within 1%), so that the losses compare at equal measured privacy."""
    from ..experiments.compare import baseline_rows

    with friendly_errors():
        names = [m.strip() for m in methods.split(",") if m.strip()]
        if not names:
            raise ValueError("--methods must name at least one method")
        for m in names:
            if m not in METHODS:
                raise ValueError(f"--methods: unknown method {m!r}; choose from {', '.join(METHODS)}")
        V.open_unit("--tight-delta", tight_delta)
        V.open_unit("--q", q, upper_closed=True)
        given = given_options(ctx, method_params)
        unused = sorted(n for n in given if not any(n in METHODS[m].options for m in names))
        if unused:
            raise ValueError(f"none of --methods {','.join(names)} takes {', '.join(flag_name(n) for n in unused)}")
        seed = resolve_seed(seed)
        given["seed"] = seed
        space = space_from_options(dataset, cell, outputs, epsilon, eta, cost, seed)
        rows = []
        D = space.distance_rows()
        if match_tight is not None:
            V.positive_float("--match-tight", match_tight)
        with Live(f"compare on {space.name}", quiet=quiet) as live:
            rows = _compare_rows(space, names, given, q, tight_delta, match_tight, D, live)
        report = {"instance": space.describe(), "seed": seed, "match_tight": match_tight, "rows": rows,
                  **baseline_rows(space if match_tight is None else space.with_epsilon(match_tight), q)}
        if target is not None:
            write_json(target, report)
    if as_json:
        click.echo(json.dumps(report, default=float))
        return
    _print_compare(report, space, epsilon, eta, tight_delta, q)


def _compare_rows(space, names: list[str], given: dict[str, Any], q: float, tight_delta: float,
                  match_tight: float | None, D, live: Live) -> list[dict[str, Any]]:
    """One row per method, with the methods done out of the total on the progress line."""
    from ..experiments.compare import compare_row, match_tight as calibrate
    from ..progress import ProgressEvent

    rows: list[dict[str, Any]] = []
    for i, m in enumerate(names):
        live(ProgressEvent("build", f"{m} starts", {"done": i, "total": len(names)}))
        opts = {k: v for k, v in given.items() if k in METHODS[m].options}
        if m == "constopt":   # lambda chosen by the loss this table reports (paper 002)
            opts.update(select="quantile", q=q)
        if match_tight is None:
            res = run_method(space, m, opts, False, live)
            rows.append(compare_row(space, res, q=q, delta=tight_delta, distance=D).as_dict())
        else:
            cal = calibrate(space, m, match_tight, opts, delta=tight_delta, distance=D,
                            run=lambda sp, name, o: run_method(sp, name, o, False, live))
            if not cal.matched:
                err.print(f"warning: {m}: epsilon_tight {cal.epsilon_tight:.4g} is the closest to {match_tight:g} "
                          f"in {len(cal.trials)} solves (at epsilon {cal.epsilon:.4g})")
            row = compare_row(space.with_epsilon(cal.epsilon), cal.result, q=q, delta=tight_delta, distance=D)
            rows.append({**row.as_dict(), "matched": cal.matched, "calibration_seconds": cal.seconds,
                         "calibration": [list(t) for t in cal.trials]})
        live(ProgressEvent("build", f"{m} done", {"done": i + 1, "total": len(names)}))
    return rows


def _print_compare(report: dict[str, Any], space, epsilon: float, eta: float, tight_delta: float, q: float) -> None:
    matched = report["match_tight"] is not None
    what = f"epsilon_tight matched to {report['match_tight']:g}" if matched else f"eps={epsilon:g}"
    t = Table(title=f"{space.name}: N={space.n_records}, K={space.n_outputs}, {what}, eta={eta:g}")
    for c in ("method", "epsilon", "sec", "variables", "constraints", "non-zeros", f"eps_tight(d={tight_delta:g})",
              f"L_{q:g}", "worst", "expected", "audit"):
        t.add_column(c, justify="left" if c == "method" else "right")
    for row in report["rows"]:
        lq = fmt(row["quantile_loss"])
        if row["quantile_loss_se"] is not None:
            lq += f" ± {row['quantile_loss_se']:.2g}"
        tight = fmt(row["epsilon_tight"]) + ("" if row.get("matched", True) else " (not matched)")
        t.add_row(row["method"], fmt(row["epsilon"]), fmt(row["seconds"], 3), fmt(row["variables"]),
                  fmt(row["constraints"]),
                  fmt(row["nonzeros"]), tight, lq, fmt(row["worst_case_loss"]),
                  fmt(row["expected_loss"]),
                  {True: "PASSED", False: "FAILED", None: "n/a (Monte Carlo)"}[row["audit_passed"]])
    print_table(t)
    note(f"uniform random output: L_{q:g} {report['uniform_quantile_loss']:.4g}; packing lower bound on the "
              f"worst-case loss of any {report['match_tight'] or epsilon:g}-mDP mechanism: "
              f"{report['packing_lower_bound']:.4g}")


@main.command()
@click.option("--rows", type=int, default=10, show_default=True)
@click.option("--cols", type=int, default=12, show_default=True)
@click.option("--epsilon", type=float, default=2.0, show_default=True, help="per km")
@click.option("--seed", type=int, default=7, show_default=True)
@click.option("--out", "out_dir", type=OutputFolder(), default="out", show_default=True,
              help="folder for the two mechanism files")
@click.option("--out-dir", "out_dir_old", type=OutputFolder(), default=None, hidden=True,
              help="deprecated name of --out")
@table_format
def demo(rows: int, cols: int, epsilon: float, seed: int, out_dir: Path, out_dir_old: Path | None) -> None:
    """The main job on generated data: an optimal grid mechanism against ExpMech, audited."""
    with friendly_errors():
        if out_dir_old is not None:
            err.print("warning: --out-dir is deprecated; use --out")
            out_dir = out_dir_old
        ds = parse_dataset(f"grid:{rows}x{cols}", cell=1.0)
        space = build_space(ds, epsilon=epsilon, eta=2.0, cost="travel", seed=resolve_seed(seed))
        out.print(f"[bold]certdp demo[/bold]: grid {rows}x{cols} of 1 km cells, {space.n_records} records, "
                  f"K={space.n_outputs} outputs, eps={epsilon:g}/km, eta=2 km, travel cost to 100 destinations")
        results = {"optimal LP": run_method(space, "lp", {}, False), "ExpMech": run_method(space, "expmech", {}, True)}
        paths = {name: exact(res).save(Path(out_dir) / f"demo_{res.method}.npz") for name, res in results.items()}
    t = Table(title="optimal mechanism vs exponential mechanism (same epsilon, same instance)")
    for c in ("mechanism", "exp. loss", "L_0.95", "lower bd", "gap", "sec", "audit"):
        t.add_column(c, justify="right" if c != "mechanism" else "left")
    for name, res in results.items():
        rep = audit_file(paths[name])
        t.add_row(name, fmt(res.upper_bound), fmt(quantile_loss(exact(res).matrix, space.cost)),
                  fmt(res.lower_bound), fmt(res.gap), fmt(res.timings.get("total"), 3),
                  "PASSED" if rep.passed else "FAILED")
    print_table(t)
    out.print("written: " + ", ".join(str(p) for p in paths.values()))
    lp, em = results["optimal LP"], results["ExpMech"]
    out.print(f"uniform random output would cost {uniform_loss(space.cost, space.prior):.4g}; "
              f"the optimal mechanism's loss is {100 * (1 - lp.upper_bound / em.upper_bound):.1f}% lower than ExpMech's.")
    out.print(f"LP: {lp.stats['constraints_before']} mDP+sum constraints before the exact reduction, "
              f"{lp.stats['constraints_after']} after; certification moved {lp.stats['certify_mixing']:.2g} "
              "of the mass to uniform.")
    sample = lp.mechanism.perturb(np.arange(5), rng=seed)
    out.print(f"perturbing records 0..4 -> outputs {sample.tolist()} (try: certdp perturb {paths['optimal LP']})")
    _demo_picture(space, lp, em, Path(out_dir) / "demo.png")


def _demo_picture(space, lp: SolveResult, em: SolveResult, path: Path) -> None:
    """The demo's picture: the optimal mechanism on the map and its loss against ExpMech."""
    from .._optional import MissingExtraError
    from ..plots import mechanism_picture

    record = int(np.argmin(np.abs(space.points - space.points.mean(axis=0)).sum(axis=1)))   # a central cell
    try:
        mine, base = ((exact(res).matrix * space.cost).sum(axis=1) for res in (lp, em))
        p = mechanism_picture(space.points, space.output_points, exact(lp).matrix, record, mine, base, path,
                              names=("optimal LP", "ExpMech"),
                              title=f"{space.name}: eps {space.epsilon:g}/km, eta {space.eta:g} km, travel cost")
    except MissingExtraError as exc:
        err.print(f"no picture: {exc}", highlight=False)
        return
    note(f"picture written to {p}")

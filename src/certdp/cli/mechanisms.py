"""``certdp solve``, ``certdp compare`` and ``certdp demo``: mechanisms for a dataset."""

from __future__ import annotations

import json
import math
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
from ..solve import METHODS
from ..solve import solve as solve_space
from .common import (Live, PathArg, check_output_path, err, fmt, friendly_errors, main, note, out, print_table,
                     resolve_seed, table_format)

#: the command-line options that are options of the method (the others describe the instance
#: or the output), with the name the method knows them by
METHOD_OPTIONS = {"objective": "objective", "r": "r", "lambdas": "lambdas", "delta": "delta", "draws": "draws",
                  "solver": "solver", "time_limit": "time_limit", "tolerance": "tolerance",
                  "partition": "partition", "subsets": "subsets", "gap": "gap", "max_iterations": "max_iterations",
                  "workers": "workers", "scheduler": "scheduler", "executor": "executor", "no_reduce": "reduce",
                  "variant": "variant"}


def parse_lambdas(text: str) -> list[float]:
    """The values of ``--lambdas`` (comma-separated, finite, >= 0); ValueError naming the option otherwise."""
    parts = [p for p in text.replace(" ", "").split(",") if p]
    if not parts:
        raise ValueError("--lambdas must list at least one value, e.g. 0.001,0.1,1.0")
    try:
        vals = [float(p) for p in parts]
    except ValueError:
        raise ValueError(f"--lambdas must be comma-separated numbers, got {text!r}") from None
    bad = [v for v in vals if not (v >= 0 and math.isfinite(v))]
    if bad:
        raise ValueError(f"--lambdas must be finite and >= 0, got {bad}")
    return vals


def given_options(ctx: click.Context, params: dict[str, Any]) -> dict[str, Any]:
    """The method options the user set on the command line, by the method's names."""
    opts = {}
    for cli_name, name in METHOD_OPTIONS.items():
        if cli_name in params and ctx.get_parameter_source(cli_name) == click.core.ParameterSource.COMMANDLINE:
            value = params[cli_name]
            if cli_name == "no_reduce":
                value = not value
            elif cli_name == "lambdas":
                value = parse_lambdas(value)
            opts[name] = value
    return opts


def flag_name(name: str) -> str:
    """The command-line flag of method option ``name`` (``reduce`` is ``--no-reduce``)."""
    return "--no-reduce" if name == "reduce" else "--" + name.replace("_", "-")


def run_method(space, method: str, options: dict[str, Any], quiet: bool, live: Live | None = None) -> SolveResult:
    """Solve with a live progress line on stderr (``live``'s, when a command runs several
    solves under one line); an option the method does not take is named by its command-line
    flag."""
    unknown = sorted(set(options) - set(METHODS[method].options))
    if unknown:
        raise ValueError(f"--method {method} does not take {', '.join(flag_name(n) for n in unknown)}")
    if live is not None:
        return solve_space(space, method, progress=live, **options)
    with Live(f"{method} on {space.name}", quiet=quiet) as own:
        return solve_space(space, method, progress=own, **options)


def instance_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options that describe the instance, the same in every command that builds one."""
    opts = [
        click.option("--dataset", required=True,
                     help="grid:ROWSxCOLS | gaussian:N:DIM | road:NODES.csv,EDGES.csv:N | embedding:FILE:N"),
        click.option("--cell", type=float, default=1.0, show_default=True, help="grid: cell size (km)"),
        click.option("--outputs", "outputs", type=int, default=None,
                     help="K outputs sampled from the records (default: all)"),
        click.option("--epsilon", type=float, required=True, help="privacy budget per distance unit"),
        click.option("--eta", type=float, required=True,
                     help="neighbour threshold in distance units ('inf': every pair, as in paper 002)"),
        click.option("--cost", type=click.Choice(["distance", "travel"]), default="distance", show_default=True),
        click.option("--seed", type=int, default=None,
                     help="seed for the records, outputs and destinations drawn (default: drawn and recorded)"),
        click.option("--quiet", is_flag=True, help="no progress line on stderr"),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def space_from_options(dataset: str, cell: float, outputs: int | None, epsilon: float, eta: float, cost: str,
                       seed: int):
    """The problem instance described by the instance options of a command."""
    ds = parse_dataset(dataset, cell=cell, seed=seed)
    return build_space(ds, epsilon=epsilon, eta=eta, n_outputs=outputs, cost=cost, seed=seed)


@main.command()
@instance_options
@click.option("--method", type=click.Choice(list(METHODS)), default="lp", show_default=True)
@click.option("--objective", type=click.Choice(["expected", "worst"]), default=None,
              help="lp, spanner: expected loss (paper 000; lp's default) or worst-case loss (paper 002; spanner's)")
@click.option("--r", "r", type=int, default=None, help="constopt: nearest neighbours left free [10]")
@click.option("--lambdas", default=None, help="constopt: penalties to sweep [0.001,0.1,1,10,50]")
@click.option("--delta", type=float, default=None, help="spanner: stretch of the spanner [3]")
@click.option("--draws", type=int, default=None, help="madlib, laplace: Monte Carlo draws per record [2000]")
@click.option("--solver", type=click.Choice(["auto", "simplex", "ipm", "pdlp"]), default=None,
              help="HiGHS algorithm: lp, optmech [auto: IPM above 50,000 rows]; constopt [auto]; spanner [ipm]")
@click.option("--time-limit", type=float, default=None, help="seconds (LP methods and decompositions)")
@click.option("--tolerance", type=float, default=None,
              help="HiGHS feasibility tolerance [1e-9] (looser is faster; certification absorbs it, the gap shows it)")
@click.option("--partition", type=click.Choice(["kmeans-dv", "kmeans-rec", "kmeans-adj", "bsc", "metis"]),
              default=None, help="benders: how to partition the records [kmeans-dv]")
@click.option("--subsets", type=int, default=None, help="benders: number of subsets M [25]")
@click.option("--variant", type=click.Choice(["improved", "paper"]), default=None,
              help="benders: 'paper' is the paper's algorithm as published; 'improved' adds elastic blocks, "
                   "a certified upper bound every round, a stabilised master and the envelope inequalities [improved]")
@click.option("--gap", type=float, default=None,
              help="relative gap the result must be within to be 'optimal': lp [1e-6]; outputs, benders [0.01]")
@click.option("--max-iterations", type=int, default=None, help="outputs [500], benders [1000]: round limit")
@click.option("--workers", type=int, default=None,
              help="outputs: pricing threads, processes or Dask workers [one per core]; benders: subproblem "
                   "processes [1]")
@click.option("--executor", type=click.Choice(["threads", "dask", "serial", "process"]), default=None,
              help="outputs: where the pricing LPs run, threads, process (--workers local processes) or dask (a "
                   "LocalCluster of --workers processes, or --scheduler's cluster) [threads]; benders: serial, "
                   "process or dask [serial]")
@click.option("--scheduler", default=None,
              help="outputs, benders: address of an existing Dask scheduler (implies --executor dask)")
@click.option("--plot", "plot_dir", type=PathArg(file_okay=False), default=None,
              help="outputs, benders: write convergence.png and (benders, 2-D data) partition.png here")
@click.option("--no-reduce", is_flag=True, help="PMO methods: keep the implied mDP constraints")
@click.option("--out", "out_path", type=PathArg(dir_okay=False), default=None,
              help="write the mechanism (.npz added when missing)")
@click.option("--json", "as_json", is_flag=True, help="print a machine-readable summary on stdout")
@table_format
@click.pass_context
def solve(ctx: click.Context, dataset: str, cell: float, outputs: int | None, epsilon: float, eta: float, cost: str,
          seed: int | None, quiet: bool, method: str, plot_dir: str | None, out_path: str | None, as_json: bool,
          **method_params: Any) -> None:
    """Compute a certified mDP mechanism for a dataset."""
    with friendly_errors():
        options = given_options(ctx, method_params)
        seed = resolve_seed(seed)
        if "seed" in METHODS[method].options:
            options["seed"] = seed
        if out_path and method in ("madlib", "laplace"):
            raise ValueError(f"--out: {method} has no exact matrix to write (its losses are Monte Carlo estimates)")
        if plot_dir and method not in ("outputs", "benders"):
            raise ValueError(f"--plot draws the rounds of outputs or benders; --method {method} has none")
        target = check_output_path(out_path, ".npz")
        space = space_from_options(dataset, cell, outputs, epsilon, eta, cost, seed)
        res = run_method(space, method, options, quiet)
        summary = res.summary()
        summary["seed"] = seed
        if target is not None:
            summary["out"] = str(res.mechanism.save(target))
        if plot_dir:
            _plots(res, space, plot_dir, method)
    if as_json:
        click.echo(json.dumps(summary))
        return
    _print_solve(res, summary, space, method, epsilon, eta)


def _plots(res: SolveResult, space, plot_dir: str, method: str) -> None:
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
    keys = ("status", "objective", "expected_loss", "worst_case_loss", "lower_bound", "gap", "iterations", "seconds",
            "constraints_before", "constraints_after", "audit_passed", "seed")
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
@click.option("--r", "r", type=int, default=None, help="constopt: nearest neighbours left free [10]")
@click.option("--lambdas", default=None, help="constopt: penalties to sweep [0.001,0.1,1,10,50]")
@click.option("--delta", type=float, default=None, help="spanner: stretch of the spanner [3]")
@click.option("--draws", type=int, default=None, help="madlib, laplace: Monte Carlo draws per record [2000]")
@click.option("--tight-delta", type=float, default=1e-3, show_default=True, help="delta of epsilon_tight")
@click.option("--match-tight", type=float, default=None,
              help="calibrate each method's epsilon (from --epsilon) until its measured epsilon_tight is this "
                   "within 1%, as paper 002 compares methods")
@click.option("--q", type=float, default=0.95, show_default=True,
              help="quantile of L_q (also the loss that picks constopt's lambda)")
@click.option("--time-limit", type=float, default=None, help="seconds per method")
@click.option("--out", "out_path", type=PathArg(dir_okay=False), default=None,
              help="write the table as JSON (.json added when missing)")
@click.option("--json", "as_json", is_flag=True)
@table_format
@click.pass_context
def compare(ctx: click.Context, dataset: str, cell: float, outputs: int | None, epsilon: float, eta: float,
            cost: str, seed: int | None, quiet: bool, methods: str, tight_delta: float, match_tight: float | None,
            q: float, out_path: str | None, as_json: bool, **method_params: Any) -> None:
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
        target = check_output_path(out_path, ".json")
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
@click.option("--out", "out_dir", type=PathArg(file_okay=False), default="out", show_default=True,
              help="folder for the two mechanism files")
@click.option("--out-dir", "out_dir_old", type=PathArg(file_okay=False), default=None, hidden=True,
              help="deprecated name of --out")
@table_format
def demo(rows: int, cols: int, epsilon: float, seed: int, out_dir: str, out_dir_old: str | None) -> None:
    """The main job on generated data: an optimal grid mechanism against ExpMech, audited."""
    with friendly_errors():
        if out_dir_old is not None:
            err.print("warning: --out-dir is deprecated; use --out")
            out_dir = out_dir_old
        check_output_path(str(Path(out_dir) / "demo_lp.npz"))
        ds = parse_dataset(f"grid:{rows}x{cols}", cell=1.0)
        space = build_space(ds, epsilon=epsilon, eta=2.0, cost="travel", seed=resolve_seed(seed))
        out.print(f"[bold]certdp demo[/bold]: grid {rows}x{cols} of 1 km cells, {space.n_records} records, "
                  f"K={space.n_outputs} outputs, eps={epsilon:g}/km, eta=2 km, travel cost to 100 destinations")
        results = {"optimal LP": run_method(space, "lp", {}, False), "ExpMech": run_method(space, "expmech", {}, True)}
        paths = {name: res.mechanism.save(Path(out_dir) / f"demo_{res.method}.npz") for name, res in results.items()}
    t = Table(title="optimal mechanism vs exponential mechanism (same epsilon, same instance)")
    for c in ("mechanism", "exp. loss", "L_0.95", "lower bd", "gap", "sec", "audit"):
        t.add_column(c, justify="right" if c != "mechanism" else "left")
    for name, res in results.items():
        rep = audit_file(paths[name])
        t.add_row(name, fmt(res.upper_bound), fmt(quantile_loss(res.mechanism.matrix, space.cost)),
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
        per_record = [(res.mechanism.matrix * space.cost).sum(axis=1) for res in (lp, em)]
        p = mechanism_picture(space.points, space.output_points, lp.mechanism.matrix, record, *per_record, path, names=("optimal LP", "ExpMech"),
                              title=f"{space.name}: eps {space.epsilon:g}/km, eta {space.eta:g} km, travel cost")
    except MissingExtraError as exc:
        err.print(f"no picture: {exc}", highlight=False)
        return
    note(f"picture written to {p}")

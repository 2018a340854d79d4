"""The ``scaledp`` command."""

from __future__ import annotations

import csv
import json
import math
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import click
import numpy as np
from rich.console import Console
from rich.table import Table

from . import _validate as V
from ._optional import MissingExtraError
from .audit import audit_file
from .datasets import build_space, parse_dataset
from .lp.outcome import SolverLimitError
from .measures import quantile_loss, uniform_loss
from .mechanism import Mechanism, SolveResult
from .progress import ProgressEvent
from .solve import METHODS, solve as solve_space

err = Console(stderr=True)
out = Console()


@contextmanager
def _friendly_errors() -> Iterator[None]:
    """Turn bad input into a one-line error (exit 2) instead of a traceback."""
    try:
        yield
    except (ValueError, TypeError) as exc:
        raise click.UsageError(str(exc)) from None
    except (SolverLimitError, MissingExtraError) as exc:
        raise click.ClickException(str(exc)) from None


def _fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        return f"{v:.{digits}g}"
    return str(v)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="scaledp")
def main() -> None:
    """scaledp: privacy mechanisms that are optimal and still scale."""


def _space_from_options(dataset: str, cell: float, outputs: int | None, epsilon: float, eta: float,
                        cost: str, seed: int | None):
    ds = parse_dataset(dataset, cell=cell, seed=seed)
    return build_space(ds, epsilon=epsilon, eta=eta, n_outputs=outputs, cost=cost, seed=seed)


def _parse_lambdas(text: str) -> list[float]:
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


#: solve's command-line options that are options of the method (the others describe the
#: instance or the output), with the name the method knows them by
METHOD_OPTIONS = {"objective": "objective", "r": "r", "lambdas": "lambdas", "delta": "delta", "draws": "draws",
                  "solver": "solver", "time_limit": "time_limit", "tolerance": "tolerance",
                  "partition": "partition", "subsets": "subsets", "gap": "gap", "max_iterations": "max_iterations",
                  "workers": "workers", "scheduler": "scheduler", "no_reduce": "reduce"}


def _given_options(ctx: click.Context, params: dict[str, Any]) -> dict[str, Any]:
    """The method options the user set on the command line, by the method's names."""
    opts = {}
    for cli_name, name in METHOD_OPTIONS.items():
        if cli_name in params and ctx.get_parameter_source(cli_name) == click.core.ParameterSource.COMMANDLINE:
            value = params[cli_name]
            if cli_name == "no_reduce":
                value = not value
            elif cli_name == "lambdas":
                value = _parse_lambdas(value)
            opts[name] = value
    return opts


def _flag_name(name: str) -> str:
    return "--no-reduce" if name == "reduce" else "--" + name.replace("_", "-")


def _run(space, method: str, options: dict[str, Any], quiet: bool) -> SolveResult:
    """Solve with a live progress line on stderr (none with ``quiet``); an option the method
    does not take is named by its command-line flag."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    unknown = sorted(set(options) - set(METHODS[method].options))
    if unknown:
        raise ValueError(f"--method {method} does not take {', '.join(_flag_name(n) for n in unknown)}")
    if quiet:
        return solve_space(space, method, **options)
    t0 = time.perf_counter()
    with err.status("solving ...") as status:
        def progress(e: ProgressEvent) -> None:
            status.update(f"[{time.perf_counter() - t0:6.1f}s] {e.message}")
        return solve_space(space, method, progress=progress, **options)


@main.command()
@click.option("--dataset", required=True, help="grid:ROWSxCOLS | gaussian:N:DIM | road:NODES.csv,EDGES.csv:N | embedding:FILE:N")
@click.option("--cell", type=float, default=1.0, show_default=True, help="grid cell size (km)")
@click.option("--outputs", "outputs", type=int, default=None, help="K outputs sampled from the records (default: all)")
@click.option("--epsilon", type=float, required=True, help="privacy budget per distance unit")
@click.option("--eta", type=float, required=True, help="neighbour threshold ('inf': every pair, as in paper 002)")
@click.option("--cost", type=click.Choice(["distance", "travel"]), default="distance", show_default=True)
@click.option("--method", type=click.Choice(list(METHODS)), default="lp", show_default=True)
@click.option("--objective", type=click.Choice(["expected", "worst"]), default=None,
              help="lp, spanner: expected loss (paper 000; lp's default) or worst-case loss (paper 002; spanner's)")
@click.option("--r", "r", type=int, default=None, help="constopt: nearest neighbours left free [10]")
@click.option("--lambdas", default=None, help="constopt: penalties to sweep [0.001,0.1,1.0]")
@click.option("--delta", type=float, default=None, help="spanner: stretch of the spanner [2]")
@click.option("--draws", type=int, default=None, help="madlib, laplace: Monte Carlo draws per record [2000]")
@click.option("--solver", type=click.Choice(["simplex", "ipm", "pdlp", "auto"]), default=None,
              help="HiGHS algorithm: lp, optmech [simplex]; constopt [auto: by size]; spanner [ipm]")
@click.option("--time-limit", type=float, default=None, help="seconds (LP methods and decompositions)")
@click.option("--tolerance", type=float, default=None,
              help="HiGHS feasibility tolerance [1e-9] (looser is faster; certification absorbs it, the gap shows it)")
@click.option("--partition", type=click.Choice(["kmeans-dv", "kmeans-rec", "kmeans-adj", "bsc", "metis"]),
              default=None, help="benders: how to partition the records [kmeans-dv]")
@click.option("--subsets", type=int, default=None, help="benders: number of subsets M [25]")
@click.option("--gap", type=float, default=None, help="outputs, benders: stop at this relative gap [0.01]")
@click.option("--max-iterations", type=int, default=None, help="outputs [500], benders [1000]: round limit")
@click.option("--workers", type=int, default=None,
              help="outputs: pricing threads [one per core]; benders: subproblem processes [1]")
@click.option("--scheduler", default=None, help="benders: address of an existing Dask scheduler")
@click.option("--plot", "plot_dir", type=click.Path(file_okay=False), default=None,
              help="outputs, benders: write convergence.png and (benders, 2-D data) partition.png here")
@click.option("--no-reduce", is_flag=True, help="PMO methods: keep the implied mDP constraints")
@click.option("--seed", type=int, default=None,
              help="seed for sampling records, outputs, destinations (and benders' k-means, madlib's draws)")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None, help="write the mechanism (.npz)")
@click.option("--json", "as_json", is_flag=True, help="print a machine-readable summary")
@click.pass_context
def solve(ctx: click.Context, dataset: str, cell: float, outputs: int | None, epsilon: float, eta: float, cost: str,
          method: str, plot_dir: str | None, seed: int | None, out_path: str | None, as_json: bool,
          **method_params: Any) -> None:
    """Compute a certified mDP mechanism for a dataset."""
    with _friendly_errors():
        options = _given_options(ctx, method_params)
        if seed is not None and "seed" in METHODS[method].options:
            options["seed"] = seed
        if out_path and method in ("madlib", "laplace"):
            raise ValueError(f"--out: {method} has no exact matrix to write (its losses are Monte Carlo estimates)")
        if plot_dir and method not in ("outputs", "benders"):
            raise ValueError(f"--plot draws the rounds of outputs or benders; --method {method} has none")
        space = _space_from_options(dataset, cell, outputs, epsilon, eta, cost, seed)
        res = _run(space, method, options, quiet=as_json)
        if out_path:
            res.mechanism.save(out_path)
        if plot_dir:
            _plots(res, space, plot_dir, method, options)
    summary = res.summary()
    if out_path:
        summary["out"] = out_path
    if as_json:
        click.echo(json.dumps(summary))
        return
    _print_solve(res, summary, space, method, epsilon, eta, out_path)


def _plots(res: SolveResult, space, plot_dir: str, method: str, options: dict[str, Any]) -> None:
    from .plots import convergence_plot, partition_map

    convergence_plot(res.history, Path(plot_dir) / "convergence.png",
                     f"{method} on {space.name}: N={space.n_records}, K={space.n_outputs}")
    if "partition_labels" in res.stats and space.points is not None and space.points.shape[1] == 2:
        partition_map(space.points, res.stats["partition_labels"], res.stats["boundary_mask"],
                      Path(plot_dir) / "partition.png",
                      f"{res.stats['partition']['method']}, M={res.stats['subsets']}",
                      latlon=space.metric == "haversine")


def _print_solve(res: SolveResult, summary: dict[str, Any], space, method: str, epsilon: float, eta: float,
                 out_path: str | None) -> None:
    t = Table(title=f"{method} on {space.name} (N={space.n_records}, K={space.n_outputs}, eps={epsilon:g}, eta={eta:g})")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    keys = ("status", "objective", "expected_loss", "worst_case_loss", "lower_bound", "gap", "iterations", "seconds",
            "constraints_before", "constraints_after", "audit_passed")
    if not isinstance(res.mechanism, Mechanism):
        keys = ("status", "draws", "expected_loss", "expected_loss_se", "worst_case_loss", "worst_case_loss_se",
                "quantile_loss", "quantile_loss_se", "seconds")
    for k in keys:
        t.add_row(k, _fmt(summary.get(k)))
    stats = res.stats
    for k in ("variables", "nonzeros", "r", "lambda", "spanner_edges"):
        if k in stats and k not in keys:
            t.add_row(k, _fmt(stats[k]))
    if "certify_mixing" in stats:
        t.add_row("certify mixing", _fmt(stats["certify_mixing"]))
    if stats.get("components"):
        t.add_row("mDP graph components", _fmt(stats["components"]))
    out.print(t)
    if res.message:
        err.print(res.message)
    if stats.get("components", 1) > 1:
        err.print(f"note: the mDP graph has {stats['components']} connected components "
                  f"(largest {stats['largest_component']} records); each was solved separately")
    if out_path:
        out.print(f"mechanism written to {out_path}")


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--q", type=float, default=0.95, show_default=True, help="quantile for L_q")
@click.option("--json", "as_json", is_flag=True)
def audit(file: str, q: float, as_json: bool) -> None:
    """Exactly verify a mechanism file and report its losses. Exit status 1 if it fails."""
    with _friendly_errors():
        rep = audit_file(file, q=q)
    if as_json:
        click.echo(json.dumps(rep.as_dict()))
    else:
        v = rep.verify
        t = Table(title=f"audit of {file}")
        t.add_column("quantity")
        t.add_column("value", justify="right")
        for k, val in (("records x outputs", f"{rep.n_records} x {rep.n_outputs}"), ("epsilon", v.epsilon),
                       ("pairs checked", v.pairs_checked), ("inequalities checked", v.inequalities_checked),
                       ("violations", v.violations), ("max loss per unit distance", v.max_loss_per_distance),
                       ("max |row sum - 1|", v.max_row_error), ("expected loss", rep.expected_loss),
                       ("worst-case loss", rep.worst_case_loss), (f"L_{q:g} loss", rep.quantile_loss),
                       ("PASSED" if v.passed else "FAILED", "")):
            t.add_row(k, _fmt(val, 6))
        out.print(t)
    if not rep.verify.passed:
        sys.exit(1)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--input", "input_path", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              show_default=True, help="CSV of record indices (one per line, or a 'record' column); - for stdin")
@click.option("--seed", type=int, default=None, help="reproducible draws (default: OS secure randomness)")
def perturb(file: str, input_path: str, seed: int | None) -> None:
    """Perturb record indices with a mechanism: CSV 'record,output' on stdout."""
    with _friendly_errors():
        mech = Mechanism.load(file)
        text = sys.stdin.read() if input_path == "-" else Path(input_path).read_text()
        records = _parse_records(text)
        outs = mech.perturb(records, rng=seed)
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["record", "output"])
    for r, o in zip(records.tolist(), outs.tolist()):
        w.writerow([r, o])


def _parse_records(text: str) -> np.ndarray:
    rows = [r for r in csv.reader(text.splitlines()) if r and any(c.strip() for c in r)]
    if not rows:
        raise ValueError("input has no record indices")
    col = 0
    if not rows[0][0].strip().lstrip("-").isdigit():
        header = [c.strip() for c in rows[0]]
        if "record" not in header:
            raise ValueError(f"input header must contain a 'record' column, got {header}")
        col = header.index("record")
        rows = rows[1:]
    try:
        return np.array([int(r[col]) for r in rows], dtype=np.int64)
    except (ValueError, IndexError):
        raise ValueError("input rows must hold integer record indices") from None


@main.command()
@click.option("--dataset", required=True, help="as for solve")
@click.option("--cell", type=float, default=1.0, show_default=True)
@click.option("--outputs", "outputs", type=int, default=None, help="K outputs (default: all records)")
@click.option("--epsilon", type=float, required=True)
@click.option("--eta", type=float, default=math.inf, show_default=True, help="neighbour threshold (default: every pair)")
@click.option("--cost", type=click.Choice(["distance", "travel"]), default="distance", show_default=True)
@click.option("--methods", default="expmech,constopt,spanner", show_default=True,
              help=f"comma-separated, from {','.join(METHODS)}")
@click.option("--r", "r", type=int, default=None, help="constopt: nearest neighbours left free [10]")
@click.option("--lambdas", default=None, help="constopt: penalties to sweep [0.001,0.1,1.0]")
@click.option("--delta", type=float, default=None, help="spanner: stretch of the spanner [2]")
@click.option("--draws", type=int, default=None, help="madlib, laplace: Monte Carlo draws per record [2000]")
@click.option("--tight-delta", type=float, default=1e-3, show_default=True, help="delta of epsilon_tight")
@click.option("--q", type=float, default=0.95, show_default=True, help="quantile of L_q")
@click.option("--time-limit", type=float, default=None, help="seconds per method")
@click.option("--seed", type=int, default=None, help="seed for the instance (and madlib's, laplace's draws)")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def compare(ctx: click.Context, dataset: str, cell: float, outputs: int | None, epsilon: float, eta: float,
            cost: str, methods: str, tight_delta: float, q: float, seed: int | None, as_json: bool,
            **method_params: Any) -> None:
    """Run several methods on one instance: time, LP size, epsilon_tight, L_q, losses."""
    from .experiments.compare import baseline_rows, compare_row

    with _friendly_errors():
        names = [m.strip() for m in methods.split(",") if m.strip()]
        if not names:
            raise ValueError("--methods must name at least one method")
        for m in names:
            if m not in METHODS:
                raise ValueError(f"--methods: unknown method {m!r}; choose from {', '.join(METHODS)}")
        V.open_unit("--tight-delta", tight_delta)
        V.open_unit("--q", q, upper_closed=True)
        given = _given_options(ctx, method_params)
        unused = sorted(n for n in given if not any(n in METHODS[m].options for m in names))
        if unused:
            raise ValueError(f"none of --methods {','.join(names)} takes "
                             f"{', '.join(_flag_name(n) for n in unused)}")
        if seed is not None:
            given["seed"] = seed
        space = _space_from_options(dataset, cell, outputs, epsilon, eta, cost, seed)
        rows = []
        D = space.distance_rows()
        for m in names:
            opts = {k: v for k, v in given.items() if k in METHODS[m].options}
            res = _run(space, m, opts, quiet=as_json)
            rows.append(compare_row(space, res, q=q, delta=tight_delta, distance=D).as_dict())
        base = baseline_rows(space, q)
    if as_json:
        click.echo(json.dumps({"instance": space.describe(), "rows": rows, **base}))
        return
    t = Table(title=f"{space.name}: N={space.n_records}, K={space.n_outputs}, eps={epsilon:g}, eta={eta:g}")
    for c in ("method", "sec", "variables", "constraints", "non-zeros", f"eps_tight(d={tight_delta:g})",
              f"L_{q:g}", "worst", "expected", "audit"):
        t.add_column(c, justify="left" if c == "method" else "right")
    for row in rows:
        lq = _fmt(row["quantile_loss"])
        if row["quantile_loss_se"] is not None:
            lq += f" ± {row['quantile_loss_se']:.2g}"
        t.add_row(row["method"], _fmt(row["seconds"], 3), _fmt(row["variables"]), _fmt(row["constraints"]),
                  _fmt(row["nonzeros"]), _fmt(row["epsilon_tight"]), lq, _fmt(row["worst_case_loss"]),
                  _fmt(row["expected_loss"]),
                  {True: "PASSED", False: "FAILED", None: "n/a (Monte Carlo)"}[row["audit_passed"]])
    out.print(t)
    out.print(f"uniform random output: L_{q:g} {base['uniform_quantile_loss']:.4g}; packing lower bound on the "
              f"worst-case loss of any {epsilon:g}-mDP mechanism: {base['packing_lower_bound']:.4g}")


@main.command()
@click.option("--rows", type=int, default=10, show_default=True)
@click.option("--cols", type=int, default=12, show_default=True)
@click.option("--epsilon", type=float, default=2.0, show_default=True, help="per km")
@click.option("--seed", type=int, default=7, show_default=True)
@click.option("--out-dir", type=click.Path(file_okay=False), default="out", show_default=True)
def demo(rows: int, cols: int, epsilon: float, seed: int, out_dir: str) -> None:
    """The main job on generated data: an optimal grid mechanism against ExpMech, audited."""
    with _friendly_errors():
        ds = parse_dataset(f"grid:{rows}x{cols}", cell=1.0)
        space = build_space(ds, epsilon=epsilon, eta=2.0, cost="travel", seed=seed)
        out.print(f"[bold]scaledp demo[/bold]: grid {rows}x{cols} of 1 km cells, {space.n_records} records, "
                  f"K={space.n_outputs} outputs, eps={epsilon:g}/km, eta=2 km, travel cost to 100 destinations")
        results = {"optimal LP": _run(space, "lp", {}, quiet=False), "ExpMech": _run(space, "expmech", {}, quiet=True)}
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        paths = {}
        for name, res in results.items():
            paths[name] = res.mechanism.save(Path(out_dir) / f"demo_{res.method}.npz")
    t = Table(title="optimal mechanism vs exponential mechanism (same epsilon, same instance)")
    for c in ("mechanism", "exp. loss", "L_0.95", "lower bd", "gap", "sec", "audit"):
        t.add_column(c, justify="right" if c != "mechanism" else "left")
    for name, res in results.items():
        rep = audit_file(paths[name])
        t.add_row(name, _fmt(res.upper_bound), _fmt(quantile_loss(res.mechanism.matrix, space.cost)),
                  _fmt(res.lower_bound), _fmt(res.gap), _fmt(res.timings.get("total"), 3),
                  "PASSED" if rep.verify.passed else "FAILED")
    out.print(t)
    out.print("written: " + ", ".join(str(p) for p in paths.values()))
    lp, em = results["optimal LP"], results["ExpMech"]
    out.print(f"uniform random output would cost {uniform_loss(space.cost, space.prior):.4g}; "
              f"the optimal mechanism's loss is {100 * (1 - lp.upper_bound / em.upper_bound):.1f}% lower than ExpMech's.")
    out.print(f"LP: {lp.stats['constraints_before']} mDP+sum constraints before the exact reduction, "
              f"{lp.stats['constraints_after']} after; certification moved {lp.stats['certify_mixing']:.2g} "
              "of the mass to uniform.")
    sample = lp.mechanism.perturb(np.arange(5), rng=seed)
    out.print(f"perturbing records 0..4 -> outputs {sample.tolist()} (try: scaledp perturb {paths['optimal LP']})")


if __name__ == "__main__":  # pragma: no cover
    main()


# ---------------------------------------------------------------------------------------------
# views (paper 004): scaledp view build | query | compare

@main.group()
def view() -> None:
    """Private views of multidimensional tables (RIPOST and its competitors)."""


def _load_tensor(table: str, columns: str, domains_file: str | None, names: str | None, preset: str | None,
                 accept_data_leak: bool, overflow: str):
    from .views import adult
    from .views.tensor import CountTensor, Domain, read_table

    cols = [c.strip() for c in columns.split(",") if c.strip()]
    if not cols:
        raise ValueError("--columns must name at least one column")
    doms: dict[str, Domain] = {}
    col_names = [c.strip() for c in names.split(",")] if names else None
    if preset == "adult":
        names_file = Path(table).with_name("adult.names")
        if not names_file.is_file():
            raise ValueError(f"--preset adult reads the public value sets from {names_file}, which is missing")
        doms.update(adult.domains(names_file))
        frame = adult.read(table)
    else:
        frame = read_table(table, col_names)
    if domains_file:
        try:
            raw = json.loads(Path(domains_file).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"--domains: cannot read {domains_file}: {exc}") from None
        if not isinstance(raw, dict):
            raise ValueError("--domains must be a JSON object: column -> {values: [...]} or {low, high, bins}")
        for c, d in raw.items():
            doms[c] = Domain.from_dict({**d, "name": c})
    doms = {c: d for c, d in doms.items() if c in cols}
    return CountTensor.from_frame(frame, cols, doms, accept_data_leak=accept_data_leak, overflow=overflow)


def _view_params(method: str, alpha, gamma, beta, k, os_) -> dict[str, Any]:
    if method == "ripost":
        return {"alpha": alpha, "gamma": gamma, "beta": beta, "k": k, "os": os_}
    return {}


_table_options = [
    click.argument("table", type=click.Path(dir_okay=False)),
    click.option("--columns", required=True, help="comma-separated columns of the tensor"),
    click.option("--domains", "domains_file", type=click.Path(dir_okay=False), default=None,
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
@click.option("--method", type=click.Choice(["ripost", "privtree", "hdpview"]), default="ripost", show_default=True)
@click.option("--alpha", type=float, default=0.3, show_default=True, help="ripost: decomposition share")
@click.option("--gamma", type=float, default=0.9, show_default=True, help="ripost: phase-1 share")
@click.option("--beta", type=float, default=0.4, show_default=True, help="ripost: convergence-test share")
@click.option("--k", "k", type=int, default=4, show_default=True, help="ripost: series S^k")
@click.option("--os", "os_", type=int, default=4, show_default=True, help="ripost: series offset (>= k)")
@click.option("--seed", type=int, default=None, help="reproducible noise, for experiments only (default: OpenDP)")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), required=True, help="view file (.json)")
@click.option("--json", "as_json", is_flag=True)
def view_build(table, columns, domains_file, names, preset, accept_data_leak, overflow, epsilon, method, alpha,
               gamma, beta, k, os_, seed, out_path, as_json) -> None:
    """Build an epsilon-DP view of TABLE over --columns and save it."""
    from .views.build import build_view

    with _friendly_errors():
        tensor = _load_tensor(table, columns, domains_file, names, preset, accept_data_leak, overflow)
        t0 = time.perf_counter()
        v = build_view(tensor, method, epsilon, seed, **_view_params(method, alpha, gamma, beta, k, os_))
        secs = time.perf_counter() - t0
        v.save(out_path)
    info = {"method": method, "columns": list(tensor.columns), "domain_cells": float(tensor.domain_size),
            "blocks": v.n_blocks, "epsilon": epsilon, "spent": v.spent, "seconds": secs, "out": out_path}
    if as_json:
        click.echo(json.dumps(info))
    else:
        out.print(f"{method} view of {len(tensor.columns)} columns ({tensor.domain_size:.3g} cells): "
                  f"{v.n_blocks} blocks, spent {v.spent:.6g} of epsilon {epsilon:g}, {secs:.2f} s -> {out_path}")


@view.command("query")
@click.argument("view_file", type=click.Path(dir_okay=False))
@click.argument("queries", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True)
def view_query(view_file, queries, as_json) -> None:
    """Answer range count queries such as "age=20..30 sex=Male" from a saved view (no budget:
    the view is already private)."""
    from .views.view import BlockView, Workload

    with _friendly_errors():
        v = BlockView.load(view_file)
        answers = v.answer(Workload.parse(v.domains, list(queries)))
    if as_json:
        click.echo(json.dumps([{"query": q, "answer": float(a)} for q, a in zip(queries, answers)]))
        return
    for q, a in zip(queries, answers):
        out.print(f"{q}\t{a:.6g}")


@view.command("compare")
@_with_table_options
@click.option("--methods", default="ripost,hdpview,privtree,identity", show_default=True)
@click.option("--epsilon", type=float, default=0.1, show_default=True)
@click.option("--queries", type=int, default=3000, show_default=True, help="random range queries")
@click.option("--query-columns", type=int, default=2, show_default=True, help="columns each query restricts")
@click.option("--reps", type=int, default=10, show_default=True, help="repetitions per method")
@click.option("--seed", type=int, default=None, help="seed for workload and noise (experiments)")
@click.option("--json", "as_json", is_flag=True)
def view_compare(table, columns, domains_file, names, preset, accept_data_leak, overflow, methods, epsilon, queries,
                 query_columns, reps, seed, as_json) -> None:
    """RMSE of several view methods on one random range-query workload (R-RMSE vs RIPOST)."""
    from .experiments.views import compare_views

    with _friendly_errors():
        names_ = [m.strip() for m in methods.split(",") if m.strip()]
        V.int_in_range("--queries", queries, 1)
        V.int_in_range("--query-columns", query_columns, 1)
        tensor = _load_tensor(table, columns, domains_file, names, preset, accept_data_leak, overflow)
        rows, _, skipped_by = compare_views(tensor, names_, epsilon, queries, query_columns, reps, seed)
        skipped = [f"{m} skipped: {why}" for m, why in skipped_by.items()]
    if as_json:
        click.echo(json.dumps({"columns": list(tensor.columns), "epsilon": epsilon, "rows": [r.as_dict() for r in rows],
                               "skipped": skipped}))
        return
    for msg in skipped:
        err.print(msg)
    t = Table(title=f"{len(tensor.columns)} columns, {tensor.domain_size:.3g} cells, eps={epsilon:g}, "
                    f"{queries} queries on {query_columns} columns, {reps} reps")
    for c in ("method", "RMSE", "± sd", "R-RMSE", "blocks", "sec", "spent"):
        t.add_column(c, justify="left" if c == "method" else "right")
    for r in rows:
        t.add_row(r.method, _fmt(r.rmse_mean), _fmt(r.rmse_std, 3), _fmt(r.relative, 3), _fmt(r.blocks_mean),
                  _fmt(r.seconds_mean, 3), _fmt(r.spent_max))
    out.print(t)


# ------------------------------------------------------------------- LR-Geo
def _lrgeo_world(dataset: str, grid: str, data_dir: str | None):
    from .datasets.city import grid_city, helsinki
    from .experiments.instances import data_dir as default_data_dir

    try:
        rows, cols = (int(v) for v in grid.lower().split("x"))
    except ValueError:
        raise click.UsageError(f"--grid must be ROWSxCOLS, got {grid!r}") from None
    if dataset == "gridcity":
        return grid_city(rows, cols)
    d = Path(data_dir) if data_dir else default_data_dir() / "helsinki"
    if not (d / "helsinki_walking_nodes.csv").is_file():
        raise click.UsageError(f"Helsinki data not found in {d} (use --data-dir, or --dataset gridcity)")
    return helsinki(d).block(rows, cols) if (rows, cols) != (40, 40) else helsinki(d)


@main.command()
@click.option("--dataset", type=click.Choice(["helsinki", "gridcity"]), default="gridcity", show_default=True)
@click.option("--grid", default="20x20", show_default=True,
              help="ROWSxCOLS locations (helsinki: the centred block of its 40x40 grid)")
@click.option("--data-dir", default=None, help="folder with the Helsinki CSV files (default ../shared/data/helsinki)")
@click.option("--users", type=int, default=4, show_default=True, help="number of users M")
@click.option("--epsilon", type=float, default=None, help="per km (default: 1 per cell side)")
@click.option("--gamma", type=float, default=None, help="neighbour threshold, km (default 1.5 cells; 'inf': LR-Geo-F)")
@click.option("--Gamma", "Gamma", type=float, default=None, help="LR distance threshold, km (default 2.5 cells)")
@click.option("--r-obf", type=float, default=None, help="obfuscation range, km (default 3.3 cells)")
@click.option("--r-exp", type=float, default=None, help="exponential beyond this, km (default 1.65 cells)")
@click.option("--cell", type=float, default=None, help="reference table cell size, km (default 1/12 cell)")
@click.option("--method", type=click.Choice(["benders", "monolithic"]), default="benders", show_default=True)
@click.option("--gap", type=float, default=1e-4, show_default=True, help="Benders relative gap")
@click.option("--baselines", default="", help="comma list of lp,constopt,laplace,expmech to run on the same users")
@click.option("--time-limit", type=float, default=None, help="seconds per solve")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print a machine-readable summary")
def lrgeo(dataset: str, grid: str, data_dir: str | None, users: int, epsilon: float | None, gamma: float | None,
          Gamma: float | None, r_obf: float | None, r_exp: float | None, cell: float | None, method: str,
          gap: float, baselines: str, time_limit: float | None, seed: int, as_json: bool) -> None:
    """LR-Geo (paper 003): M users obfuscate their locations with locally relevant matrices
    solved jointly by the server (CLR-Geo); prints time, expected cost, lower bound,
    approximation ratio and Geo-Ind violation ratio."""
    from .experiments.lrgeo import BASELINES, run_baseline
    from .lrgeo.measures import measure_round
    from .lrgeo.protocol import run_round
    from .lrgeo.user import LRGeoParams

    with _friendly_errors():
        world = _lrgeo_world(dataset, grid, data_dir)
        c = world.cell
        base = LRGeoParams.scaled(c, eps_cell=1.0)
        P = LRGeoParams(epsilon=epsilon if epsilon is not None else base.epsilon,
                        gamma=gamma if gamma is not None else base.gamma,
                        Gamma=Gamma if Gamma is not None else base.Gamma,
                        r_obf=r_obf if r_obf is not None else base.r_obf,
                        r_exp=r_exp if r_exp is not None else min(base.r_exp, r_obf if r_obf is not None else base.r_obf),
                        cell=cell if cell is not None else base.cell)
        names = [b for b in baselines.split(",") if b]
        for b in names:
            V.choice("baseline", b, BASELINES)
        if not as_json:
            err.print(f"[dim]{world.name}: K={world.K}, cell {c * 1000:.1f} m; eps {P.epsilon:g}/km, gamma {P.gamma:g}, "
                      f"Gamma {P.Gamma:g}, r_obf {P.r_obf:g}, r_exp {P.r_exp:g}, table cell {P.cell:g} km[/dim]")
        say = None if as_json else (lambda e: err.print(f"[dim]{e.message}[/dim]"))
        rnd = run_round(world, P, users=users, seed=seed, method=method, gap=gap, time_limit=time_limit,
                        progress=say)
        if say is not None:
            say(ProgressEvent("measure", "measuring: true costs, lower bound, violations, inference"))
        rep = measure_round(rnd)
        locs = np.array([u.location for u in rnd.users])
        rep["baselines"] = [run_baseline(b, world, P, locs, time_limit=time_limit, seed=seed) for b in names]
        rep["params"] = {"epsilon": P.epsilon, "gamma": P.gamma, "Gamma": P.Gamma, "r_obf": P.r_obf,
                         "r_exp": P.r_exp, "cell": P.cell}
    if as_json:
        click.echo(json.dumps(rep, default=float))
        return
    t = Table(title=f"LR-Geo on {world.name}, {rep['users']} users")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    for k, lab in (("solve", "solve seconds"),):
        t.add_row(lab, _fmt(rep["seconds"][k]))
    for k, lab in (("method", "solver"), ("status", "status"), ("iterations", "iterations"),
                   ("expected_cost_own_row", "expected cost, users' own rows (km)"),
                   ("expected_cost_lr_sets", "LR objective, true costs"), ("lower_bound", "lower bound (Thm 4.7)"),
                   ("approximation_ratio", "approximation ratio"), ("violation_ratio", "Geo-Ind violation ratio"),
                   ("max_error", "max violation error"), ("users_located_by_columns", "users the server can locate")):
        t.add_row(lab, _fmt(rep[k]) if not isinstance(rep[k], str) else rep[k])
    for b in rep["baselines"]:
        t.add_row(f"{b['method']}: seconds / own-row cost",
                  f"{_fmt(b['seconds'])} / {_fmt(b['expected_cost_own_row']) if b['expected_cost_own_row'] is not None else b['status']}")
    out.print(t)

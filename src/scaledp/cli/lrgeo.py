"""``scaledp lrgeo``: one LR-Geo round (paper 003), measured."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import numpy as np
from rich.table import Table

from .. import _validate as V
from .._io import write_json
from .common import Live, alias_value, check_output_path, deprecated, err, fmt, friendly_errors, main, out, resolve_seed


#: a generated city at the scale of paper 003's Rome grid (49 x 47 km, 40 x 40 cells)
ROME_KM = 48.0


def _world(dataset: str, grid: str, data_dir: str | None, network: str | None):
    from ..datasets.city import grid_city, grid_world, helsinki
    from ..datasets.road import load_road_network
    from ..experiments.instances import data_dir as default_data_dir

    try:
        rows, cols = (int(v) for v in grid.lower().split("x"))
    except ValueError:
        raise ValueError(f"--grid must be ROWSxCOLS, e.g. 20x20; got {grid!r}") from None
    if network is not None:
        parts = network.split(",")
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"--network must be NODES.csv,EDGES.csv; got {network!r}")
        for p in parts:
            if not Path(p).is_file():
                raise ValueError(f"--network: no file {p!r}")
        return grid_world(load_road_network(*parts), rows, cols, name=Path(parts[0]).stem)
    if dataset == "gridcity":
        return grid_city(rows, cols)
    if dataset == "romecity":
        return grid_city(rows, cols, cell_km=ROME_KM / max(rows, cols), streets_per_cell=3)
    d = Path(data_dir) if data_dir else default_data_dir() / "helsinki"
    if not (d / "helsinki_walking_nodes.csv").is_file():
        raise ValueError(f"--data-dir: the Helsinki CSV files are not in {d} (use --data-dir, or --dataset gridcity)")
    return helsinki(d).block(rows, cols) if (rows, cols) != (40, 40) else helsinki(d)


def _params(world, paper: bool, epsilon: float | None, eta: float | None, lr_radius: float | None,
            r_obf: float | None, r_exp: float | None, table_cell: float | None):
    from ..lrgeo.user import LRGeoParams

    base = LRGeoParams.paper(world.cell) if paper else LRGeoParams.scaled(world.cell, eps_cell=1.0)
    r_obf_ = r_obf if r_obf is not None else base.r_obf
    return LRGeoParams(epsilon=epsilon if epsilon is not None else base.epsilon,
                       gamma=eta if eta is not None else base.gamma,
                       Gamma=lr_radius if lr_radius is not None else base.Gamma,
                       r_obf=r_obf_, r_exp=r_exp if r_exp is not None else min(base.r_exp, r_obf_),
                       cell=table_cell if table_cell is not None else base.cell)


@main.command()
@click.option("--dataset", type=click.Choice(["helsinki", "gridcity", "romecity"]), default="gridcity",
              show_default=True, help="romecity: a generated city of 48 x 48 km, the scale of paper 003's Rome grid")
@click.option("--network", default=None,
              help="NODES.csv,EDGES.csv of any road network (columns id,lon,lat and u,v,length_m); the grid is laid "
                   "over its bounding box")
@click.option("--grid", default="20x20", show_default=True,
              help="ROWSxCOLS locations (helsinki: the centred block of its 40x40 grid)")
@click.option("--paper-settings/--scaled-settings", "paper", default=None,
              help="defaults of paper 003 (eps 10/km, lr-radius 20 km, r_obf 4 km, table cell 0.1 km) or scaled to "
                   "the cell (1 per cell); default: paper's with --network or romecity, scaled otherwise")
@click.option("--data-dir", default=None, help="folder with the Helsinki CSV files (default: the shared data)")
@click.option("--users", type=int, default=4, show_default=True, help="number of users M")
@click.option("--epsilon", type=float, default=None, help="per km (default: 10, or 1 per cell side when scaled)")
@click.option("--eta", type=float, default=None,
              help="neighbour threshold of Geo-Ind, km (default 1.5 cells; 'inf': LR-Geo-F)")
@click.option("--lr-radius", type=float, default=None, help="LR distance threshold Gamma, km (default 2.5 cells)")
@click.option("--r-obf", type=float, default=None, help="obfuscation range, km (default 3.3 cells)")
@click.option("--r-exp", type=float, default=None, help="exponential beyond this, km (default 1.65 cells)")
@click.option("--table-cell", type=float, default=None, help="reference table cell size, km (default 1/12 cell)")
@click.option("--gamma", type=float, default=None, hidden=True, callback=deprecated("--eta"))
@click.option("--Gamma", "Gamma", type=float, default=None, hidden=True, callback=deprecated("--lr-radius"))
@click.option("--cell", type=float, default=None, hidden=True, callback=deprecated("--table-cell"))
@click.option("--method", type=click.Choice(["benders", "monolithic"]), default="benders", show_default=True)
@click.option("--gap", type=float, default=1e-4, show_default=True, help="Benders relative gap")
@click.option("--baselines", default="", help="comma list of lp,constopt,laplace,expmech to run on the same users")
@click.option("--time-limit", type=float, default=None, help="seconds per solve")
@click.option("--seed", type=int, default=None, help="seed for the users' locations (default: drawn and recorded)")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None,
              help="write the report as JSON (.json added when missing)")
@click.option("--quiet", is_flag=True, help="no progress line on stderr")
@click.option("--json", "as_json", is_flag=True, help="print a machine-readable summary")
@click.pass_context
def lrgeo(ctx: click.Context, dataset: str, network: str | None, grid: str, paper: bool | None,
          data_dir: str | None, users: int, epsilon: float | None,
          eta: float | None, lr_radius: float | None, r_obf: float | None, r_exp: float | None,
          table_cell: float | None, gamma: float | None, Gamma: float | None, cell: float | None, method: str,
          gap: float, baselines: str, time_limit: float | None, seed: int | None, out_path: str | None, quiet: bool,
          as_json: bool) -> None:
    """LR-Geo (paper 003): M users obfuscate their locations with locally relevant matrices
    solved jointly by the server (CLR-Geo); prints time, expected cost, lower bound,
    approximation ratio and Geo-Ind violation ratio."""
    from ..experiments.lrgeo import BASELINES, run_baseline
    from ..lrgeo.measures import measure_round
    from ..lrgeo.protocol import run_round

    with friendly_errors():
        seed = resolve_seed(seed)
        V.positive_float("--gap", gap)
        if time_limit is not None:
            V.positive_float("--time-limit", time_limit, allow_inf=True)
        names = [b for b in baselines.split(",") if b]
        for b in names:
            V.choice("--baselines", b, BASELINES)
        target = check_output_path(out_path, ".json")
        if network is not None and ctx.get_parameter_source("dataset") == click.core.ParameterSource.COMMANDLINE:
            raise ValueError("give --dataset or --network, not both")
        world = _world(dataset, grid, data_dir, network)
        if paper is None:
            paper = network is not None or dataset == "romecity"
        P = _params(world, paper, epsilon, alias_value(ctx, "--eta", eta), alias_value(ctx, "--lr-radius", lr_radius),
                    r_obf, r_exp, alias_value(ctx, "--table-cell", table_cell))
        if not quiet:
            err.print(f"[dim]{world.name}: K={world.K}, cell {world.cell * 1000:.1f} m; eps {P.epsilon:g}/km, "
                      f"eta {P.gamma:g}, lr-radius {P.Gamma:g}, r_obf {P.r_obf:g}, r_exp {P.r_exp:g}, "
                      f"table cell {P.cell:g} km[/dim]")
        with Live(f"LR-Geo round of {users} users", quiet=quiet) as live:
            rnd = run_round(world, P, users=users, seed=seed, method=method, gap=gap, time_limit=time_limit,
                            progress=live)
            live.message = "measuring: true costs, lower bound, violations, inference"
            rep = measure_round(rnd)
            locs = np.array([u.location for u in rnd.users])
            rep["baselines"] = [run_baseline(b, world, P, locs, time_limit=time_limit, seed=seed) for b in names]
        rep["seed"] = seed
        rep["params"] = {"epsilon": P.epsilon, "eta": P.gamma, "lr_radius": P.Gamma, "r_obf": P.r_obf,
                         "r_exp": P.r_exp, "table_cell": P.cell}
        if target is not None:
            write_json(target, rep)
    if as_json:
        click.echo(json.dumps(rep, default=float))
        return
    _print(rep, world)


def _print(rep: dict[str, Any], world) -> None:
    t = Table(title=f"LR-Geo on {world.name}, {rep['users']} users")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    t.add_row("solve seconds", fmt(rep["seconds"]["solve"]))
    for k, lab in (("method", "solver"), ("status", "status"), ("iterations", "iterations"),
                   ("expected_cost_own_row", "expected cost, users' own rows (km)"),
                   ("expected_cost_lr_sets", "LR objective, true costs"), ("lower_bound", "lower bound (Thm 4.7)"),
                   ("approximation_ratio", "approximation ratio (LP bound / lower bound, the paper's)"),
                   ("approximation_ratio_true_cost", "approximation ratio (true cost / lower bound)"),
                   ("violation_ratio", "Geo-Ind violation ratio (the paper's, Eq. 30 pairs)"),
                   ("cross_user_violation_ratio", "violations among checked cross-user pairs"),
                   ("distance0_violations", "violations between rows at distance 0"),
                   ("max_error", "max violation error"), ("users_located_by_columns", "users the server can locate"),
                   ("seed", "seed")):
        t.add_row(lab, fmt(rep[k]) if not isinstance(rep[k], str) else rep[k])
    for b in rep["baselines"]:
        cost = fmt(b["expected_cost_own_row"]) if b["expected_cost_own_row"] is not None else b["status"]
        t.add_row(f"{b['method']}: seconds / own-row cost", f"{fmt(b['seconds'])} / {cost}")
    out.print(t)

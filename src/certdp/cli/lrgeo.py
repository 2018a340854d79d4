"""``certdp lrgeo``: one LR-Geo round (paper 003), measured; ``lrgeo serve`` and ``lrgeo user``: the
protocol over HTTP (:mod:`certdp.lrgeo.service`, :mod:`certdp.lrgeo.client`)."""

from __future__ import annotations

import json
from typing import Any

import click
import numpy as np
from rich.table import Table

from .. import _validate as V
from .._io import write_json
from .common import (
    Live, OutputPath, alias_value, deprecated, err, fmt, friendly_errors, main, out, print_table, resolve_seed,
    table_format)


class _Method(click.Choice):
    """LR-Geo's solve methods (:data:`certdp.lrgeo.server.METHODS`); the name 'monolithic' is
    refused with the one to use (docs/changelog.md)."""

    def __init__(self) -> None:
        from ..lrgeo.server import METHODS

        super().__init__(list(METHODS))

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value == "monolithic":
            self.fail("'monolithic' is called 'lp', as in certdp solve: use --method lp", param, ctx)
        return super().convert(value, param, ctx)


def _world(dataset: str, grid: str, data_dir: str | None, network: str | None, bbox: str | None = None):
    from ..datasets.city import load_world
    from ..experiments.instances import data_dir as default_data_dir

    try:
        rows, cols = (int(v) for v in grid.lower().split("x"))
    except ValueError:
        raise ValueError(f"--grid must be ROWSxCOLS, e.g. 20x20; got {grid!r}") from None
    d = data_dir if data_dir else default_data_dir() / "helsinki"
    try:
        return load_world(dataset, rows, cols, data_dir=d, network=network, bbox=bbox)
    except ValueError as exc:
        msg = str(exc)
        for name in ("network", "bbox"):
            if msg.startswith(name):
                raise ValueError(f"--{msg}") from None
        raise ValueError(msg + " (--data-dir)" if "Helsinki" in msg else msg) from None


def _params(world, paper: bool, epsilon: float | None, eta: float | None, lr_radius: float | None,
            r_obf: float | None, r_exp: float | None, table_cell: float | None, hide: float = 0.0):
    from ..lrgeo.user import LRGeoParams

    base = LRGeoParams.paper(world.cell) if paper else LRGeoParams.scaled(world.cell, eps_cell=1.0)
    r_obf_ = r_obf if r_obf is not None else base.r_obf
    return LRGeoParams(epsilon=epsilon if epsilon is not None else base.epsilon,
                       gamma=eta if eta is not None else base.gamma,
                       Gamma=lr_radius if lr_radius is not None else base.Gamma,
                       r_obf=r_obf_, r_exp=r_exp if r_exp is not None else min(base.r_exp, r_obf_),
                       cell=table_cell if table_cell is not None else base.cell, hide=hide)


_WORLD = [
    click.option("--dataset", type=click.Choice(["helsinki", "gridcity", "romecity"]), default="gridcity",
                 show_default=True,
                 help="romecity: a generated city of 48 x 48 km, the scale of paper 003's Rome grid"),
    click.option("--network", default=None,
                 help="NODES.csv,EDGES.csv of any road network (columns id,lon,lat and u,v,length_m); the grid is laid "
                     "over its bounding box, or over --bbox"),
    click.option("--bbox", default=None,
                 help="LON_MIN,LAT_MIN,LON_MAX,LAT_MAX (degrees): the area of the road network the grid covers "
                      "(--network or helsinki)"),
    click.option("--grid", default="20x20", show_default=True,
                 help="ROWSxCOLS locations (helsinki: the centred block of its 40x40 grid)"),
    click.option("--data-dir", default=None, help="folder with the Helsinki CSV files (default: the shared data)"),
]
_PARAMS = [
    click.option("--paper-settings/--scaled-settings", "paper", default=None,
                 help="defaults of paper 003 (eps 10/km, lr-radius 20 km, r_obf 4 km, table cell 0.1 km) or scaled to "
                     "the cell (1 per cell); default: paper's with --network or romecity, scaled otherwise"),
    click.option("--epsilon", type=float, default=None, help="per km (default: 10, or 1 per cell side when scaled)"),
    click.option("--eta", type=float, default=None,
                 help="neighbour threshold of Geo-Ind, km (default 1.5 cells; 'inf': LR-Geo-F)"),
    click.option("--lr-radius", type=float, default=None, help="LR distance threshold Gamma, km (default 2.5 cells)"),
    click.option("--r-obf", type=float, default=None, help="obfuscation range, km (default 3.3 cells)"),
    click.option("--r-exp", type=float, default=None, help="exponential beyond this, km (default 1.65 cells)"),
    click.option("--table-cell", type=float, default=None, help="reference table cell size, km (default 1/12 cell)"),
    click.option("--hide", type=float, default=0.0, show_default=True,
                 help="km: centre each LR set on a location drawn within this of the user, so the server cannot "
                      "locate users from the uploads (0: the paper's protocol)"),
    click.option("--gamma", type=float, default=None, hidden=True, callback=deprecated("--eta")),
    click.option("--Gamma", "Gamma", type=float, default=None, hidden=True, callback=deprecated("--lr-radius")),
    click.option("--cell", type=float, default=None, hidden=True, callback=deprecated("--table-cell")),
]


def _world_options(f):
    """--dataset, --network, --bbox, --grid, --data-dir: the public world, the same in every lrgeo command."""
    for o in reversed(_WORLD):
        f = o(f)
    return f


def _param_options(f):
    """The privacy and LR parameters, the same in every lrgeo command that sets them."""
    for o in reversed(_PARAMS):
        f = o(f)
    return f


def _setup(ctx: click.Context, dataset: str, network: str | None, bbox: str | None, grid: str,
           data_dir: str | None, paper: bool | None, epsilon: float | None, eta: float | None, lr_radius: float | None,
           r_obf: float | None, r_exp: float | None, table_cell: float | None, hide: float, quiet: bool):
    """(world, parameters, the world's spec for clients) from the shared options."""
    if network is not None and ctx.get_parameter_source("dataset") == click.core.ParameterSource.COMMANDLINE:
        raise ValueError("give --dataset or --network, not both")
    world = _world(dataset, grid, data_dir, network, bbox)
    if paper is None:
        paper = network is not None or dataset == "romecity"
    P = _params(world, paper, epsilon, alias_value(ctx, "--eta", eta), alias_value(ctx, "--lr-radius", lr_radius),
                r_obf, r_exp, alias_value(ctx, "--table-cell", table_cell), hide)
    if not quiet:
        err.print(f"[dim]{world.name}: K={world.K}, cell {world.cell * 1000:.1f} m; eps {P.epsilon:g}/km, "
                  f"eta {P.gamma:g}, lr-radius {P.Gamma:g}, r_obf {P.r_obf:g}, r_exp {P.r_exp:g}, "
                  f"table cell {P.cell:g} km[/dim]")
    spec = {"dataset": None if network else dataset, "network": network, "grid": list(world.shape),
            "bbox": None if bbox is None else list(world.bbox)}
    return world, P, spec


@main.group(invoke_without_command=True)
@_world_options
@click.option("--users", type=int, default=4, show_default=True, help="number of users M")
@_param_options
@click.option("--method", type=_Method(), default="benders", show_default=True,
              help="benders (the generic engine) or lp (the whole LP in one HiGHS model)")
@click.option("--gap", type=float, default=1e-4, show_default=True, help="Benders relative gap")
@click.option("--baselines", default="", help="comma list of lp,constopt,laplace,expmech to run on the same users")
@click.option("--time-limit", type=float, default=None, help="seconds per solve")
@click.option("--max-memory", type=float, default=None,
              help="GB the round may use (default: the memory available); a round estimated above it is refused")
@click.option("--seed", type=int, default=None, help="seed for the users' locations (default: drawn and recorded)")
@click.option("--out", "out_path", type=OutputPath(".json"), default=None,
              help="write the report as JSON (.json added when missing)")
@click.option("--quiet", is_flag=True, help="no progress line on stderr")
@click.option("--json", "as_json", is_flag=True, help="print a machine-readable summary")
@table_format
@click.pass_context
def lrgeo(ctx: click.Context, dataset: str, network: str | None, bbox: str | None, grid: str, paper: bool | None,
          data_dir: str | None, users: int, epsilon: float | None,
          eta: float | None, lr_radius: float | None, r_obf: float | None, r_exp: float | None,
          table_cell: float | None, hide: float, gamma: float | None, Gamma: float | None, cell: float | None,
          method: str,
          gap: float, baselines: str, time_limit: float | None, max_memory: float | None, seed: int | None,
          out_path: str | None, quiet: bool, as_json: bool) -> None:
    """LR-Geo (paper 003): M users obfuscate their locations with locally relevant matrices
    solved jointly by the server (CLR-Geo); prints time, expected cost, lower bound,
    approximation ratio and Geo-Ind violation ratio."""
    if ctx.invoked_subcommand is not None:   # serve / user: their own options
        return
    from ..experiments.lrgeo import BASELINES, run_baseline
    from ..lrgeo.measures import measure_round
    from ..lrgeo.protocol import run_round

    with friendly_errors():
        seed = resolve_seed(seed)
        V.positive_float("--gap", gap)
        if time_limit is not None:
            V.positive_float("--time-limit", time_limit, allow_inf=True)
        limit = None if max_memory is None else V.positive_float("--max-memory", max_memory) * 1e9
        names = [b for b in baselines.split(",") if b]
        for b in names:
            V.choice("--baselines", b, BASELINES)
        target = out_path
        world, P, _ = _setup(ctx, dataset, network, bbox, grid, data_dir, paper, epsilon, eta, lr_radius, r_obf,
                             r_exp, table_cell, hide, quiet)
        with Live(f"LR-Geo round of {users} users", quiet=quiet) as live:
            rnd = run_round(world, P, users=users, seed=seed, method=method, gap=gap, time_limit=time_limit,
                            progress=live, max_memory=limit)
            live.message = "measuring: true costs, lower bound, violations, inference"
            rep = measure_round(rnd)
            locs = np.array([u.location for u in rnd.users])
            rep["baselines"] = [run_baseline(b, world, P, locs, time_limit=time_limit, seed=seed) for b in names]
        rep["seed"] = seed
        rep["params"] = {"epsilon": P.epsilon, "eta": P.gamma, "lr_radius": P.Gamma, "r_obf": P.r_obf,
                         "r_exp": P.r_exp, "table_cell": P.cell, "hide": P.hide}
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
                   ("server_candidates_mean", "locations the server cannot tell apart (mean)"),
                   ("server_estimate_error_km", "error of the server's best estimate, km (mean)"),
                   ("seed", "seed")):
        t.add_row(lab, fmt(rep[k]) if not isinstance(rep[k], str) else rep[k])
    if rep.get("message"):
        t.add_row("how the solve ended", rep["message"])
    for b in rep["baselines"]:
        cost = fmt(b["expected_cost_own_row"]) if b["expected_cost_own_row"] is not None else b["status"]
        t.add_row(f"{b['method']}: seconds / own-row cost", f"{fmt(b['seconds'])} / {cost}")
    print_table(t)


@lrgeo.command("serve")
@_world_options
@_param_options
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8000, show_default=True)
@click.option("--round-users", type=int, default=4, show_default=True, help="a round closes after this many uploads")
@click.option("--round-wait", type=float, default=5.0, show_default=True,
              help="... or this many seconds after its first upload")
@click.option("--max-pending", type=int, default=1000, show_default=True, help="users in flight at most")
@click.option("--client-users", type=int, default=16, show_default=True,
              help="users in flight at most per client address")
@click.option("--client-rate", type=float, default=20.0, show_default=True,
              help="requests per second per client address (bursts of twice that, at least 10)")
@click.option("--user-rows", type=int, default=500_000, show_default=True, help="LP rows one upload may add")
@click.option("--user-seconds", type=float, default=10.0, show_default=True,
              help="solver seconds one upload may cost (a round: this times its users)")
@click.option("--max-body-mb", type=float, default=32.0, show_default=True, help="largest request body")
@click.option("--max-memory", type=float, default=None,
              help="GB the server may use (default: the memory available); a setting estimated above it is refused")
@click.option("--method", type=_Method(), default="benders", show_default=True,
              help="benders (the generic engine) or lp (the whole LP in one HiGHS model)")
@click.option("--gap", type=float, default=1e-4, show_default=True, help="Benders relative gap")
@click.option("--time-limit", type=float, default=None, help="seconds per round's solve at most")
@click.option("--quiet", is_flag=True, help="log warnings only (no access or round lines)")
@click.pass_context
def lrgeo_serve(ctx: click.Context, dataset: str, network: str | None, bbox: str | None, grid: str,
                data_dir: str | None,
                paper: bool | None, epsilon: float | None, eta: float | None, lr_radius: float | None,
                r_obf: float | None, r_exp: float | None, table_cell: float | None, hide: float,
                gamma: float | None, Gamma: float | None, cell: float | None, host: str, port: int,
                round_users: int, round_wait: float, max_pending: int, client_users: int, client_rate: float,
                user_rows: int, user_seconds: float, max_body_mb: float, max_memory: float | None, method: str,
                gap: float,
                time_limit: float | None, quiet: bool) -> None:
    """The LR-Geo server over HTTP (the 'service' extra): cost reference table, rounds of
    users, CLR-Geo solves, and a page at / where a person obfuscates their location in the
    browser. Users connect with `certdp lrgeo user --server URL` or the page; the API is
    documented at /docs. Stops cleanly on SIGINT or SIGTERM."""
    import logging

    from ..lrgeo.service import RoundScheduler, serve

    with friendly_errors():
        V.int_in_range("--port", port, 0, 65535)
        V.positive_float("--gap", gap)
        if time_limit is not None:
            V.positive_float("--time-limit", time_limit)
        limit = None if max_memory is None else V.positive_float("--max-memory", max_memory) * 1e9
        limits = _limits(round_users=round_users, round_wait=round_wait, max_pending=max_pending,
                         client_users=client_users, client_rate=client_rate, user_rows=user_rows,
                         user_seconds=user_seconds, max_body_mb=max_body_mb)
        _check_listen(host, port)
        world, P, spec = _setup(ctx, dataset, network, bbox, grid, data_dir, paper, epsilon, eta, lr_radius, r_obf,
                                r_exp, table_cell, hide, quiet)
        service_log = logging.getLogger("certdp.lrgeo.service")
        if not quiet and service_log.getEffectiveLevel() > logging.INFO:
            service_log.setLevel(logging.INFO)   # a server logs each access and each round by default
        sched = RoundScheduler(world, P, spec=spec, limits=limits, method=method, gap=gap, time_limit=time_limit,
                               max_memory=limit)
        if not quiet:
            err.print(f"LR-Geo server {sched.instance} on http://{host}:{port} ({world.name}, K={world.K}; table built "
                      f"in {sched.table_seconds:.2f} s; rounds of {round_users} users or {round_wait:g} s); the page "
                      "at /, the API at /docs")
        stopped_by = serve(sched, host=host, port=port)
    if not quiet:
        err.print(f"LR-Geo server {sched.instance} stopped{f' by {stopped_by}' if stopped_by else ''} after "
                  f"{sched.rounds_total} rounds")


def _limits(**options: Any):
    """The service's limits from the serve options; an error names the option."""
    from pydantic import ValidationError

    from ..lrgeo.service import Limits

    try:
        return Limits(**options)
    except ValidationError as exc:
        e = exc.errors()[0]
        raise ValueError(f"--{str(e['loc'][0]).replace('_', '-')}: {e['msg']}, got {e['input']!r}") from None


def _check_listen(host: str, port: int) -> None:
    """Refuse, before the table is built, an address the server could not listen on."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ValueError(f"--host {host}: {exc.strerror or exc}") from None
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(addr)
        except OSError as exc:
            raise ValueError(f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc})") from None


@lrgeo.command("user")
@click.option("--server", "url", required=True, help="the server's URL, e.g. http://127.0.0.1:8000")
@click.option("--location", type=int, default=None, help="index of the user's location in the server's world")
@click.option("--lat", type=float, default=None, help="... or the user's coordinates (the nearest location)")
@click.option("--lon", type=float, default=None)
@click.option("--data-dir", default=None, help="folder with the Helsinki CSV files (default: the shared data)")
@click.option("--network", default=None, help="this client's copy of the server's NODES.csv,EDGES.csv")
@click.option("--seed", type=int, default=None,
              help="seed for the user's random choices, the same draws as the browser page's ?seed= (default: the "
                   "operating system's randomness)")
@click.option("--wait", type=float, default=300.0, show_default=True, help="seconds to wait for the round")
@click.option("--retries", type=int, default=3, show_default=True,
              help="times a request is tried again when the server is unreachable or busy (backoff 0.5 s, doubling)")
@click.option("--json", "as_json", is_flag=True, help="print a machine-readable result")
def lrgeo_user(url: str, location: int | None, lat: float | None, lon: float | None, data_dir: str | None,
               network: str | None, seed: int | None, wait: float, retries: int, as_json: bool) -> None:
    """One LR-Geo user: builds its LR set and coefficients here, sends only those to the
    server, certifies the matrix it gets back and reports a location drawn from it. The true
    location never leaves this process."""
    from ..datasets.city import load_world
    from ..experiments.instances import data_dir as default_data_dir
    from ..lrgeo.client import LRGeoClient, ServiceError

    with friendly_errors():
        if (location is None) == (lat is None or lon is None) or ((lat is None) != (lon is None)):
            raise ValueError("give --location, or both --lat and --lon")
        V.positive_float("--wait", wait)
        V.int_in_range("--retries", retries, 0, 100)
        if seed is not None:
            V.int_in_range("--seed", seed, 0, 2 ** 64 - 1)
        client = LRGeoClient(url, data_dir=data_dir or default_data_dir() / "helsinki", timeout=60.0, retries=retries)
        try:
            if network is not None:
                spec = client.info().world
                client = LRGeoClient(url, world=load_world("gridcity", *spec.grid, network=network, bbox=spec.bbox),
                                     retries=retries)
            latlon = None if lat is None or lon is None else (lat, lon)
            res = client.obfuscate(location, latlon=latlon, rng=seed, wait=wait)
        except ServiceError as exc:
            raise ValueError(str(exc)) from None
    res["seed"] = seed
    if as_json:
        click.echo(json.dumps(res, default=float))
        return
    out.print(f"reported location {res['output']} ({res['lat']:.6f}, {res['lon']:.6f}); matrix certified "
              f"({'PASSED' if res['verified'] else 'FAILED'}), round status {res['status']}, "
              f"{res['seconds']['total']:.2f} s")

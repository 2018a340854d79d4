"""Paper 000 Figures 8-11 (its appendix D.2-D.3): for each subproblem of a Benders run, the
round at which it first answered with a feasible point, beside its size (internal records)
and the boundary records it sees; and the seconds of each subproblem solve and of each master
solve, by partitioner.

Figures 8-9 read "convergence time" as the number of rounds a subproblem needs to reach a
feasible solution. Here: the first round whose answer is 'optimal' (a hard block that is not
infeasible; an elastic block whose slack is 0), counted at the points the master sends the
blocks (the repair's extra solves are not counted); a block never feasible within the run
counts the run's rounds + 1. Pearson correlations are over every block of every instance of
a kind (the paper: 0.712, 0.6264, 0.1302, 0.6072 for size, road / grid / text / Gaussian).
Figures 10-11: CPU seconds per block solve and per master solve (the master's from each
round's record), mean over the run (the paper: k-m-DV lowest for both on every kind,
1.505 s per MP and 1.194 s per subproblem on average).

Size of a block: its variables other than slacks over K (internal records); boundary records
it sees: its coupling variables over K (the master's records whose rows it shares).

    python -m benchmarks.paper000.subproblem_rounds --kinds text grid gauss road --seeds 1
    python -m benchmarks.paper000.subproblem_rounds --design 'cap 16 + subset + reduce + clean' --kinds text
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from certdp import SolverLimitError
from certdp.experiments import instances
from certdp.lp.benders import BlockResult, BlockSpec, elastic
from certdp.lp.highs import HighsLP
from certdp.lp.executors import make_runner
from certdp.pmo.benders import solve_benders

from .._common import output_args, write_table
from .paper_switches import design_config, partition_run_args

PAPER_CORRELATION = {"road": 0.712, "grid": 0.6264, "text": 0.1302, "gauss": 0.6072}


class RecordingRunner:
    """Wraps a runner, keeping for every call each block's status, the seconds of its solve
    (wall clock of the one thread that solved it, in this process or a worker) and, for an
    infeasible block, by how much its feasibility cut cuts off the point it was made at (None
    when it gave no cut); and the master's points, and the block specs."""

    def __init__(self, blocks, workers: int, tolerance: float = 1e-9) -> None:
        self.specs = list(blocks)
        self.inner = make_runner(self.specs, executor="process" if workers > 1 else "threads", workers=workers,
                                 tolerance=tolerance)
        self.calls: list[list[tuple[str, float, float | None]]] = []
        self.points: list[np.ndarray] = []

    def solve_all(self, y: np.ndarray, theta: np.ndarray, time_limit: float | None = None) -> list[BlockResult]:
        out = self.inner.solve_all(y, theta, time_limit)
        self.points.append(np.array(y, dtype=np.float64))
        self.calls.append([(r.status, r.seconds, _violation(r, y[spec.coupling]))
                           for r, spec in zip(out, self.specs)])
        return out

    def close(self) -> None:
        self.inner.close()


def _violation(r: BlockResult, y_coupled: np.ndarray) -> float | None:
    """How far an infeasible block's feasibility cut ``const + coef'y <= 0`` (scaled to
    coefficients of at most 1 in size) is violated at the point it was made for; None for
    another answer or no cut."""
    if r.status != "infeasible" or r.cut is None:
        return None
    return float(r.cut.const + np.dot(r.cut.coef, y_coupled))


def _infeasibility(spec, y_coupled: np.ndarray) -> float | None:
    """The least total violation of the block's hard rows at ``y_coupled`` over its box (phase 1:
    one slack per side of every row, each at price 1), in the rows' own units; None when HiGHS
    does not solve it. A block feasible up to rounding has about 0; a feasibility cut can cut
    the point off by little even where this is large (a dual ray is one certificate among
    many)."""
    m = spec.W.shape[0]
    x_up = spec.x_up.copy()
    x_up[len(x_up) - spec.n_slack:] = 0.0         # an elastic block's own slacks held at 0: its hard rows
    zero = BlockSpec(c=np.zeros_like(spec.c), W=spec.W, lo=spec.lo, up=spec.up, T=spec.T, coupling=spec.coupling,
                     x_lo=spec.x_lo, x_up=x_up)
    ph = elastic(zero, np.r_[np.arange(m), np.arange(m)], np.r_[np.full(m, -1.0), np.full(m, 1.0)], 1.0,
                 slack_up=np.inf)
    shift = ph.T @ y_coupled
    sol = HighsLP(ph.c, ph.W, ph.lo - shift, ph.up - shift, ph.x_lo, ph.x_up, solver="simplex").solve()
    return float(sol.objective) if sol.status == "optimal" else None


def _censored_columns(cs: list[dict[str, Any]]) -> list[Any]:
    """The table's columns of the never-feasible blocks over the runs ``cs`` (``_censored``'s)."""
    viol = [v for c in cs for v in c["cut_violations"]]
    moves = [c["largest_move"] for c in cs if c["largest_move"] is not None]
    return [sum(len(c["blocks"]) for c in cs),
            f'{sum(c["infeasible_without_cut"] for c in cs)} of {sum(c["answers"] for c in cs)}',
            f'{float(np.median(viol)):.2g}; {max(viol):.2g}' if viol else None,
            max(moves, default=None),
            _spread([v for c in cs for v in c["infeasibility_at_last_point"] if v is not None])]


def _spread(v: list[float]) -> str | None:
    """``min; median; max`` of ``v``, or None when empty."""
    return f"{min(v):.2g}; {float(np.median(v)):.2g}; {max(v):.2g}" if v else None


def _censored(run: RecordingRunner, first: list[int]) -> dict[str, Any]:
    """What the blocks never feasible in the run were sent and gave back: their infeasible
    answers without a cut, their cuts' violations at the points they were made for, and the
    largest move of the master's point on their coupled entries between consecutive rounds."""
    never = [b for b, f in enumerate(first) if f > len(run.calls)]
    viol = [v for c in run.calls for b in never if c[b][0] == "infeasible" and (v := c[b][2]) is not None]
    moves = [float(np.abs(q[run.specs[b].coupling] - p[run.specs[b].coupling]).max(initial=0.0))
             for p, q in zip(run.points, run.points[1:]) for b in never]
    last = run.points[-1] if run.points else None
    return {"blocks": never,
            "infeasibility_at_last_point": [None if last is None else
                                            _infeasibility(run.specs[b], last[run.specs[b].coupling]) for b in never],
            "infeasible_without_cut": sum(c[b][0] == "infeasible" and c[b][2] is None
                                          for c in run.calls for b in never),
            "answers": len(never) * len(run.calls),
            "cut_violations": viol,
            "largest_move": max(moves, default=None)}


def _corr(x: list[float], y: list[float]) -> float | None:
    if len(x) < 3 or np.std(x) == 0 or np.std(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def one_run(sp, method: str, cfg, a) -> dict[str, Any]:
    """One Benders solve with the recording runner: per block (size, boundary, first feasible
    round, CPU s per solve) and the master's CPU s per round."""
    holder: list[RecordingRunner] = []
    masters: list[float] = []

    def factory(blocks):
        holder.append(RecordingRunner(blocks, a.workers))
        return holder[0]

    def progress(ev):
        if ev.stage == "round" and "master_cpu" in ev.record:
            masters.append(float(ev.record["master_cpu"]))

    K = sp.n_outputs
    cpu = time.process_time()
    try:
        r = solve_benders(sp, partition=method, config=cfg, gap=a.gap, time_limit=a.cap, max_iterations=a.rounds,
                          runner_factory=factory, progress=progress)
        end: dict[str, Any] = {"status": str(r.status), "rounds": r.iterations, "gap": r.gap}
    except SolverLimitError:                      # no feasible point: the blocks' answers are still measured
        end = {"status": "no feasible point", "rounds": len(masters), "gap": None}
    run = holder[0]
    blocks, first_all = [], []
    for b, spec in enumerate(run.specs):
        statuses = [c[b][0] for c in run.calls]
        first = next((i + 1 for i, st in enumerate(statuses) if st == "optimal"), len(run.calls) + 1)
        first_all.append(first)
        blocks.append({"block": b, "internal": (spec.W.shape[1] - spec.n_slack) / K, "boundary": len(spec.coupling) / K,
                       "first_feasible_round": first, "seconds_per_solve": float(np.mean([c[b][1] for c in run.calls])),
                       "cut_violations": [c[b][2] for c in run.calls if c[b][0] == "infeasible"]})
    end["censored"] = _censored(run, first_all)
    return {**end, "cpu_seconds": time.process_time() - cpu,
            "blocks": blocks, "master_cpu_per_round": float(np.mean(masters)) if masters else None}


def main() -> None:
    ap = argparse.ArgumentParser()
    partition_run_args(ap, seeds=1, cap=150.0, name="subproblem_rounds")
    ap.add_argument("--workers", type=int, default=1,
                    help="processes solving the blocks (1: in this process); a round's answers do not depend on it")
    a = output_args(ap).parse_args()
    cfg = design_config(a.design)
    rows: list[list[Any]] = []
    raw: list[dict[str, Any]] = []
    for kind in a.kinds:
        names = [f"{kind}-{a.size}-paper-s{s}" for s in range(1, a.seeds + 1)]
        per: dict[str, list[dict[str, Any]]] = {m: [] for m in a.partitioners}
        for name, sp in instances.available(names):
            for method in a.partitioners:
                rec = {"instance": name, "partition": method, "design": a.design, **one_run(sp, method, cfg, a)}
                per[method].append(rec)
                raw.append(rec)
                print({k: v for k, v in rec.items() if k != "blocks"}, flush=True)
        for method, rs in per.items():
            bl = [b for r in rs for b in r["blocks"]]
            first = [b["first_feasible_round"] for b in bl]
            c_size, c_bound = _corr([b["internal"] for b in bl], first), _corr([b["boundary"] for b in bl], first)
            ms = [r["master_cpu_per_round"] for r in rs if r["master_cpu_per_round"] is not None]
            rows.append([f"{kind}-{a.size}-paper", method, len(rs), ";".join(sorted({r["status"] for r in rs})),
                         float(np.mean([r["rounds"] for r in rs])), len(bl),
                         f"{min(first)}-{max(first)}", float(np.mean(first)), c_size, c_bound,
                         float(np.mean([b["seconds_per_solve"] for b in bl])), float(np.mean(ms)) if ms else None,
                         *_censored_columns([r["censored"] for r in rs]),
                         PAPER_CORRELATION.get(kind) if method == "kmeans-dv" else None])
        write_table(a.name, f"Paper 000 Figures 8-11: subproblems' rounds to a feasible answer and solve seconds, "
                    f"Benders ({a.design}), {a.size} records",
                    ["instances", "partitioner", "runs", "status", "rounds", "blocks", "first feasible round (range)",
                     "first feasible round (mean)", "corr(size, round)", "corr(boundary, round)",
                     "s per block solve", "CPU s per master solve", "never feasible: blocks",
                     "never feasible: infeasible answers without a cut", "never feasible: cut violation (median; max)",
                     "never feasible: largest move of y",
                     "never feasible: infeasibility at the last point (min; median; max)",
                     "paper corr(size, round), k-m-DV"], rows,
                    notes=[f"design: {a.design}; gap {a.gap:g}; caps {a.rounds} rounds and {a.cap:g} s wall clock per "
                           f"solve; 25 subsets, k-means seed 0, blocks solved by {a.workers} "
                           f"{'processes' if a.workers > 1 else 'thread (this process)'}",
                           "first feasible round: the first round whose answer at the master's point is 'optimal' "
                           "(hard block not infeasible, elastic block with zero slack); never: rounds + 1",
                           "size: internal records of the block; boundary: master records it shares rows with; "
                           "correlations (Pearson) over every block of every instance; blank where a value is constant",
                           "s per block solve: wall clock of the one thread solving it, mean over blocks and rounds; "
                           "CPU s per master solve: mean over rounds",
                           "never feasible: the blocks not feasible in any round; of their answers, those infeasible "
                           "without a feasibility cut (HiGHS gave no dual ray, or none that cuts the point off); "
                           "their cuts' violation (median and largest over every such cut of the runs) at the point "
                           "each was made for (the cut const + coef'y <= 0 scaled to coefficients of at most 1; "
                           "HiGHS's feasibility tolerance is 1e-9); the largest change of any coupled y entry between "
                           "two consecutive master points; their infeasibility at the run's last master point: the "
                           "least total violation of their rows (phase 1, in the rows' units)",
                           "paper: Figures 8-11 (MATLAB on 16 cores, its own instances): corr 0.712 / 0.6264 / 0.1302 "
                           "/ 0.6072 (road / grid / text / Gaussian); k-m-DV lowest block and master times, 1.505 s "
                           "per MP and 1.194 s per subproblem on average"], raw=raw, args=a)


if __name__ == "__main__":
    main()

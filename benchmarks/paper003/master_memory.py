"""Bytes a Benders master's HiGHS model holds per nonzero of its cuts: the constant behind the
cut term of :func:`certdp.lrgeo.memory.estimate_round`.

LR-Geo's master has K + 1 columns of y (plus one theta per user), and every round adds up to
two cuts per user (the in-out point's and the repair point's), each dense over the user's
coupled columns. This replays that growth on a model of the same shape: ``--users`` rows a
round with a share ``--density`` of K + 1 columns nonzero, the model solved by dual simplex
after each round, in one model or in two (the engine's whole master and its level-box
master). Each configuration runs in its own process, and the resident set's growth over the
empty model is divided by the nonzeros added and the models.

    python -m benchmarks.paper003.master_memory
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import numpy as np
import scipy.sparse as sp

from benchmarks._common import output_args, write_table

CHECKS = (50, 100, 200, 300)


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def _replay(K: int, users: int, density: float, models: int, rounds: int) -> list[list[float]]:
    """Grow ``models`` master models by ``users`` cuts a round; [round, cuts, MB, bytes per
    nonzero per model] at each of :data:`CHECKS`."""
    from certdp.lp.highs import HighsLP

    rng = np.random.default_rng(0)
    n = K + 1 + users
    c = np.r_[rng.random(K + 1), np.ones(users)]
    start = _rss_mb()
    ms = [HighsLP(c, sp.csr_matrix(np.r_[np.ones(K + 1), np.zeros(users)][None, :]), np.zeros(1), np.full(1, 1e3),
                  np.zeros(n), np.r_[np.ones(K + 1), np.full(users, 1e3)], solver="simplex", presolve=False)
          for _ in range(models)]
    for m in ms:
        m.solve()
    nnz, out = 0, []
    for r in range(1, rounds + 1):
        Y = -rng.random((users, K + 1)) * (rng.random((users, K + 1)) < density)
        R = sp.csr_matrix(np.hstack([Y, -np.eye(users)]))
        nnz += R.nnz
        up = -rng.random(users) * 10.0
        for m in ms:
            m.add_rows(R, np.full(users, -np.inf), up)
            m.solve()
        if r in CHECKS:
            grown = _rss_mb() - start
            out.append([r, r * users, grown, grown * 2**20 / nnz / models])
    return out


def main(argv: list[str] | None = None) -> None:
    ap = output_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("--K", type=int, default=1600, help="locations (the master's y has K + 1 entries)")
    ap.add_argument("--users", type=int, nargs="+", default=[4, 10], help="cuts added a round")
    ap.add_argument("--density", type=float, default=0.6, help="share of y in a cut (a user's coupled columns)")
    ap.add_argument("--rounds", type=int, default=max(CHECKS))
    ap.add_argument("--child", type=int, nargs=2, help=argparse.SUPPRESS)   # users, models: run one replay
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(_replay(args.K, args.child[0], args.density, args.child[1], args.rounds)))
        return
    rows, raw = [], []
    for users in args.users:
        for models in (1, 2):
            cmd = [sys.executable, "-m", "benchmarks.paper003.master_memory", "--K", str(args.K), "--density",
                   str(args.density), "--rounds", str(args.rounds), "--child", str(users), str(models)]
            got = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
            for r, cuts, mb, per in got:
                rows.append([args.K, users, models, r, cuts, mb, per])
                raw.append({"K": args.K, "users": users, "models": models, "round": r, "cuts": cuts, "MB": mb,
                            "bytes_per_nonzero_per_model": per})
    worst = max(r[-1] for r in rows)
    write_table("master_memory", "Resident bytes of a Benders master's HiGHS model per cut nonzero",
                ["K", "cuts a round", "models", "round", "cuts", "MB grown", "bytes / nonzero / model"], rows,
                notes=[f"most bytes per nonzero per model: {worst:.0f}",
                       f"cuts: {args.density} of the K + 1 columns of y nonzero, plus the user's theta; "
                       "dual simplex after each round; growth of the resident set over the empty model(s)"],
                raw=raw, args=args)


if __name__ == "__main__":
    main()

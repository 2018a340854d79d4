"""Exact verification, the losses of a file, and the audit of a file written without certdp."""

from __future__ import annotations

import decimal
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certdp import Mechanism, verify
from certdp.audit import MechanismFileError, audit_file, violated
from certdp.certify import certify
from certdp.measures import expected_loss, quantile_loss, worst_case_loss
from certdp.mechanism import UnverifiedMechanismError
from certdp.space import Geometry

EDGE = np.array([[0, 1]])
D1 = np.array([1.0])


def _cone_matrix(n: int, k: int, eps: float, seed: int):
    """Records on a line (neighbours within 1.5), and a matrix whose every column is a sum of
    tents exp(-eps D(., a)) (so exactly in the mDP cone) but whose rows do not sum to 1."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, n / 2, n))
    E = np.array([(i, j) for i in range(n) for j in range(i + 1, n) if x[j] - x[i] <= 1.5])
    d = x[E[:, 1]] - x[E[:, 0]]
    D = np.abs(x[:, None] - x[None, :])       # on a line with these edges, the path distance
    tents = np.exp(-eps * D)
    W = rng.exponential(1.0, (n, k)) * (rng.random((n, k)) < 0.2)
    Z = tents @ W
    Z /= Z.sum(axis=1).mean()                 # mean row sum 1; single rows stay off 1
    cost = np.abs(x[:, None] - rng.uniform(0, n / 2, k)[None, :])
    return Z, cost, E, d


def _nearly_stochastic(seed: int):
    """A mechanism with exact row sums (rebalanced cone matrix), plus a small tent added to one
    output: every column is still in the mDP cone, but the rows near the tent's centre are off
    1 (rows far away by less than 1e-7)."""
    from certdp.pmo.upper import rebalance_rows
    n, k, eps = 30, 8, 1.3
    Z, cost, E, d = _cone_matrix(n, k, eps, seed)
    Z2 = rebalance_rows(Z, cost, eps, E, d)
    rng = np.random.default_rng(seed)
    x = np.sort(np.random.default_rng(seed).uniform(0, n / 2, n))   # _cone_matrix's positions
    a, q = int(rng.integers(n)), int(rng.integers(k))
    Z3 = Z2.copy()
    Z3[:, q] += 1e-4 * np.exp(-eps * np.abs(x - x[a]))
    return Z3, cost, eps, E, d


def test_verify_catches_a_tiny_entry_next_to_zero():
    Z = np.array([[1e-9, 1 - 1e-9], [0.0, 1.0]])
    rep = verify(Z, 1.0, EDGE, D1)
    assert not rep.passed
    assert rep.violations == 1
    assert rep.worst_pair == (0, 1, 0)
    assert rep.max_loss_per_distance == np.inf


def test_verify_reports_realised_loss_per_distance():
    e = 0.7
    a = np.exp(e) / (1 + np.exp(e))
    Z = np.array([[a, 1 - a], [1 - a, a]])  # randomised response: loss exactly e per unit
    rep = verify(Z, 1.0, EDGE, D1)
    assert rep.passed and rep.violations == 0
    assert rep.max_loss_per_distance == pytest.approx(e, rel=1e-12)
    assert not verify(Z, 0.69, EDGE, D1).passed


def test_verify_checks_row_sums_and_signs():
    assert not verify(np.array([[0.5, 0.5 + 2e-9], [0.5, 0.5]]), 1.0, EDGE, D1).passed
    assert not verify(np.array([[-1e-12, 1.0], [0.0, 1.0]]), 1.0, EDGE, D1).passed


def test_losses_on_a_hand_computed_example(tmp_path):
    Z = np.array([[0.75, 0.25], [0.25, 0.75]])
    c = np.array([[0.0, 2.0], [2.0, 0.0]])
    p = np.array([0.5, 0.5])
    assert expected_loss(Z, c, p) == pytest.approx(0.5)
    assert worst_case_loss(Z, c) == pytest.approx(0.5)
    assert quantile_loss(Z, c, 0.95) == pytest.approx(0.5)
    g = Geometry(1.0, "precomputed", distance_matrix=np.array([[0.0, 1.0], [1.0, 0.0]]))
    m = Mechanism(Z, np.log(3.0) * 1.0000001, EDGE, D1, geometry=g, cost=c, prior=p, metadata={"method": "hand"})
    rep = audit_file(m.save(tmp_path / "h.npz"))
    assert rep.passed and rep.verify.passed and rep.expected_loss == pytest.approx(0.5)


def third_party_file(path, matrix, epsilon=1.0, **extra):
    """A mechanism file written with numpy alone: two records 1 km apart on a line."""
    arrays = dict(format=np.array("certdp-mechanism/2"), matrix=np.asarray(matrix, dtype=float),
                  epsilon=np.float64(epsilon), eta=np.float64(1.5),
                  metric=np.array("euclidean"), points=np.array([[0.0], [1.0]]), edges=EDGE, edge_distance=D1)
    arrays.update(extra)
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})
    return path


def test_audit_file_works_on_a_file_written_without_certdp(tmp_path):
    """The format is plain numpy: a third party's file is audited the same way."""
    bad = audit_file(third_party_file(tmp_path / "bad.npz", [[0.9, 0.1], [0.1, 0.9]]))
    assert bad.status == "failed" and bad.verify.violations == 2   # ln(9) > 1: a real violation
    assert bad.expected_loss is None
    good = audit_file(third_party_file(tmp_path / "good.npz", [[0.7, 0.3], [0.3, 0.7]]))   # ln(7/3) < 1
    assert good.status == "passed" and good.verify.pairs_checked == 1


def test_a_file_without_coordinates_or_eta_is_unverifiable(tmp_path):
    p = tmp_path / "old.npz"
    np.savez(p, matrix=np.array([[0.7, 0.3], [0.3, 0.7]]), epsilon=np.float64(1.0), edges=EDGE, edge_distance=D1)
    rep = audit_file(p)
    assert rep.status == "unverifiable" and not rep.passed and rep.verify is None
    assert any("eta" in w for w in rep.problems) and any("metric" in w for w in rep.problems)


@pytest.mark.parametrize("tamper,match", [
    (dict(edges=np.zeros((0, 2), dtype=np.int64), edge_distance=np.zeros(0)), "missing from its stored edges"),
    (dict(edge_distance=D1 * 1000), "stored edge distances differ"),
    (dict(prior=np.array([1.5, -0.5])), "prior is not a probability vector"),
    (dict(prior=np.array([0.2, 0.2])), "prior is not a probability vector"),
    (dict(cost=np.array([[0.0, np.nan], [1.0, 0.0]])), "cost has NaN"),
])
def test_a_tampered_file_fails(tmp_path, tamper, match):
    rep = audit_file(third_party_file(tmp_path / "t.npz", [[0.7, 0.3], [0.3, 0.7]], **tamper))
    assert rep.status == "failed" and any(match in w for w in rep.problems), rep.problems


def test_the_pairs_come_from_the_file_not_from_its_edge_list(tmp_path):
    """A deterministic matrix with its pair list emptied: the recomputed pair catches it."""
    rep = audit_file(third_party_file(tmp_path / "t.npz", [[1.0, 0.0], [0.0, 1.0]],
                                      edges=np.zeros((0, 2), dtype=np.int64), edge_distance=np.zeros(0)))
    assert rep.status == "failed" and rep.verify.violations == 2 and rep.verify.pairs_checked == 1


@pytest.mark.parametrize("content", [b"", b"garbage, not a zip file", b"PK\x03\x04truncated"])
def test_an_unreadable_file_is_a_clear_error(tmp_path, content):
    p = tmp_path / "x.npz"
    p.write_bytes(content)
    with pytest.raises(MechanismFileError, match="x.npz"):
        audit_file(p)


def test_a_truncated_certdp_file_is_a_clear_error(tmp_path):
    p = third_party_file(tmp_path / "t.npz", [[0.7, 0.3], [0.3, 0.7]])
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(MechanismFileError, match="t.npz"):
        audit_file(p)


def test_quantile_rejects_bad_q():
    with pytest.raises(ValueError, match="q must lie in"):
        quantile_loss(np.eye(2), np.ones((2, 2)), 0.0)


def test_verify_decides_overflow_zeros_and_nan_exactly():
    E2, d = np.array([[0, 1]]), np.array([1.0])
    # a positive entry against a zero one violates mDP at any finite eps d, even when exp(eps d) overflows
    assert verify(np.eye(2), 1000.0, E2, d).violations == 2
    assert verify(np.eye(2), 1.0, E2, d).violations == 2
    # exp(800) overflows, but e^800 * 1e-320 is only about e^63: 1e-320 against 1 is still fine there...
    Z = np.array([[1.0 - 1e-320, 1e-320], [1e-320, 1.0 - 1e-320]])
    assert verify(Z, 800.0, E2, d).passed
    # ...and at eps d = 710 it is not: e^710 * 1e-320 is about e^-26
    assert verify(Z, 710.0, E2, d).violations == 2
    bad = np.array([[np.nan, 1.0], [0.5, 0.5]])
    assert not verify(bad, 1.0, E2, d).passed


def test_certify_makes_an_overflowing_deterministic_matrix_exactly_private():
    Zc, rep = certify(np.eye(3), 1.0, np.array([[0, 1], [1, 2]]), np.array([1500.0, 2000.0]))
    assert rep.verify.passed and Zc.min() > 0 and rep.mixing < 1e-12


# ------------------------------------------------------------------ the trust model
def _solved_file(tmp_path, eta=1.5):
    """``certdp solve --dataset grid:3x3 --epsilon 1 --eta ETA --seed 1``, as the data's owner runs it."""
    from click.testing import CliRunner

    from certdp.cli import main

    p = tmp_path / "m.npz"
    res = CliRunner().invoke(main, ["solve", "--dataset", "grid:3x3", "--epsilon", "1", "--eta", str(eta),
                                    "--seed", "1", "--quiet", "--out", str(p)])
    assert res.exit_code == 0, res.output
    with np.load(p) as f:
        return p, {k: f[k] for k in f.files}


def _consistent_edges(arrays):
    """The pairs a forger would list so that the file agrees with its own (forged) geometry."""
    from .independent_audit import protected_pairs

    pairs = protected_pairs(arrays)
    return dict(edges=np.array([(i, j) for i, j, _ in pairs], dtype=np.int64).reshape(-1, 2),
                edge_distance=np.array([d for _, _, d in pairs], dtype=np.float64))


def _identity_precomputed(a):
    D = np.full((9, 9), 1e300)
    np.fill_diagonal(D, 0.0)
    out = {k: v for k, v in a.items() if k != "points"}
    return {**out, "matrix": np.eye(9), "metric": np.array("precomputed"), "distance_matrix": D}


FORGERIES = {   # the attacks: each weakens the guarantee while keeping a file that looks whole
    "identity, precomputed 1e300, no points": _identity_precomputed,
    "points x1000, identity": lambda a: {**a, "points": a["points"] * 1000, "matrix": np.eye(9)},
    "eta 1e-300, identity": lambda a: {**a, "eta": np.float64(1e-300), "matrix": np.eye(9)},
    "eta lowered to 1.2": lambda a: {**a, "eta": np.float64(1.2)},
    "metric changed to haversine, identity": lambda a: {**a, "metric": np.array("haversine"), "matrix": np.eye(9)},
    "epsilon raised to 3": lambda a: {**a, "epsilon": np.float64(3.0)},
}
OWNER = ["--dataset", "grid:3x3", "--epsilon", "1", "--eta", "1.5"]


@pytest.mark.parametrize("name", list(FORGERIES))
@pytest.mark.parametrize("edges", ["kept", "dropped", "made consistent"])
def test_a_forged_file_fails_the_owners_audit_and_never_passes_as_it_was(tmp_path, name, edges):
    """From the file alone a forgery fails (its listed pairs are not found), protects no pair
    (exit 4), or passes only for the weaker claim it states; against the owner's data it
    fails, and ``perturb`` and ``Mechanism.load`` refuse what the audit does not pass."""
    from click.testing import CliRunner

    from certdp.cli import main

    from .independent_audit import independent_audit

    _, a = _solved_file(tmp_path)
    forged = FORGERIES[name](a)
    if edges == "dropped":
        forged = {k: v for k, v in forged.items() if k not in ("edges", "edge_distance")}
    elif edges == "made consistent":
        forged = {**forged, **_consistent_edges(forged)}
    p = tmp_path / "forged.npz"
    np.savez(p, **forged)
    alone = CliRunner().invoke(main, ["audit", str(p), "--json"])
    report = json.loads(alone.stdout)
    assert alone.exit_code == {"passed": 0, "failed": 1, "no_pairs": 4}[report["status"]]
    assert report["pairs_checked"] >= 0 and (report["status"] == "passed" or "pairs checked" in alone.stderr)
    if edges == "kept" and name != "epsilon raised to 3":
        assert report["status"] == "failed"          # it lists pairs its own geometry does not give
    if report["status"] == "passed":                 # a weaker claim, true of the matrix: eta 1.2 or epsilon 3
        assert name in ("eta lowered to 1.2", "epsilon raised to 3") and report["pairs_checked"] > 0
        assert independent_audit(p)[0]
        Mechanism.load(p)
    else:
        with pytest.raises(ValueError):
            Mechanism.load(p)
        assert CliRunner().invoke(main, ["perturb", str(p)], input="0\n").exit_code == 2
    owner = CliRunner().invoke(main, ["audit", str(p), *OWNER])
    assert owner.exit_code == 1, owner.output
    assert "differs from the owner's data" in owner.output
    assert CliRunner().invoke(main, ["perturb", str(p), *OWNER], input="0\n").exit_code == 2


def test_the_owners_audit_passes_the_owners_file_and_recomputes_the_losses(tmp_path):
    from click.testing import CliRunner

    from certdp import build_space, parse_dataset
    from certdp.cli import main

    p, a = _solved_file(tmp_path)
    res = CliRunner().invoke(main, ["audit", str(p), *OWNER, "--json"])      # the seed is the file's
    rep = json.loads(res.stdout)
    assert res.exit_code == 0 and rep["pairs_checked"] == 20 and "owner's data" in rep["against"]
    space = build_space(parse_dataset("grid:3x3"), epsilon=1.0, eta=1.5, seed=1)
    py = audit_file(p, space=space)
    assert py.passed and py.expected_loss == pytest.approx(rep["expected_loss"], rel=1e-12)
    assert Mechanism.load(p, space=space).n_records == 9
    for other in (["--cost", "travel"], ["--seed", "2", "--outputs", "5"], ["--cell", "2"]):
        res = CliRunner().invoke(main, ["audit", str(p), *OWNER, *other])
        assert res.exit_code == 1 and "differs from the owner's data" in res.output, other
    for bad, match in ((["--epsilon", "1"], "need --dataset"), (OWNER[:4], "--eta")):
        res = CliRunner().invoke(main, ["audit", str(p), *bad])
        assert res.exit_code == 2 and res.output.startswith("Error:") and match in res.output


def test_a_file_that_protects_no_pair_has_its_own_exit_status(tmp_path):
    from click.testing import CliRunner

    from certdp.cli import main

    p, _ = _solved_file(tmp_path, eta=0.5)          # no two cells within 0.5 km: any matrix would pass
    res = CliRunner().invoke(main, ["audit", str(p)])
    assert res.exit_code == 4 and "protects no pair" in res.output and "0 pairs checked" in res.output
    assert CliRunner().invoke(main, ["audit", str(p), "--allow-no-pairs"]).exit_code == 0
    assert CliRunner().invoke(main, ["perturb", str(p)], input="0\n").exit_code == 2
    ok = CliRunner().invoke(main, ["perturb", str(p), "--allow-no-pairs", "--seed", "1"], input="0\n")
    assert ok.exit_code == 0 and ok.stdout.splitlines()[0] == "record,output"
    with pytest.raises(ValueError, match="protects no pair"):
        Mechanism.load(p)
    assert Mechanism.load(p, allow_no_pairs=True).edges.shape == (0, 2)


@pytest.mark.parametrize("tag,status", [("certdp-mechanism/2", "passed"), ("scaledp-mechanism/2", "passed"),
                                        (None, "unverifiable"), ("certdp-mechanism/3", "unreadable"),
                                        ("", "unreadable"), (7, "unreadable")])
def test_the_format_tag_is_checked(tmp_path, tag, status):
    _, a = _solved_file(tmp_path)
    arrays = {k: v for k, v in a.items() if k != "format"}
    if tag is not None:
        arrays["format"] = np.array(tag)
    p = tmp_path / "t.npz"
    np.savez(p, **arrays)
    if status == "unreadable":
        with pytest.raises(MechanismFileError):
            audit_file(p)
    else:
        assert audit_file(p).status == status


@pytest.mark.parametrize("field,value", [
    ("edges", lambda a: a["edges"].astype(float) + 0.4),          # truncated, they would be the same pairs
    ("output_records", lambda a: a["output_records"].astype(float)),
    ("matrix", lambda a: a["matrix"] + 1e-3j),                    # cast, it would lose its imaginary part
    ("points", lambda a: a["points"].astype(complex)),
    ("epsilon", lambda a: np.array("1.0")),
    ("metric", lambda a: np.array(1.0)),
    ("edge_distance", lambda a: a["edge_distance"].reshape(-1, 1)),
])
def test_an_array_of_the_wrong_kind_is_refused_not_converted(tmp_path, field, value):
    _, a = _solved_file(tmp_path)
    p = tmp_path / "t.npz"
    np.savez(p, **{**a, field: value(a)})
    with pytest.raises(MechanismFileError, match=field):
        audit_file(p)


def test_a_mechanism_cannot_be_changed_after_it_is_certified(tmp_path):
    p, _ = _solved_file(tmp_path)
    m = Mechanism.load(p)
    with pytest.raises(AttributeError, match="cannot be changed"):
        m.epsilon = 0.01
    with pytest.raises(AttributeError, match="cannot be changed"):
        m.edges = m.edges[:0]
    for arr in (m.matrix, m.edges, m.edge_distance, m.cost, m.prior, m.output_records, m.geometry.points):
        with pytest.raises(ValueError, match="read-only"):
            arr[0] = arr[0] * 2
    with pytest.raises(TypeError):
        m.metadata["method"] = "forged"
    assert audit_file(m.save(tmp_path / "again.npz")).passed


def test_python_inputs_of_the_wrong_kind_are_refused_not_converted():
    from certdp import Space
    from certdp.space import Geometry

    Z = np.array([[0.7, 0.3], [0.3, 0.7]])
    g = Geometry(1.5, "euclidean", points=np.array([[0.0], [1.0]]))
    with pytest.raises(TypeError, match="edges must hold integers"):
        Mechanism(Z, 1.0, np.array([[0.0, 1.0]]), D1, geometry=g)
    with pytest.raises(TypeError, match="output_records must hold integers"):
        Mechanism(Z, 1.0, EDGE, D1, geometry=g, output_records=np.array([0.0, 1.0]))
    with pytest.raises(TypeError, match="complex"):
        Mechanism(Z + 0j, 1.0, EDGE, D1)
    with pytest.raises(TypeError, match="complex"):
        Space(cost=np.ones((2, 2)) + 1j, prior=np.full(2, 0.5), epsilon=1.0, eta=1.0, points=np.array([[0.0], [1.0]]))
    with pytest.raises(TypeError, match="output_records must hold integers"):
        Space(cost=np.ones((2, 2)), prior=np.full(2, 0.5), epsilon=1.0, eta=1.0, points=np.array([[0.0], [1.0]]),
              output_records=np.array([0.0, 1.0]))
    with pytest.raises(UnverifiedMechanismError, match="do not match the geometry"):
        Mechanism(Z, 1.0, np.zeros((0, 2), dtype=np.int64), np.zeros(0), geometry=g)   # a pair left out


_entry = st.one_of(st.floats(0.0, 1.0), st.integers(1, 2**20).map(lambda m: m * 5e-324),
                   st.floats(1e-310, 1e-300))


@settings(max_examples=400, deadline=None)
@given(y=_entry, ed=st.one_of(st.floats(0.0, 700.0), st.floats(0.0, 1e-6), st.floats(0.0, 2.0)),
       steps=st.integers(-3, 3))
def test_a_passing_inequality_has_loss_at_most_ed_plus_rounding(y, ed, steps):
    """Whatever the entries (subnormals included), an inequality that ``violated`` passes has
    ln x - ln y <= ed + 4.5e-16, decided in 60-digit decimal arithmetic (the bound its
    docstring states; unscaled, 1.51 x 5e-324 rounds to 2 x 5e-324 and passed a ratio of 2)."""
    x = min(1.0, y * math.exp(ed)) if ed < 700 else 1.0   # near the boundary: a few ulps either side
    for _ in range(abs(steps)):
        x = float(np.nextafter(x, 2.0 if steps > 0 else 0.0))
    x = min(x, 1.0)
    ok = not violated(np.array([x]), np.array([y]), np.array([ed]))[0]
    if ok and x > 0:
        assert y > 0
        ctx = decimal.Context(prec=60, Emin=decimal.MIN_EMIN, Emax=decimal.MAX_EMAX)
        loss = ctx.ln(decimal.Decimal(x)) - ctx.ln(decimal.Decimal(y))
        assert loss <= decimal.Decimal(ed) + decimal.Decimal("4.5e-16")


def test_a_subnormal_ratio_above_exp_ed_is_a_violation():
    tiny = np.nextafter(0.0, 1.0)
    assert violated(np.array([2 * tiny]), np.array([tiny]), np.array([np.log(1.51)]))[0]
    assert not violated(np.array([2 * tiny]), np.array([tiny]), np.array([np.log(2.0)]))[0]


def _zip_with(tmp_path, name, members):
    """A zip of ``members`` {filename: (bytes, compression)} written by hand."""
    import zipfile

    p = tmp_path / name
    with zipfile.ZipFile(p, "w") as z:
        for member, (data, how) in members.items():
            z.writestr(member, data, compress_type=how)
    return p


def _npy(a) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def test_members_numpy_would_not_read_as_arrays_are_refused_before_reading(tmp_path):
    """A member without .npy (numpy hands it back as raw bytes), one compressed by bzip2 or
    lzma (a 1 KB file held 1.2 GB), a header declaring more than its bytes (a 10^12-entry
    matrix): each a clear MechanismFileError, and exit 2, never a traceback."""
    import zipfile

    base = {"format.npy": (_npy(np.array("certdp-mechanism/2")), zipfile.ZIP_STORED),
            "epsilon.npy": (_npy(np.float64(1.0)), zipfile.ZIP_STORED)}
    header = _npy(np.zeros((2, 2)))
    huge = header.replace(b"(2, 2)", b"(1000000, 1000000)")
    cases = {"raw.npz": {**base, "matrix": (_npy(np.eye(2)), zipfile.ZIP_STORED)},
             "bz2.npz": {**base, "matrix.npy": (_npy(np.eye(2)), zipfile.ZIP_BZIP2)},
             "lzma.npz": {**base, "matrix.npy": (_npy(np.eye(2)), zipfile.ZIP_LZMA)},
             "huge.npz": {**base, "matrix.npy": (huge, zipfile.ZIP_STORED)}}
    from click.testing import CliRunner

    from certdp.cli import main
    for name, members in cases.items():
        p = _zip_with(tmp_path, name, members)
        with pytest.raises(MechanismFileError):
            audit_file(p)
        res = CliRunner().invoke(main, ["audit", str(p)])
        assert res.exit_code == 2 and "Traceback" not in res.output, (name, res.output)


def test_a_corrupt_deflate_member_is_a_clear_error(tmp_path):
    import zipfile

    good = _npy(np.eye(40))
    p = _zip_with(tmp_path, "ok.npz", {"matrix.npy": (good, zipfile.ZIP_DEFLATED),
                                       "epsilon.npy": (_npy(np.float64(1.0)), zipfile.ZIP_STORED)})
    raw = bytearray(p.read_bytes())
    start = raw.index(b"matrix.npy") + len(b"matrix.npy") + 20   # inside the deflated stream
    raw[start:start + 8] = b"\xff" * 8
    p.write_bytes(bytes(raw))
    with pytest.raises(MechanismFileError):
        audit_file(p)

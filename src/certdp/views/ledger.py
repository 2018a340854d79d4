"""A privacy budget across releases: the table's digest and the persistent ledger.

Each view is epsilon-DP on its own; views of one table compose: k views of epsilon each cost
k epsilon together (sequential composition), and the mean of 200 Identity views at 0.1 gives
back the true counts. The ledger keeps, per table, a total budget and every release charged
to it, in a file, so that separate runs (the command line, scripts, concurrent processes)
cannot spend more than the total together.

**Which table.** A table is identified by :func:`table_digest`, a SHA-256 over its content and
column names, canonical so that it does not depend on the order of the rows or of the columns,
nor on how pandas happened to type a column: each value is written as a tagged canonical text
(numbers as the normalised shortest decimal that reads back to them in their own precision,
so ``25``, ``25.0``, ``np.float32(25)`` and ``Int64`` 25 are one value and ``0.1`` in float32
or float64 is ``0.1``; booleans as the numbers 0 and 1; strings as their UTF-8 text; dates in
ISO form; missing values, whatever their kind, as one token), the rows are hashed and the row
hashes sorted. A :class:`~certdp.views.tensor.CountTensor` given directly is identified by its
domains and its non-zero cells instead (sorted), which is a different digest from the table it
was built from: give a session the table itself to share its ledger with the command line.

What the digest does not do: it cannot tell two tables about the same people apart from two
unrelated tables. A copy with one row removed, or a column renamed, has another digest and so
another budget. The ledger keeps an honest publisher's releases within their total; it is no
defence against a publisher who wants to spend more. The digest is kept in the ledger, on the
publisher's side, and never written into a view file (a hash of private data lets anyone who
can guess the data check the guess).

**The ledger file.** JSON (``certdp-ledger/1``): per table digest, the total budget and the
list of releases (epsilon, method, columns, time, status ``charged`` then ``released``), and a
content digest over the whole that detects accidental or naive edits (not a forger: nothing
secret is involved). Every change happens under an exclusive ``fcntl.flock`` on a lock file
beside the ledger (``FILE.lock``, made with the ledger and never replaced, so every writer
locks the same inode; reading a ledger that does not exist creates nothing), reads the ledger
afresh, and writes it back atomically: a temporary file, flushed to disk, renamed over the
ledger, the folder flushed. A release is *charged first*: the charge is on disk before
the release's noise is drawn, and is never refunded, even when the build then fails. A crash
between the charge and the release loses budget; it never lets budget be spent twice. The
total of a table is fixed by its first charge.

The sum of the charges is exact, in decimal: each epsilon counts as the decimal its float
prints as (``0.1`` is 1/10), and the sum is a :class:`fractions.Fraction`, so ten releases of
0.1 fit a total of 1 exactly and an eleventh is refused. Reading 0.1 as its binary value
instead (0.1000000000000000055...) would refuse the tenth. Neither reading is closer to the
true cost than the other: a float and its shortest decimal differ by less than one part in
10^16, less than the rounding of the Laplace scale (sensitivity / epsilon in float64) that
the release itself computes; the decimal is the one the publisher wrote.
"""

from __future__ import annotations

import datetime
import decimal
import fcntl
import hashlib
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd

from .. import _validate as V
from .._io import atomic_target, load_json
from .budget import BudgetExceeded
from .tensor import CountTensor
from .viewfile import canonical_json, content_digest

LEDGER_FORMAT = "certdp-ledger/1"
_TABLE_DIGEST = "certdp-table/1"
_NA = b"-"


class LedgerError(ValueError):
    """A ledger file that cannot be used (unreadable, edited, or asked to change a total)."""


# ----------------------------------------------------------------------------- digests
def _number_text(text: str) -> bytes:
    """The normalised decimal of a number's shortest text: '25.0', '25' and '2.5e1' agree."""
    d = decimal.Decimal(text)
    if d.is_nan():
        return _NA
    if d.is_infinite():
        return b"n-inf" if d < 0 else b"ninf"
    if d == 0:
        return b"n0"
    return b"n" + str(d.normalize()).encode("ascii")


def _canonical(v: Any) -> bytes:
    """One value as tagged canonical bytes (see the module docstring)."""
    if v is None or v is pd.NA or v is pd.NaT:
        return _NA
    if isinstance(v, (bool, np.bool_)):
        return b"n1" if v else b"n0"
    if isinstance(v, (int, np.integer)):
        return _number_text(str(int(v)))
    if isinstance(v, np.floating):
        return _number_text(str(v))                    # shortest text in the value's own precision
    if isinstance(v, float):
        return _number_text(repr(v))
    if isinstance(v, decimal.Decimal):
        return _number_text(str(v))
    if isinstance(v, str):
        return b"s" + v.encode("utf-8", "surrogatepass")
    if isinstance(v, bytes):
        return b"y" + v
    if isinstance(v, (datetime.datetime, datetime.date, np.datetime64, pd.Timestamp)):
        return b"t" + pd.Timestamp(v).isoformat().encode("ascii")
    if isinstance(v, (datetime.timedelta, np.timedelta64, pd.Timedelta)):
        return b"d" + pd.Timedelta(v).isoformat().encode("ascii")
    raise TypeError(f"a value of type {type(v).__name__} cannot be part of a table's digest")


def _value_hashes(col: pd.Series, name: str) -> np.ndarray:
    """A 128-bit hash (two uint64) of every value of ``col``, hashing each distinct value once."""
    codes, uniques = pd.factorize(col, use_na_sentinel=True)
    try:
        arr = uniques.to_numpy() if hasattr(uniques, "to_numpy") else np.asarray(uniques)
        keys = [_canonical(v) for v in list(arr)]          # numpy scalars keep their precision
    except TypeError as exc:
        raise TypeError(f"column {name!r}: {exc}") from None
    table = np.frombuffer(b"".join(hashlib.blake2b(k, digest_size=16).digest() for k in keys + [_NA]),
                          dtype="<u8").reshape(-1, 2)
    return table[np.where(codes < 0, len(keys), codes)]


def table_digest(data: pd.DataFrame | CountTensor) -> str:
    """``sha256:<hex>`` identifying a table (or a count tensor) for the ledger, independent of
    the order of rows and columns and of pandas' dtypes (see the module docstring)."""
    if isinstance(data, CountTensor):
        order = np.lexsort(data.coords.T[::-1]) if data.coords.size else np.zeros(0, dtype=np.int64)
        head = canonical_json({"kind": "certdp-tensor/1", "domains": [d.to_dict() for d in data.domains]})
        body = np.column_stack([data.coords[order], data.counts[order]]).astype("<i8").tobytes()
        return "sha256:" + hashlib.sha256(head + b"\n" + body).hexdigest()
    if not isinstance(data, pd.DataFrame):
        raise TypeError(f"a session's table must be a pandas DataFrame or a CountTensor, got {type(data).__name__}")
    names = [str(c) for c in data.columns]
    if len(set(names)) != len(names):
        raise ValueError("the table has two columns of one name; its rows cannot be identified")
    columns = sorted(range(len(names)), key=lambda j: names[j])
    cols = [_value_hashes(data.iloc[:, j], names[j]) for j in columns]
    rows = np.ascontiguousarray(np.hstack(cols) if cols else np.zeros((len(data), 0), dtype="<u8"), dtype="<u8")
    if rows.shape[1]:                                   # sorted as byte strings: a canonical order, fast
        rows = np.sort(rows.view(np.dtype((np.void, rows.shape[1] * 8))).ravel())
    head = canonical_json({"kind": _TABLE_DIGEST, "columns": [names[j] for j in columns], "rows": len(data)})
    return "sha256:" + hashlib.sha256(head + b"\n" + rows.tobytes()).hexdigest()


# ----------------------------------------------------------------------------- the ledger
def exact(epsilon: float) -> Fraction:
    """The decimal ``epsilon`` prints as, exactly (see the module docstring)."""
    return Fraction(repr(float(epsilon)))


@dataclass
class Account:
    """One table's entry: its total budget and its releases (each a dict with ``epsilon``)."""

    total: float
    releases: list[dict[str, Any]] = field(default_factory=list)

    @property
    def spent_exact(self) -> Fraction:
        """The sum of the releases' epsilons, exactly (each as the decimal it prints as)."""
        return sum((exact(r["epsilon"]) for r in self.releases), Fraction(0))

    @property
    def spent(self) -> float:
        """The sum of the releases' epsilons, as a float."""
        return float(self.spent_exact)

    @property
    def remaining(self) -> float:
        """What is left, rounded down to a float (never more than is left)."""
        left = exact(self.total) - self.spent_exact
        f = float(left)
        return f if exact(f) <= left else math.nextafter(f, -math.inf)

    def charge(self, epsilon: float, info: dict[str, Any], where: str = "") -> int:
        """Append a release of ``epsilon`` (status ``charged``) and return its number, or raise
        :class:`BudgetExceeded` if the releases would then spend more than the total (exact)."""
        eps = V.positive_float("epsilon", epsilon)
        if self.spent_exact + exact(eps) > exact(self.total):
            raise BudgetExceeded(f"refused before any noise was drawn: this release costs epsilon {eps:g}, and the "
                                 f"table has spent {self.spent:.6g} of its total budget {self.total:g} "
                                 f"({self.remaining:.6g} left{where})")
        number = 1 + max((int(r.get("release", 0)) for r in self.releases), default=0)
        self.releases.append({"release": number, "epsilon": eps, "status": "charged",
                              "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                              **info})
        return number

    def mark_released(self, number: int, info: dict[str, Any] | None = None) -> None:
        """Set release ``number``'s status to ``released`` (its charge stays)."""
        for r in self.releases:
            if r.get("release") == number:
                r.update({"status": "released", **(info or {})})


def check_total(total: Any, name: str = "total budget") -> float:
    """``total`` as a float, checked to be a finite number > 0."""
    return V.positive_float(name, total)


class Ledger:
    """The ledger file at ``path`` (created by the first charge). Every method reads the file
    afresh under the lock, so several processes can use one ledger."""

    def __init__(self, path: str | Path) -> None:
        p = Path(path)
        if not str(path).strip() or p.is_dir():
            raise LedgerError(f"--ledger: {p} is not a file name")
        self.path = p
        self.lock_path = p.with_name(p.name + ".lock")

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise LedgerError(f"ledger {self.path}: cannot open its lock file {self.lock_path}: "
                              f"{exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)                                  # closing releases the lock

    def _read(self) -> dict[str, Account]:
        where = f"ledger {self.path}"
        if not self.path.exists():
            return {}
        try:
            raw = self.path.read_bytes()
        except OSError as exc:
            raise LedgerError(f"cannot read the {where}: {exc.strerror or exc}") from None
        try:
            d = load_json(raw, where)
        except ValueError as exc:
            raise LedgerError(str(exc)) from None
        if not isinstance(d, dict) or d.get("format") != LEDGER_FORMAT:
            raise LedgerError(f"{self.path} is not a {LEDGER_FORMAT} file")
        if d.get("digest") != content_digest(d):
            raise LedgerError(f"{where}: the content does not match its digest (the ledger was edited or "
                              "truncated); restore it from a copy: a ledger cannot be trusted once changed by hand")
        tables = d.get("tables")
        if not isinstance(tables, dict) or set(d) != {"format", "digest", "tables"}:
            raise LedgerError(f"{where}: malformed (it holds 'format', 'tables' and 'digest')")
        out = {}
        for key, entry in tables.items():
            out[key] = self._account(key, entry, where)
        return out

    @staticmethod
    def _account(key: str, entry: Any, where: str) -> Account:
        bad = LedgerError(f"{where}: the entry of table {key[:19]}... is malformed")
        shaped = isinstance(entry, dict) and set(entry) == {"total", "releases"}
        if not (shaped and isinstance(entry["releases"], list)):
            raise bad
        try:
            total = check_total(entry["total"])
            for r in entry["releases"]:
                if not isinstance(r, dict):
                    raise bad
                V.positive_float("epsilon", r.get("epsilon"))
        except (TypeError, ValueError):
            raise bad from None
        acc = Account(total, entry["releases"])
        if acc.spent_exact > exact(total):
            raise LedgerError(f"{where}: table {key[:19]}... has spent {acc.spent:.6g}, above its total {total:g}")
        return acc

    def _write(self, accounts: dict[str, Account]) -> None:
        body: dict[str, Any] = {"format": LEDGER_FORMAT,
                                "tables": {k: {"total": a.total, "releases": a.releases} for k, a in accounts.items()}}
        body["digest"] = content_digest(body)
        try:
            with atomic_target(self.path, ".json") as tmp:
                with open(tmp, "wb") as f:
                    f.write(canonical_json(body))
                    f.flush()
                    os.fsync(f.fileno())
            dfd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError as exc:
            raise LedgerError(f"cannot write the ledger {self.path}: {exc.strerror or exc}") from None

    def _snapshot(self) -> dict[str, Account]:
        """The ledger as it is, read under the lock; empty when there is no ledger yet (reading
        creates nothing, not even the lock file)."""
        if not self.path.exists():
            return {}
        with self._locked():
            return self._read()

    def account(self, table: str) -> Account | None:
        """The table's account, or None when the ledger has never charged it."""
        return self._snapshot().get(table)

    def tables(self) -> dict[str, Account]:
        """Every table's account, by table digest."""
        return self._snapshot()

    def open(self, table: str, total: float | None) -> Account:
        """The table's account, checking ``total`` against the one on record (a total is fixed
        by the first charge; ``None`` takes the recorded one). For a table the ledger has not
        seen, ``total`` is required and is recorded at the first charge."""
        return self._resolve(self._snapshot().get(table), total)

    def _resolve(self, acc: Account | None, total: float | None) -> Account:
        if acc is None:
            if total is None:
                raise LedgerError(f"the ledger {self.path} has no budget for this table yet: give its total budget "
                                  "(--total-budget)")
            return Account(check_total(total))
        if total is not None and exact(check_total(total)) != exact(acc.total):
            raise LedgerError(f"the ledger {self.path} holds a total budget of {acc.total:g} for this table; a total "
                              f"is fixed by the first release and cannot become {total:g}")
        return acc

    def charge(self, table: str, total: float | None, epsilon: float, info: dict[str, Any]) -> int:
        """Record a release of ``epsilon`` about ``table`` (status ``charged``) and return its
        number; refuse it with :class:`BudgetExceeded` if the table's releases would then spend
        more than its total. Runs under the lock, and the charge is on disk when this returns."""
        eps = V.positive_float("epsilon", epsilon)
        if not self.path.exists():                      # a first charge above its total creates nothing
            Account(self._resolve(None, total).total).charge(eps, info, f"; ledger {self.path}")
        with self._locked():
            accounts = self._read()
            acc = self._resolve(accounts.get(table), total)
            number = acc.charge(eps, info, f"; ledger {self.path}")
            accounts[table] = acc
            self._write(accounts)
        return number

    def mark_released(self, table: str, number: int, info: dict[str, Any] | None = None) -> None:
        """Set the status of release ``number`` to ``released`` (the charge stays whatever
        happens here; only the status is informational)."""
        with self._locked():
            accounts = self._read()
            acc = accounts.get(table)
            if acc is None:
                return
            acc.mark_released(number, info)
            self._write(accounts)


def ledger_summary(path: str | Path) -> list[dict[str, Any]]:
    """One row per table of the ledger at ``path``: its digest, total, spent, remaining and
    number of releases (for ``certdp view ledger``)."""
    led = Ledger(path)
    if not led.path.is_file():
        raise LedgerError(f"ledger not found: {led.path}")
    return [{"table": k, "total": a.total, "spent": a.spent, "remaining": a.remaining,
             "releases": len(a.releases), "last": a.releases[-1] if a.releases else None}
            for k, a in led.tables().items()]


__all__ = ["Account", "LEDGER_FORMAT", "Ledger", "LedgerError", "ledger_summary", "table_digest"]

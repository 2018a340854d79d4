"""A session: a table, the budget it may spend, and the views released from it.

The shape follows the accountants of the DP libraries: OpenDP's odometers (a queryable that
holds the data and adds up the privacy spent by each query), Tumult Analytics' ``Session``
(built from a DataFrame and a total budget; every query names its cost and is refused past
the total) and diffprivlib's ``BudgetAccountant`` (``spent``, ``remaining``, a total).

``Session(table, total_epsilon, ledger=path)`` owns a copy of the table (so that changing the
caller's DataFrame afterwards changes neither the digest nor the releases) and its account:
in memory, or, with ``ledger``, in the persistent ledger file of :mod:`.ledger` shared with
``certdp view build --ledger`` and with other processes. ``session.build_view(method,
epsilon, columns=..., domains=...)`` checks the whole request first
(:func:`~certdp.views.build.check_request`; a bad request costs nothing), charges ``epsilon``
(refused with :class:`~certdp.views.budget.BudgetExceeded` past the total, before any noise is
drawn), then builds the checked request (:func:`~certdp.views.build.build_checked`, which
:func:`~certdp.views.build.build_view` calls too: the one place views are built). A
charge is never refunded: if the build fails after it, the budget stays spent.

The charge is the ``epsilon`` the view is built with. The view's own accountant keeps its
spend within that epsilon (it may spend less on some paths); counting the full epsilon is what
sequential composition allows, whatever the build did inside.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from ..progress import Progress
from ..randomness import RNGLike
from .budget import BudgetExceeded
from .build import NOT_RELEASES, build_checked, check_epsilon, check_request
from .ledger import Account, Ledger, LedgerError, check_total, table_digest
from .tensor import CountTensor, Domain
from .view import BlockView, DenseView, MarginalView, SampleView

View = BlockView | DenseView | SampleView | MarginalView


class Session:
    """A table with a total privacy budget (see the module docstring).

    ``data`` is a pandas DataFrame (views then name their ``columns`` and public ``domains``) or
    a :class:`~certdp.views.tensor.CountTensor`. ``total_epsilon`` is the budget of every release
    about the table together; with a ``ledger`` file that already holds this table it may be
    omitted (the recorded total is used) and must otherwise equal the recorded one."""

    def __init__(self, data: pd.DataFrame | CountTensor, total_epsilon: float | None = None, *,
                 ledger: str | Path | None = None) -> None:
        if isinstance(data, pd.DataFrame):
            if len(data) == 0:
                raise ValueError("the table is empty")
            self._data: pd.DataFrame | CountTensor = data.copy(deep=True)
        elif isinstance(data, CountTensor):
            self._data = CountTensor(data.domains, data.coords.copy(), data.counts.copy())
        else:
            raise TypeError(f"a session's table must be a pandas DataFrame or a CountTensor, got {type(data).__name__}")
        self.digest = table_digest(self._data)
        self._ledger = None if ledger is None else Ledger(ledger)
        self._total: float | None = None
        if self._ledger is None:
            if total_epsilon is None:
                raise ValueError("a session without a ledger needs total_epsilon")
            self._account = Account(check_total(total_epsilon, "total_epsilon"))
        else:
            self._total = None if total_epsilon is None else check_total(total_epsilon, "total_epsilon")
            self._account = self._ledger.open(self.digest, self._total)

    def __repr__(self) -> str:
        where = f"ledger {self._ledger.path}" if self._ledger else "in memory"
        return f"Session(table {self.digest[:15]}..., spent {self.spent:g} of {self.total:g}, {where})"

    def _current(self) -> Account:
        if self._ledger is None:
            return self._account
        acc = self._ledger.account(self.digest)
        return acc if acc is not None else self._account

    @property
    def total(self) -> float:
        """The table's total budget."""
        return self._current().total

    @property
    def spent(self) -> float:
        """Epsilon charged so far to this table (by every process sharing the ledger)."""
        return self._current().spent

    @property
    def remaining(self) -> float:
        """Epsilon still available, rounded down (a release of exactly this much is accepted)."""
        return self._current().remaining

    @property
    def releases(self) -> list[dict[str, Any]]:
        """Every release charged to this table: number, epsilon, method, columns, status, time."""
        return [dict(r) for r in self._current().releases]

    @property
    def table(self) -> pd.DataFrame | CountTensor:
        """The session's own copy of the table."""
        return self._data

    def tensor(self, columns: Sequence[str] | None = None, domains: Mapping[str, Domain] | None = None, *,
               overflow: str = "refuse") -> CountTensor:
        """The count tensor a view of ``columns`` over the public ``domains`` is built from (the
        session's tensor itself when it was given one). ``domains`` may declare more columns
        than the view is over: declare the table's public domains once, choose columns per view."""
        if isinstance(self._data, CountTensor):
            if columns is not None or domains is not None:
                raise ValueError("this session holds a count tensor: its columns and domains are fixed")
            return self._data
        if columns is None:
            raise ValueError("columns must name the table's columns the view is over")
        if isinstance(columns, str):
            raise TypeError(f"columns must be a list of column names, got the string {columns!r}")
        chosen = set(columns)
        return CountTensor.from_frame(self._data, columns, {c: d for c, d in (domains or {}).items() if c in chosen},
                                      overflow=overflow)

    def build_view(self, method: str = "ripost", epsilon: float = 0.1, *, columns: Sequence[str] | None = None,
                   domains: Mapping[str, Domain] | None = None, overflow: str = "refuse", rng: RNGLike = None,
                   note: str = "", progress: Progress | None = None, **params: Any) -> View:
        """Check the request, charge ``epsilon`` to the table's budget, build the view.

        Raises :class:`~certdp.views.budget.BudgetExceeded`, before any noise is drawn, when
        the table's releases would then spend more than its total; ``ValueError``, before the
        charge, when a session with a ledger is asked for a build that is not a release: one
        with ``rng`` (numpy's noise, reproducible from its seed) or by a method of
        :data:`~certdp.views.build.NOT_RELEASES`."""
        # before the request's checks, which a method's missing extra would fail first
        if self._ledger is not None and (rng is not None or (isinstance(method, str) and method in NOT_RELEASES)):
            raise ValueError("a ledger counts releases, and this build is not one: "
                             + ("its noise is reproducible from rng (numpy's generator, for experiments)"
                                if rng is not None else NOT_RELEASES[method])
                             + "; build it without a ledger")
        tensor = self.tensor(columns, domains, overflow=overflow)
        checked = check_request(tensor, method, epsilon, params, rng=rng, progress=progress)
        eps = check_epsilon(epsilon)
        info = {"method": method, "columns": list(tensor.columns), **({"note": str(note)} if note else {})}
        number = self._charge(eps, info)
        view = build_checked(tensor, method, eps, rng, progress, checked)
        if self._ledger is not None:
            self._ledger.mark_released(self.digest, number)
        else:
            self._account.mark_released(number)
        return view

    def _charge(self, eps: float, info: dict[str, Any]) -> int:
        if self._ledger is not None:
            return self._ledger.charge(self.digest, self._total, eps, info)
        return self._account.charge(eps, info)


__all__ = ["BudgetExceeded", "LedgerError", "Session"]

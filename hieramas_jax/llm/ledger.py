"""The spend ledger: what a run root has been billed, or may have been, across processes and reruns.

Why a ledger and not a counter of answered calls: a provider bills a request it accepted even when the
client gave up on it (a timeout, a dropped connection, a 5xx from a gateway whose upstream generated
anyway). With a 60 s timeout, six retries and an 8,192-token budget one slow call can be billed seven
times; counting only the answered attempt read such a run as free. So every attempt is written down
before it is sent, at a stated upper estimate, and stays counted at that estimate until a response
proves less:

  * `in_flight`  reserved and (about to be) sent; counted at its upper estimate;
  * `billed`     answered with `usage`: counted at its price (the estimate is replaced);
  * `unanswered` sent, but no usage came back (timeout, connection lost after sending, 5xx, a body
                 that is not a completion): the provider may have billed it, so it stays counted at
                 its upper estimate ("estimated unbilled" in reports);
  * `refused`    never accepted: a 4xx before any generation (400, 401, 404, 408, 409, 413, 422, 429),
                 or no connection opened at all; counted at $0.

The upper estimate of an attempt is `ledger.worst_case`: the prompt as (request bytes / 3 + 16)
tokens (a token is about 4 characters of English; JSON and code are denser, so /3 overestimates) plus
the full completion budget, at the model's price. A server that ignores `max_tokens` can bill more;
the ledger then records what the response says, above the estimate.

One ledger per run root, `<run_root>/spend_ledger.sqlite3`: every seed, cell, process and rerun that
writes under the root reads and writes the same totals, so `--max_usd` means "this run root never
spends more than this", checked before each attempt is sent (`reserve`) against what was billed, what
is in flight everywhere and what may have been billed unanswered. Each reservation and each settlement
is one sqlite transaction (`BEGIN IMMEDIATE`: writers of several processes queue on the file's lock,
so two of them can never both pass the cap with the same dollar), and the totals row is updated in the
same transaction as the attempt's row, so a process killed at any moment leaves totals equal to the
sum of the rows. An attempt left `in_flight` by a process that died is re-labelled `unanswered` at the
next open on the same host (its amount does not change: it was counted all along).

Cost: two small transactions per attempt (~0.1-0.3 ms each), negligible against a real endpoint's
seconds per call. The embedded sim bills nothing, so a sim run opens a ledger only under `--max_usd`.
"""

from __future__ import annotations

import math
import os
import pathlib
import socket
import sqlite3
import threading
import time
from typing import Any

from hieramas_jax.llm.cache import enter_wal
from hieramas_jax.llm.errors import BudgetExceededError, CacheCorruptError
from hieramas_jax.llm.registry import ModelSpec
from hieramas_jax.procs import pid_alive

__all__ = ["LEDGER_NAME", "SpendLedger", "worst_case"]

LEDGER_NAME = "spend_ledger.sqlite3"
BUSY_TIMEOUT_S = 60.0
IN_FLIGHT, BILLED, UNANSWERED, REFUSED = "in_flight", "billed", "unanswered", "refused"
_COLUMN = {IN_FLIGHT: "in_flight", BILLED: "billed", UNANSWERED: "unanswered", REFUSED: None}
# Amounts are integers of 1e-12 USD, rounded up: totals are sums of integers, exact in any order and over
# any number of processes (float sums drifted below zero after a few hundred moves). int64 holds $9.2M.
UNIT = 1e-12


def to_units(usd: float) -> int:
  """USD as whole 1e-12 USD, rounded up (the ledger never counts less than was billed)."""
  return math.ceil(usd / UNIT)

_SCHEMA = ("""
CREATE TABLE IF NOT EXISTS attempts (
  id INTEGER PRIMARY KEY,
  endpoint TEXT NOT NULL,
  model TEXT NOT NULL,
  state TEXT NOT NULL,
  estimate INTEGER NOT NULL,
  amount INTEGER NOT NULL,
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  created REAL NOT NULL,
  settled REAL
)""", """
CREATE TABLE IF NOT EXISTS totals (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  billed INTEGER NOT NULL,
  in_flight INTEGER NOT NULL,
  unanswered INTEGER NOT NULL,
  billed_calls INTEGER NOT NULL,
  attempts INTEGER NOT NULL
)""", "INSERT OR IGNORE INTO totals VALUES (1, 0, 0, 0, 0, 0)")


def worst_case(spec: ModelSpec, payload: bytes, max_tokens: int) -> float:
  """The stated upper estimate of one attempt (see the module docstring)."""
  return spec.cost(len(payload) // 3 + 16, max_tokens)


class SpendLedger:
  """The spend ledger of one run root (see the module docstring); shared by every client of a run.

  Args:
    directory: the run root (the file is created there at the first reservation, so a run refused
      before it pays anything writes nothing); None keeps the ledger in memory (this process only).
    max_usd: the cap (`--max_usd`), or None to record without a cap.
  """

  def __init__(self, directory: str | os.PathLike | None, max_usd: float | None = None):
    if max_usd is not None and not (isinstance(max_usd, (int, float)) and not isinstance(max_usd, bool)
                                    and math.isfinite(max_usd) and max_usd >= 0):
      raise ValueError(f"max_usd must be a finite number >= 0, got {max_usd!r}")
    self.max_usd = None if max_usd is None else float(max_usd)
    self._cap = None if max_usd is None else math.floor(max_usd / UNIT)
    self.path = None if directory is None else pathlib.Path(directory) / LEDGER_NAME
    self._lock = threading.Lock()
    self._conn: sqlite3.Connection | None = None
    self._host = socket.gethostname()
    self._pid = os.getpid()
    if self.path is not None and self.path.exists():
      self._open()

  def _open(self) -> sqlite3.Connection:
    if self._conn is not None:
      return self._conn
    if self.path is not None:
      self.path.parent.mkdir(parents=True, exist_ok=True)
    try:
      conn = sqlite3.connect(":memory:" if self.path is None else str(self.path), timeout=BUSY_TIMEOUT_S,
                             isolation_level=None, check_same_thread=False)
      if self.path is not None:
        enter_wal(conn)
        conn.execute("PRAGMA synchronous=NORMAL")
      conn.execute("BEGIN IMMEDIATE")
      for statement in _SCHEMA:
        conn.execute(statement)
      # Attempts left in flight by a process of this host that is gone: sent, never settled.
      stale = [(i, pid) for i, pid in conn.execute(
          "SELECT id, pid FROM attempts WHERE state = ? AND host = ?", (IN_FLIGHT, self._host))
          if pid != self._pid and not pid_alive(pid)]
      for attempt_id, _ in stale:
        self._move(conn, attempt_id, UNANSWERED, None)
      conn.execute("COMMIT")
    except sqlite3.DatabaseError as e:
      raise CacheCorruptError(f"{self.path} is not a usable spend ledger ({e}); move it away only if "
                              "nothing under this run root was paid for") from None
    self._conn = conn
    return conn

  @staticmethod
  def _move(conn: sqlite3.Connection, attempt_id: int, state: str, amount: int | None) -> None:
    """Moves one attempt to `state` (its amount to `amount` units, or kept) and the totals with it."""
    old_state, old_amount = conn.execute("SELECT state, amount FROM attempts WHERE id = ?",
                                         (attempt_id,)).fetchone()
    new_amount = old_amount if amount is None else amount
    if state == REFUSED:
      new_amount = 0
    conn.execute("UPDATE attempts SET state = ?, amount = ?, settled = ? WHERE id = ?",
                 (state, new_amount, time.time(), attempt_id))
    if _COLUMN[old_state]:
      conn.execute(f"UPDATE totals SET {_COLUMN[old_state]} = {_COLUMN[old_state]} - ? WHERE id = 1", (old_amount,))
    if _COLUMN[state]:
      conn.execute(f"UPDATE totals SET {_COLUMN[state]} = {_COLUMN[state]} + ? WHERE id = 1", (new_amount,))
    if state == BILLED:
      conn.execute("UPDATE totals SET billed_calls = billed_calls + 1 WHERE id = 1")

  def reserve(self, endpoint: str, model: str, estimate_usd: float) -> int:
    """Writes an attempt down before it is sent; returns its id for `settle`.

    Raises:
      BudgetExceededError: billed + in flight + unanswered + this estimate would pass `max_usd`;
        nothing is written and the attempt must not be sent.
    """
    if not (math.isfinite(estimate_usd) and estimate_usd >= 0):
      raise ValueError(f"estimate_usd must be a finite number >= 0, got {estimate_usd!r}")
    with self._lock:
      conn = self._open()
      conn.execute("BEGIN IMMEDIATE")
      try:
        billed, in_flight, unanswered = conn.execute(
            "SELECT billed, in_flight, unanswered FROM totals WHERE id = 1").fetchone()
        estimate = to_units(estimate_usd)
        if self._cap is not None and billed + in_flight + unanswered + estimate > self._cap:
          raise BudgetExceededError(self.max_usd, model, estimate * UNIT, billed_usd=billed * UNIT,
                                    reserved_usd=in_flight * UNIT, unanswered_usd=unanswered * UNIT)
        cursor = conn.execute(
            "INSERT INTO attempts (endpoint, model, state, estimate, amount, host, pid, created) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (endpoint, model, IN_FLIGHT, estimate, estimate, self._host, self._pid, time.time()))
        conn.execute("UPDATE totals SET in_flight = in_flight + ?, attempts = attempts + 1 WHERE id = 1",
                     (estimate,))
        conn.execute("COMMIT")
      except BaseException:
        conn.execute("ROLLBACK")
        raise
      return int(cursor.lastrowid)

  def settle(self, attempt_id: int, state: str, cost_usd: float | None = None) -> None:
    """Records how an attempt ended: `billed` at `cost_usd`, `unanswered` (kept at its estimate) or
    `refused` ($0)."""
    if state not in (BILLED, UNANSWERED, REFUSED):
      raise ValueError(f"an attempt settles as billed, unanswered or refused, not {state!r}")
    if state == BILLED and (cost_usd is None or not math.isfinite(cost_usd) or cost_usd < 0):
      raise ValueError(f"a billed attempt needs its cost, got {cost_usd!r}")
    with self._lock:
      conn = self._open()
      conn.execute("BEGIN IMMEDIATE")
      try:
        self._move(conn, attempt_id, state, to_units(cost_usd) if state == BILLED else None)
        conn.execute("COMMIT")
      except BaseException:
        conn.execute("ROLLBACK")
        raise

  def summary(self) -> dict[str, Any]:
    """The run root's totals (every process and rerun so far): what results and the console show."""
    billed = in_flight = unanswered = 0
    calls = attempts = 0
    if self._conn is not None or self.path is None or self.path.exists():
      with self._lock:
        billed, in_flight, unanswered, calls, attempts = self._open().execute(
            "SELECT billed, in_flight, unanswered, billed_calls, attempts FROM totals WHERE id = 1").fetchone()
    total = (billed + in_flight + unanswered) * UNIT
    out = {"spent_usd": billed * UNIT, "reserved_usd": in_flight * UNIT, "estimated_unbilled_usd": unanswered * UNIT,
           "total_usd": total, "paid_calls": calls, "attempts": attempts, "max_usd": self.max_usd}
    if self.max_usd is not None:
      out["left_usd"] = max(0.0, self.max_usd - total)
    return out

  def line(self) -> str:
    """One console line of `summary()`."""
    s = self.summary()
    cap = "" if self.max_usd is None else f" of --max_usd=${self.max_usd:.4f}"
    return (f"spend in this run root: ${s['total_usd']:.4f}{cap} (billed ${s['spent_usd']:.4f}, reserved "
            f"${s['reserved_usd']:.4f}, estimated unbilled ${s['estimated_unbilled_usd']:.4f}; "
            f"{s['paid_calls']} paid calls of {s['attempts']} attempts)")

  def close(self) -> None:
    with self._lock:
      if self._conn is not None:
        self._conn.close()
        self._conn = None

  def __enter__(self) -> SpendLedger:
    return self

  def __exit__(self, *exc) -> None:
    self.close()

  def __repr__(self) -> str:
    return f"SpendLedger({str(self.path) if self.path else ':memory:'!r}, max_usd={self.max_usd})"

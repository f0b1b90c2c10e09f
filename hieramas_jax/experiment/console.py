"""The console of an entry point: quiet by default, one live display of the table's cells.

Libraries are loud: absl INFO lines, JAX's "Unable to initialize backend 'tpu'", wandb's banner and
run summary (about 40 lines per run), sentence-transformers' FutureWarnings. `quiet_console` turns
them off unless `--verbose`; warnings and errors of the suite itself are always shown.

`LiveDisplay` draws, per cell, its stage (fitting: stage 1 step / total, stage 2 epoch; evaluating:
queries done / total) with a rate and an ETA, and one table-level line. On a terminal it redraws in
place (rich's `Live`); in a log file it prints the final state once, when the table ends.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import warnings
from typing import Any, Mapping

# Past this many cells the display lists only the cells at work (the table line counts the rest).
MAX_ROWS = 20


def define_verbose_flag() -> None:
  """--verbose, for entry points that use `quiet_console` (listed in the entry point's --help)."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  flags.DEFINE_bool("verbose", False, "Show library output too: absl INFO lines, wandb's console output, JAX's "
                    "platform lines, library FutureWarnings (errors and the suite's warnings are always shown).",
                    module_name=sys.argv[0])


def quiet_console(verbose: bool) -> None:
  """Log level and library noise for an entry point: INFO and everything with `verbose`, else WARNING."""
  from absl import logging as absl_logging  # pylint: disable=import-outside-toplevel
  level = logging.INFO if verbose else logging.WARNING
  logging.getLogger().setLevel(level)
  absl_logging.set_verbosity(absl_logging.INFO if verbose else absl_logging.WARNING)
  if not verbose:
    logging.getLogger("absl").setLevel(logging.WARNING)  # orbax's per-save INFO lines
    # W&B's own variables: a user who set them keeps their choice.
    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ.setdefault("WANDB_CONSOLE", "off")
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)


def _duration(seconds: float | None) -> str:
  if seconds is None or seconds != seconds or seconds == float("inf"):
    return "-"
  seconds = int(round(seconds))
  return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 else \
      f"{seconds // 60}:{seconds % 60:02d}"


class LiveDisplay:
  """Per-cell stage, counts, rate and ETA, and a table line; `update` may be called from any thread."""

  def __init__(self, keys: list[str], *, enabled: bool, stream=None):
    self.enabled = enabled
    self.started = time.monotonic()
    self.rows: dict[str, dict[str, Any]] = {k: {"stage": "pending", "done": 0, "total": None, "note": ""}
                                            for k in keys}
    self._lock = threading.Lock()
    self._live = None
    if enabled:
      from rich.console import Console  # pylint: disable=import-outside-toplevel
      from rich.live import Live  # pylint: disable=import-outside-toplevel
      self._console = Console(file=stream or sys.stderr)
      if not self._console.is_terminal:  # a log file: the final state, printed once, not cut to 80 columns
        self._console = Console(file=stream or sys.stderr, width=200)
      self._live = Live(get_renderable=self._render, console=self._console, refresh_per_second=2,
                        redirect_stdout=False, redirect_stderr=False, transient=False)
      self._live.start()

  def update(self, key: str, stage: str | None = None, done: int | None = None, total: int | None = None,
             note: str | None = None) -> None:
    """Sets a cell's stage (a new stage restarts its rate clock), its count and total, or its note."""
    with self._lock:
      row = self.rows[key]
      if stage is not None and stage != row["stage"]:
        row.update(stage=stage, since=time.monotonic(), start=done or 0, done=done or 0, total=total)
      if done is not None:
        row["done"] = done
      if total is not None:
        row["total"] = total
      if note is not None:
        row["note"] = note

  def table_line(self) -> str:
    rows = list(self.rows.values())
    ev = [r for r in rows if r["stage"] in ("evaluating", "done")]
    done_q = sum(r["done"] for r in ev)
    total_q = sum(r["total"] or 0 for r in ev)
    counts = {s: sum(r["stage"] == s for r in rows) for s in ("done", "failed")}
    active = len(rows) - counts["done"] - counts["failed"] - sum(r["stage"] == "pending" for r in rows)
    return (f"table: {counts['done']}/{len(rows)} cells done, {active} at work"
            + (f", {counts['failed']} failed" if counts["failed"] else "")
            + f"; test queries {done_q}/{total_q} of the cells evaluated so far; "
            f"elapsed {_duration(time.monotonic() - self.started)}")

  def _cells(self) -> list[tuple[str, Mapping[str, Any]]]:
    items = list(self.rows.items())
    if len(items) > MAX_ROWS:
      items = [(k, r) for k, r in items if r["stage"] not in ("pending", "done")]
    return items

  def _render(self):
    from rich.console import Group  # pylint: disable=import-outside-toplevel
    from rich.table import Table  # pylint: disable=import-outside-toplevel
    from rich.text import Text  # pylint: disable=import-outside-toplevel
    with self._lock:
      table = Table(box=None, pad_edge=False, show_edge=False)
      for name in ("cell", "stage", "progress", "rate", "eta", ""):
        table.add_column(name, no_wrap=True)
      now = time.monotonic()
      for key, r in self._cells():
        total, done = r["total"], r["done"]
        elapsed = now - r.get("since", now)
        rate = (done - r.get("start", 0)) / elapsed if elapsed > 0 and done > r.get("start", 0) else None
        eta = (total - done) / rate if rate and total is not None and r["stage"] not in ("done", "failed") else None
        table.add_row(key, r["stage"], f"{done}/{total}" if total is not None else "",
                      f"{rate:.2f}/s" if rate else "", _duration(eta) if eta is not None else "", r["note"])
      return Group(table, Text(self.table_line(), no_wrap=True, overflow="ellipsis"))

  def close(self) -> None:
    if self._live is not None:
      self._live.stop()
      if not self._console.is_terminal:
        self._console.line()
      self._live = None

"""The table's progress: its own channel, apart from the metric writers.

Cells report their state, test queries done and a fit's steps here; the metric writers carry only
metrics (curves, summaries, artifacts), so a change to one never disturbs the other.
"""

from __future__ import annotations

import logging
import pathlib
import time
from typing import Any, Mapping

from hieramas_jax.experiment.console import LiveDisplay
from hieramas_jax.fileio import atomic_write_json

log = logging.getLogger(__name__)


class TableProgress:
  """The table's progress: one live display (per cell its stage, counts, rate, ETA, accuracy; a table line),
  per-cell states in progress.json, and a log line per change (shown with --verbose).

  Its own channel, apart from the metric writers: `status` (a cell's state), `item` (test queries done)
  and `reporter(key)`, the `(stage, done, total)` callable a method's fit reports its steps through.
  """

  def __init__(self, totals: Mapping[str, int], path: pathlib.Path, *, enabled: bool):
    self.path = path
    self.cells = {k: {"status": "pending", "done": 0, "total": n} for k, n in totals.items()}
    self.display = LiveDisplay(list(totals), enabled=enabled)
    self._written = 0.0

  def status(self, key: str, status: str, **extra: Any) -> None:
    self.cells[key].update(status=status, **extra)
    log.info("%s: %s%s", key, status, "".join(f", {k}={v}" for k, v in extra.items()))
    counts = {"done": self.cells[key]["done"], "total": self.cells[key]["total"]}
    if status in ("evaluating", "done"):
      self.display.update(key, status, **counts,
                          note=f"{extra['accuracy']:.2f}%" if "accuracy" in extra else None)
    else:
      self.display.update(key, status)
    self._flush(force=True)

  def reporter(self, key: str):
    """`report(stage, done, total)` for a cell's fit: "fit: stage 1" 3/8 on the display."""
    def report(stage: str, done: int, total: int | None = None) -> None:
      self.display.update(key, f"fit: {stage}", done=done, total=total)
    return report

  def item(self, key: str, done: int) -> None:
    self.cells[key]["done"] = done
    self.display.update(key, done=done)
    self._flush()

  def _flush(self, force: bool = False) -> None:
    now = time.monotonic()
    if force or now - self._written > 2.0:
      self._written = now
      atomic_write_json(self.path, {"cells": self.cells})

  def close(self) -> None:
    self._flush(force=True)
    self.display.close()

"""The console of an entry point: quiet by default, one live display of the table's cells.

Libraries are loud: absl INFO lines, JAX's "Unable to initialize backend 'tpu'", wandb's banner and
run summary (about 40 lines per run), sentence-transformers' FutureWarnings. `quiet_console` turns
them off unless `--verbose`; warnings and errors of the suite itself are always shown.

`LiveDisplay` draws, per cell, its stage (fitting: stage 1 step / total, stage 2 epoch, a baseline's
training step; evaluating: queries done / total) with a rate, an ETA and its accuracy when done, and one
table-level line with the elapsed time, every line within 80 columns. On a terminal it redraws in place
(rich's `Live`); in a log file it prints the table line every `HEARTBEAT_S` seconds (a redirected run is
seen to be alive) and the final state of every cell once, when the table ends.
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
# A row's columns: cell name, stage, progress, rate, ETA, then the note (accuracy): 80 columns in all.
WIDTHS = (32, 13, 9, 7, 7)
NOTE_WIDTH = 80 - sum(WIDTHS) - len(WIDTHS)
# Seconds between two table lines in a log file (redirected output has no live display).
HEARTBEAT_S = 60.0


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
    # transformers' "Loading weights 0%... 103/103" bar (the encoder loading): its bars follow this variable,
    # read when transformers is imported, here or in a child process.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "transformers" in sys.modules:
      sys.modules["transformers"].utils.logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)


def _duration(seconds: float | None) -> str:
  if seconds is None or seconds != seconds or seconds == float("inf"):
    return "-"
  seconds = int(round(seconds))
  return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 else \
      f"{seconds // 60}:{seconds % 60:02d}"


def short_names(keys: list[str]) -> dict[str, str]:
  """Display names of cell keys (`label|benchmark|pool|setting|seedN`): the setting and seed only where the
  cells differ in them (a one-setting, one-seed table need not repeat them), cut to the name column."""
  parts = [k.replace("humaneval_plus", "humaneval+").split("|") for k in keys]
  n = max((len(p) for p in parts), default=0)
  keep = [i for i in range(n) if i < 3 or len({p[i] if i < len(p) else "" for p in parts}) > 1]
  out = {}
  for key, p in zip(keys, parts):
    label, rest = p[0], "".join(f"|{p[i]}" for i in keep[1:] if i < len(p))
    room = WIDTHS[0] - len(rest)
    if len(label) + len(rest) > WIDTHS[0]:  # the label is cut, not the benchmark and pool that tell cells apart
      label = label[:room - 1] + "…" if room >= 6 else label
    out[key] = (label + rest)[:WIDTHS[0]]
  return out


def _stage_text(stage: str) -> str:
  """"fit: stage 2 epoch" -> "fit s2 epoch": the stage column is 13 wide."""
  return stage.replace("fit: ", "fit ").replace("stage ", "s")[:WIDTHS[1]]


class LiveDisplay:
  """Per-cell stage, counts, rate and ETA, and a table line; `update` may be called from any thread."""

  def __init__(self, keys: list[str], *, enabled: bool, stream=None, heartbeat_s: float = HEARTBEAT_S):
    self.enabled = enabled
    self.started = time.monotonic()
    self.rows: dict[str, dict[str, Any]] = {k: {"stage": "pending", "done": 0, "total": None, "note": ""}
                                            for k in keys}
    self.names = short_names(keys)
    self._lock = threading.Lock()
    self._live = None
    self._beat: threading.Thread | None = None
    self._stop = threading.Event()
    if enabled:
      from rich.console import Console  # pylint: disable=import-outside-toplevel
      from rich.live import Live  # pylint: disable=import-outside-toplevel
      self._console = Console(file=stream or sys.stderr)
      if self._console.is_terminal:
        self._live = Live(get_renderable=self._render, console=self._console, refresh_per_second=2,
                          redirect_stdout=False, redirect_stderr=False, transient=False)
        self._live.start()
      else:  # a log file: a heartbeat line now and then, the final state at the end
        self._console = Console(file=stream or sys.stderr, width=80)
        self._beat = threading.Thread(target=self._heartbeat, args=(heartbeat_s,), name="display-heartbeat",
                                      daemon=True)
        self._beat.start()

  def update(self, key: str, stage: str | None = None, done: int | None = None, total: int | None = None,
             note: str | None = None) -> None:
    """Sets a cell's stage (a new stage restarts its rate clock), its count and total, or its note."""
    with self._lock:
      row = self.rows[key]
      if stage in ("done", "failed") and row["stage"] == "evaluating":  # keeps the evaluation's rate, stopped
        row.update(stage=stage, ended=time.monotonic())
      elif stage is not None and stage != row["stage"]:
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
            + f"; queries {done_q}/{total_q}; elapsed {_duration(time.monotonic() - self.started)}")

  def _cells(self, final: bool = False) -> list[tuple[str, Mapping[str, Any]]]:
    items = list(self.rows.items())
    if len(items) > MAX_ROWS and not (final and self._beat is not None):  # a log file's final state: every cell
      items = [(k, r) for k, r in items if r["stage"] not in ("pending", "done")]
    return items

  def row_text(self, key: str, r: Mapping[str, Any], now: float) -> str:
    """One cell's line, 80 columns at most: name, stage, done/total, rate, ETA, note."""
    total, done = r["total"], r["done"]
    elapsed = r.get("ended", now) - r.get("since", now)
    rate = (done - r.get("start", 0)) / elapsed if elapsed > 0 and done > r.get("start", 0) else None
    eta = (total - done) / rate if rate and total is not None and r["stage"] not in ("done", "failed") else None
    cols = (self.names[key], _stage_text(r["stage"]), f"{done}/{total}" if total is not None else "",
            f"{rate:.2f}/s" if rate else "", _duration(eta) if eta is not None else "")
    return " ".join(f"{c[:w]:<{w}}" if i < 2 else f"{c[:w]:>{w}}" for i, (c, w) in enumerate(zip(cols, WIDTHS))) \
        + " " + f"{str(r['note'])[:NOTE_WIDTH]:>{NOTE_WIDTH}}"

  def lines(self, final: bool = False) -> list[str]:
    """The display as text lines: a header and a line per cell listed (none: no header), the table line."""
    with self._lock:
      now = time.monotonic()
      rows = [self.row_text(k, r, now).rstrip() for k, r in self._cells(final)]
      names = ("cell", "stage", "progress", "rate", "eta")
      header = " ".join(f"{c:<{w}}" if i < 2 else f"{c:>{w}}" for i, (c, w) in enumerate(zip(names, WIDTHS))) \
          + f" {'acc':>{NOTE_WIDTH}}"
      return ([header.rstrip()] + rows if rows else []) + [self.table_line()]

  def _render(self, final: bool = False):
    from rich.console import Group  # pylint: disable=import-outside-toplevel
    from rich.text import Text  # pylint: disable=import-outside-toplevel
    return Group(*(Text(line, no_wrap=True, overflow="ellipsis") for line in self.lines(final)))

  def _heartbeat(self, every_s: float) -> None:
    from rich.text import Text  # pylint: disable=import-outside-toplevel
    while not self._stop.wait(every_s):
      self._console.print(Text(self.table_line()), soft_wrap=True)

  def close(self) -> None:
    self._stop.set()
    if self._live is not None:
      self._live.stop()
      self._live = None
    if self._beat is not None:
      self._beat.join()
      self._console.print(self._render(final=True))
      self._console.line()
      self._beat = None

"""The quiet console: one live display per table (stage, counts, rate, ETA per cell), library noise off."""

from __future__ import annotations

import io
import logging
import os
import time

from rich.console import Console

from hieramas_jax.experiment import console
from hieramas_jax.experiment.progress import TableProgress


def _text(display) -> str:
  out = Console(file=io.StringIO(), width=200)
  out.print(display._render())  # pylint: disable=protected-access
  return out.file.getvalue()


def test_the_display_shows_each_cells_stage_counts_rate_and_eta(tmp_path):
  progress = TableProgress({"hieramas|math": 5, "base|math": 5}, tmp_path / "progress.json", enabled=False)
  report = progress.reporter("hieramas|math")
  report("stage 1", 0, 8)
  progress.display.rows["hieramas|math"]["since"] -= 10.0  # ten seconds into stage 1
  report("stage 1", 4, 8)
  progress.status("base|math", "evaluating", done=0)
  progress.item("base|math", 2)
  text = _text(progress.display)
  row = next(line for line in text.splitlines() if line.startswith("hieramas|math"))
  assert "fit: stage 1" in row and "4/8" in row and "0.40/s" in row and "0:10" in row  # 4 left at 0.4/s
  assert "evaluating" in text and "2/5" in text
  assert "table: 0/2 cells done, 2 at work; test queries 2/5" in text
  report("stage 2 epoch", 1, 3)
  assert "fit: stage 2 epoch" in _text(progress.display) and "1/3" in _text(progress.display)
  progress.item("base|math", 5)
  progress.status("base|math", "done", accuracy=80.0)
  assert "accuracy 80.00" in _text(progress.display) and "5/5" in _text(progress.display)
  progress.close()


def test_in_a_log_file_the_display_prints_its_final_state_once():
  stream = io.StringIO()
  display = console.LiveDisplay([f"cell{i}" for i in range(4)], enabled=True, stream=stream)
  for i in range(4):
    display.update(f"cell{i}", "evaluating", done=0, total=3)
    display.update(f"cell{i}", "done", done=3, total=3, note="accuracy 100.00")
  time.sleep(0.6)  # a refresh or two: nothing is printed to a file before the end
  display.close()
  lines = stream.getvalue().splitlines()
  assert len(lines) == 6 and lines[-1].startswith("table: 4/4 cells done")  # a header, 4 cells, the table line


def test_a_big_table_lists_only_the_cells_at_work():
  display = console.LiveDisplay([f"c{i}" for i in range(30)], enabled=False)
  display.update("c3", "fitting")
  lines = [line for line in _text(display).splitlines() if line.strip()]
  assert len(lines) == 3 and "c3" in lines[1] and "1 at work" in lines[2]


def test_quiet_by_default_and_verbose_brings_library_output_back(monkeypatch):
  monkeypatch.delenv("WANDB_SILENT", raising=False)
  monkeypatch.delenv("WANDB_CONSOLE", raising=False)
  root = logging.getLogger()
  monkeypatch.setattr(root, "level", root.level)
  monkeypatch.setattr("warnings.filters", list(__import__("warnings").filters))
  console.quiet_console(verbose=True)
  assert root.level == logging.INFO and "WANDB_SILENT" not in os.environ
  console.quiet_console(verbose=False)
  assert root.level == logging.WARNING
  assert os.environ["WANDB_SILENT"] == "true" and os.environ["WANDB_CONSOLE"] == "off"
  monkeypatch.setenv("WANDB_SILENT", "false")  # the user's own choice is kept
  console.quiet_console(verbose=False)
  assert os.environ["WANDB_SILENT"] == "false"

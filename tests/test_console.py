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
  assert "fit s1" in row and "4/8" in row and "0.40/s" in row and "0:10" in row  # 4 left at 0.4/s
  assert "evaluating" in text and "2/5" in text
  assert "table: 0/2 cells done, 2 at work; queries 2/5; elapsed 0:" in text
  report("stage 2 epoch", 1, 3)
  assert "fit s2 epoch" in _text(progress.display) and "1/3" in _text(progress.display)
  progress.item("base|math", 5)
  progress.status("base|math", "done", accuracy=80.0)
  assert "80.00%" in _text(progress.display) and "5/5" in _text(progress.display)
  progress.close()


def test_every_line_fits_80_columns_with_rate_eta_accuracy_and_elapsed(tmp_path):
  keys = ["hieramas_total_cost|mmlu_redux|qwen3-80b|main|seed0", "gdesigner|humaneval_plus|gpt-5-mini|main|seed0",
          "hieramas_total_cost|mmlu_redux|gpt-5-mini|main|seed0", "base|math|gpt-5-mini|main|seed0"]
  progress = TableProgress({k: 1000 for k in keys}, tmp_path / "progress.json", enabled=False)
  progress.reporter(keys[0])("stage 2 epoch", 0, 20)
  progress.display.rows[keys[0]]["since"] -= 100.0
  progress.reporter(keys[0])("stage 2 epoch", 7, 20)
  progress.reporter(keys[1])("reinforce", 3, 10)  # GDesigner's fitting row: step, rate and ETA
  progress.display.rows[keys[1]]["since"] -= 30.0
  progress.reporter(keys[1])("reinforce", 4, 10)
  progress.status(keys[3], "evaluating", done=0)
  progress.display.rows[keys[3]]["since"] -= 50.0
  progress.item(keys[3], 1000)
  progress.status(keys[3], "done", accuracy=100.0)
  lines = progress.display.lines()
  assert max(len(line) for line in lines) <= 80
  rows = {line.split()[0]: line for line in lines[1:-1]}
  # The cells stay apart when names are cut (the label is cut, not its benchmark and pool).
  assert set(rows) == {"hieramas_t…|mmlu_redux|qwen3-80b", "gdesigner|humaneval+|gpt-5-mini",
                       "hieramas_…|mmlu_redux|gpt-5-mini", "base|math|gpt-5-mini"}
  assert rows["hieramas_t…|mmlu_redux|qwen3-80b"].split()[1:] == ["fit", "s2", "epoch", "7/20", "0.07/s", "3:06"]
  assert rows["gdesigner|humaneval+|gpt-5-mini"].split()[1:] == ["fit", "reinforce", "4/10", "0.03/s", "3:00"]
  assert rows["base|math|gpt-5-mini"].split()[1:] == ["done", "1000/1000", "20.00/s", "100.00%"]
  assert lines[-1].startswith("table: 1/4 cells done, 2 at work; queries 1000/1000; elapsed ")
  progress.close()


def test_in_a_log_file_the_display_prints_a_heartbeat_and_its_final_state_once():
  stream = io.StringIO()
  display = console.LiveDisplay([f"cell{i}" for i in range(4)], enabled=True, stream=stream, heartbeat_s=0.2)
  display.update("cell0", "evaluating", done=0, total=3)
  time.sleep(0.5)  # two heartbeats: the table line, nothing else
  beats = stream.getvalue().splitlines()
  assert len(beats) >= 2 and all(b.startswith("table: 0/4 cells done, 1 at work; queries 0/3; elapsed ")
                                 for b in beats)
  for i in range(4):
    display.update(f"cell{i}", "evaluating", done=0, total=3)
    display.update(f"cell{i}", "done", done=3, total=3, note="100.00%")
  display.close()
  final = stream.getvalue().splitlines()[len(beats):]
  final = [line for line in final if line.strip()]
  # A header, 4 cells, the table line (more heartbeats may have come before it).
  assert final[-6].startswith("cell ") and final[-1].startswith("table: 4/4 cells done")
  assert [line.split()[0] for line in final[-5:-1]] == [f"cell{i}" for i in range(4)]


def test_a_big_table_lists_only_the_cells_at_work_and_its_final_log_lists_every_cell():
  display = console.LiveDisplay([f"c{i}" for i in range(30)], enabled=False)
  display.update("c3", "fitting")
  lines = [line for line in _text(display).splitlines() if line.strip()]
  assert len(lines) == 3 and "c3" in lines[1] and "1 at work" in lines[2]
  for i in range(30):
    display.update(f"c{i}", "done")
  lines = [line for line in _text(display).splitlines() if line.strip()]
  assert len(lines) == 1 and lines[0].startswith("table: 30/30 cells done")  # no empty table header
  stream = io.StringIO()
  logged = console.LiveDisplay([f"c{i}" for i in range(30)], enabled=True, stream=stream)
  for i in range(30):
    logged.update(f"c{i}", "evaluating", done=0, total=2)
    logged.update(f"c{i}", "done", done=2, total=2, note="50.00%")
  logged.close()
  lines = [line for line in stream.getvalue().splitlines() if line.strip()]
  assert len(lines) == 32 and all("50.00%" in line for line in lines[1:-1])  # every cell's result, once


def test_quiet_by_default_and_verbose_brings_library_output_back(monkeypatch):
  monkeypatch.delenv("WANDB_SILENT", raising=False)
  monkeypatch.delenv("WANDB_CONSOLE", raising=False)
  root = logging.getLogger()
  monkeypatch.setattr(root, "level", root.level)
  monkeypatch.setattr("warnings.filters", list(__import__("warnings").filters))
  console.quiet_console(verbose=True)
  assert root.level == logging.INFO and "WANDB_SILENT" not in os.environ
  monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
  console.quiet_console(verbose=False)
  assert root.level == logging.WARNING
  assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"  # transformers' "Loading weights" bar
  assert os.environ["WANDB_SILENT"] == "true" and os.environ["WANDB_CONSOLE"] == "off"
  monkeypatch.setenv("WANDB_SILENT", "false")  # the user's own choice is kept
  console.quiet_console(verbose=False)
  assert os.environ["WANDB_SILENT"] == "false"

"""The benchmarks' shared bookkeeping (hieramas_jax/bench/): one key of results/bench.json written without
touching the others, partial runs keeping the figures they did not time, the records' summaries.

The measurements themselves are the benchmarks' (`make bench`); nothing here times anything."""

from __future__ import annotations

import json
import os

import pytest

from hieramas_jax.bench import cache, executor, table1, timing
from hieramas_jax.bench.results import existing_entry, machine, publish, update_json_key


def test_update_json_key_sets_its_key_and_keeps_the_others(tmp_path):
  path = tmp_path / "bench.json"
  update_json_key(path, "cache", {"open_ms": 3.0})  # a missing file is created
  update_json_key(path, "sandbox", {"met": True})
  update_json_key(path, "cache", {"open_ms": 2.5})
  assert json.loads(path.read_text()) == {"cache": {"open_ms": 2.5}, "sandbox": {"met": True}}


def test_existing_entry_is_empty_without_a_file_or_a_key(tmp_path):
  path = tmp_path / "bench.json"
  assert existing_entry(path, "executor") == {}
  path.write_text(json.dumps({"cache": {"open_ms": 1.0}, "executor": None}))
  assert existing_entry(path, "executor") == {} and existing_entry(path, "table1") == {}
  assert existing_entry(path, "cache") == {"open_ms": 1.0}


def test_publish_writes_the_key_and_keeps_the_others(tmp_path, monkeypatch):
  monkeypatch.setenv("WANDB_MODE", "disabled")  # the W&B run is writers.log_result_run's (tests/test_wandb.py)
  path = tmp_path / "bench.json"
  path.write_text(json.dumps({"scoring": {"k10000_ms": 4.0}}))
  publish(path, "timing", {"met": False, "provenance": {"flags": {"repeats": 2}}})
  assert json.loads(path.read_text()) == {"scoring": {"k10000_ms": 4.0},
                                          "timing": {"met": False, "provenance": {"flags": {"repeats": 2}}}}


def test_machine_names_cores_load_and_the_note():
  out = machine((5.123, 4.0, 3.0), "shared")
  assert list(out) == ["cpu_count", "load_average_before", "load_average_after", "note"]
  assert out["cpu_count"] == os.cpu_count() and out["load_average_before"] == [5.12, 4.0, 3.0]
  assert len(out["load_average_after"]) == 3 and out["note"] == "shared"
  assert "note" not in machine((1.0, 1.0, 1.0))


def test_executor_run_of_one_part_keeps_the_other_parts_figures(tmp_path, monkeypatch):
  monkeypatch.setenv("WANDB_MODE", "disabled")
  path = tmp_path / "bench.json"
  path.write_text(json.dumps({"executor": {"calls_per_s": 900.0, "wall_over_critical_path": 1.5, "machine": {}},
                              "cache": {"met": True}}))
  monkeypatch.setattr(executor, "measure", lambda settings, parts: {"wall_over_critical_path": 1.05,
                                                                     "machine": {"cpu_count": 2}})
  settings = executor.Settings(seed=0, concurrency=1, calls=1, sdk_calls=1, reps=1, queries=1, latency_s=0.1,
                               latency_reps=1, runner="aio")
  executor.run(settings, parts="a", out=str(path), flags={"parts": "a"})
  written = json.loads(path.read_text())
  assert written["cache"] == {"met": True}
  assert written["executor"]["calls_per_s"] == 900.0  # part (b), not timed this run, kept
  assert written["executor"]["wall_over_critical_path"] == 1.05 and written["executor"]["machine"] == {"cpu_count": 2}
  assert written["executor"]["provenance"]["flags"] == {"parts": "a"}


def test_table1_keeps_the_segments_a_run_does_not_time_with_their_own_provenance():
  old = {"published": {"cold_s": 500.0}, "suite_recipe_row": {"cold_s": 800.0, "scope": {"limit": 3}},
         "scope": {"limit": None}, "provenance": {"seed": 0}, "note": "old"}
  kept = table1.kept_segments(old, ["published"])
  # An entry written before segments carried their own scope lends its top-level one; a segment's own wins.
  assert kept == {"suite_recipe_row": {"scope": {"limit": 3}, "provenance": {"seed": 0}, "cold_s": 800.0}}
  assert table1.kept_segments(old, ["published", "suite_recipe_row"]) == {}
  assert table1.kept_segments({}, []) == {}


def test_table1_segments_and_summary_line():
  assert table1.segment_methods("suite_recipe_row", ["base"]) == [table1.SUITE_RECIPE_ROW]
  assert table1.segment_methods("published", ["base", "cot"]) == ["base", "cot"]
  assert table1.SUITE_RECIPE_ROW not in table1.segment_methods("published", None)
  # The whole command, as the user runs it, includes the suite-recipe row; a method list narrows it.
  from hieramas_jax.report.paper import TABLE1_METHODS  # pylint: disable=import-outside-toplevel
  assert table1.segment_methods("table", None) == list(TABLE1_METHODS)
  assert table1.SUITE_RECIPE_ROW in table1.segment_methods("table", None)
  assert table1.segment_methods("table", ["base"]) == ["base"]
  # The jax-encoder segment is the same command with each sentence encoder on that backend.
  assert table1.segment_methods("table_jax_encoder", None) == list(TABLE1_METHODS)
  options = table1.encoder_options(["base", "gdesigner", "hieramas", "aflow"], "jax")
  assert options == ["gdesigner.encoder=all-MiniLM-L6-v2:jax", "hieramas.encoder=all-MiniLM-L6-v2:jax"]
  assert table1.summary_line("log\nTable 1: 66 cells; wrote /tmp/x/table1.json\n") == "Table 1: 66 cells"
  assert table1.summary_line("") == ""


def test_timing_summary_checks_every_run_against_the_old_bounds():
  assert timing.summary([1.0, 1.2, 1.1], low=0.95, high=1.6) == {
      "median_s": 1.1, "min_s": 1.0, "max_s": 1.2, "old_bounds_s": [0.95, 1.6], "within_old_bounds": True}
  assert not timing.summary([1.0, 1.6], low=0.95, high=1.6)["within_old_bounds"]  # the high bound is open


def _size(open_ms: float, lookup_us: float) -> dict:
  return {"store": {"open_ms": open_ms, "lookup_us_mean": lookup_us, "rss_growth_mb": 1.0},
          "jsonl": {"open_ms": 10 * open_ms, "rss_growth_mb": 9.0}}


def test_cache_summary_reads_the_goals_at_one_million_entries_only():
  at_1m = cache.summarize({"10000": _size(5.0, 20.0), "1000000": _size(40.0, 90.0)})
  assert (at_1m["entries_largest"], at_1m["open_ms_1m"], at_1m["lookup_us_1m"], at_1m["jsonl_open_ms_1m"]) == (
      1_000_000, 40.0, 90.0, 400.0)
  assert at_1m["met"] and at_1m["store_rss_growth_mb"] == {"10000": 1.0, "1000000": 1.0}
  assert not cache.summarize({"1000000": _size(60.0, 90.0)})["met"]
  small = cache.summarize({"10000": _size(5.0, 20.0)})
  assert small["open_ms_1m"] is None and small["met"] is False and small["entries_largest"] == 10_000


def test_cache_median_of_takes_each_fields_median():
  assert cache.median_of([{"a": 1.0, "b": 5.0}, {"a": 3.0, "b": 4.0}, {"a": 2.0, "b": 6.12345}]) == {
      "a": 2.0, "b": 5.0}


def test_scaling_compares_runs_over_seeds_by_their_seed0_cells():
  cell = lambda seed, correct: {"seed": seed, "accuracy": 50.0, "cost_usd": 0.1,  # noqa: E731
                                "outcomes": {"ids_sha256": "x", "correct": correct}}
  one = {"base|math|gpt-5-mini|main|seed0": cell(0, "10")}
  three = {**one, "base|math|gpt-5-mini|main|seed1": cell(1, "01"), "base|math|gpt-5-mini|main|seed2": cell(2, "11")}
  assert table1.seed0_digest(one) == table1.seed0_digest(three)
  assert table1.seed0_digest(one) != table1.seed0_digest({"base|math|gpt-5-mini|main|seed0": cell(0, "01")})
  assert table1.parse_seed_counts(["1", "3"]) == [1, 3]
  for bad in (["0"], ["two"], []):
    with pytest.raises(table1.UserError, match="--scaling_seeds"):
      table1.parse_seed_counts(bad)


def test_the_install_is_timed_on_a_fresh_clone_only(tmp_path):
  (tmp_path / "clone").mkdir()
  with pytest.raises(table1.UserError, match="fresh clone"):
    table1.time_install(out=str(tmp_path / "bench.json"), work_dir=str(tmp_path))
  assert not (tmp_path / "bench.json").exists()

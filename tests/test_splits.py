"""Saved splits: what the recipe gives, right sizes, disjoint, stratified, flagged rows out."""

from __future__ import annotations

import collections
import json
import shutil
import subprocess
import sys

import pytest

from hieramas_jax.benchmarks import splits
from hieramas_jax.benchmarks.data import UnknownBenchmarkError, load_items
from hieramas_jax.paths import REPO_DIR


def test_saved_splits_match_the_recipe_via_the_cli():
  proc = subprocess.run([sys.executable, "-m", "hieramas_jax.benchmarks.splits", "--check"],
                        cwd=REPO_DIR, capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0, proc.stderr
  assert "match the recipe (seed 0)" in proc.stdout


def test_check_fails_on_a_tampered_file(tmp_path, monkeypatch):
  for path in splits.SPLITS_DIR.glob("*.json"):
    shutil.copy(path, tmp_path / path.name)
  monkeypatch.setattr(splits, "SPLITS_DIR", tmp_path)
  assert splits.check_saved() == []
  data = json.loads((tmp_path / "math.json").read_text())
  data["test"][0], data["train"][0] = data["train"][0], data["test"][0]
  (tmp_path / "math.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
  problems = splits.check_saved()
  assert len(problems) == 1 and "math.json" in problems[0]
  (tmp_path / "humaneval_plus.json").unlink()
  assert any("missing" in p for p in splits.check_saved())
  assert splits.main(["--check"]) == 1


@pytest.mark.parametrize("benchmark,sizes", [
    ("humaneval_plus", (80, 20, 64)), ("math", (350, 60, 90)), ("mmlu_redux", (2349, 125, 250)),
])
def test_sizes_disjoint_and_complete(benchmark, sizes):
  parts = {p: splits.load_split(benchmark, p) for p in splits.PARTS}
  assert tuple(len(parts[p]) for p in splits.PARTS) == sizes
  ids = [it.id for p in splits.PARTS for it in parts[p]]
  assert len(ids) == len(set(ids))
  eligible = {it.id for it in load_items(benchmark)
              if benchmark != "mmlu_redux" or it.meta["error_type"] == "ok"}
  assert set(ids) == eligible
  assert all(it.benchmark == benchmark for p in parts.values() for it in p)


def test_mmlu_flagged_rows_are_in_no_part():
  flagged = {it.id for it in load_items("mmlu_redux") if it.meta["error_type"] != "ok"}
  assert len(flagged) == 276
  for setting, parts in (("main", splits.PARTS), ("generalization", splits.GENERALIZATION_PARTS)):
    for part in parts:
      assert not flagged & set(splits.split_ids("mmlu_redux", part, setting))


def _within_one_of_proportional(part_counts, all_counts, size):
  total = sum(all_counts.values())
  return all(abs(part_counts.get(k, 0) - size * n / total) < 1.0 for k, n in all_counts.items())


def test_math_is_stratified_by_level_and_mmlu_by_subject():
  math_all = collections.Counter(it.meta["level"] for it in load_items("math"))
  for part, size in (("test", 90), ("val", 60)):
    counts = collections.Counter(it.meta["level"] for it in splits.load_split("math", part))
    assert _within_one_of_proportional(counts, math_all, size), (part, counts)
  ok = [it for it in load_items("mmlu_redux") if it.meta["error_type"] == "ok"]
  mmlu_all = collections.Counter(it.meta["subject"] for it in ok)
  assert len(mmlu_all) == 30
  for part, size in (("test", 250), ("val", 125)):
    counts = collections.Counter(it.meta["subject"] for it in splits.load_split("mmlu_redux", part))
    assert _within_one_of_proportional(counts, mmlu_all, size), (part, counts)


def test_generalization_split_holds_out_five_subjects():
  saved = json.loads((splits.SPLITS_DIR / "mmlu_redux_generalization.json").read_text())
  held_out = set(saved["held_out_subjects"])
  assert len(held_out) == 5
  ood = splits.load_split("mmlu_redux", "test_ood", "generalization")
  assert {it.meta["subject"] for it in ood} == held_out
  ok_in_held_out = [it for it in load_items("mmlu_redux")
                    if it.meta["subject"] in held_out and it.meta["error_type"] == "ok"]
  assert len(ood) == len(ok_in_held_out)
  seen = set()
  for part, size in (("train", None), ("val", 125), ("test", 250)):
    items = splits.load_split("mmlu_redux", part, "generalization")
    assert not {it.meta["subject"] for it in items} & held_out
    if size:
      assert len(items) == size
    seen |= {it.meta["subject"] for it in items}
  assert len(seen) == 25


def test_splits_are_deterministic_and_seeded():
  assert splits.make_split("math") == splits.make_split("math")
  saved = json.loads((splits.SPLITS_DIR / "math.json").read_text())
  assert saved["seed"] == splits.SPLIT_SEED == 0
  assert "hieramas_jax.benchmarks.splits" in saved["command"]


def test_bad_names_are_clear_errors():
  with pytest.raises(splits.SplitError, match="unknown split part 'dev'"):
    splits.load_split("math", "dev")
  with pytest.raises(UnknownBenchmarkError, match="unknown benchmark 'gsm8k'"):
    splits.load_split("gsm8k", "test")
  with pytest.raises(splits.SplitError, match="unknown split setting"):
    splits.load_split("math", "test", "ood")
  with pytest.raises(splits.SplitError, match="mmlu_redux only"):
    splits.load_split("math", "test", "generalization")
  with pytest.raises(splits.SplitError, match="unknown split part 'test_ood'"):
    splits.load_split("mmlu_redux", "test_ood")  # only in the generalization setting

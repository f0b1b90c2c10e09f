"""Seeded, saved train / val / test splits, identical for every method.

The id files in `hieramas_jax/data/splits/` are the source of truth; this module also holds the
recipe that made them, so `python -m hieramas_jax.benchmarks.splits --check` can prove the saved
files are what the recipe gives (and `--write` regenerates them).

Recipe (seed `SPLIT_SEED` = 0; one numpy Generator per benchmark, seeded with
(SPLIT_SEED, a fixed per-benchmark number), so changing one benchmark never moves another):
  * humaneval_plus: 164 tasks -> test 64, val 20, train 80 (uniform without stratification).
  * math: MATH500 -> test 90, val 60, train 350, each stratified by level (largest remainder).
  * mmlu_redux: the 2,724 rows whose `error_type` is "ok" (the 276 flagged rows are dropped from
    every part) -> test 250, val 125, train the rest, stratified by subject.
  * mmlu_redux, setting "generalization" (paper Table 3): 5 seeded subjects held out entirely
    -> `test_ood` (all their "ok" rows); the other 25 subjects -> test 250 / val 125 / train,
    stratified by subject.
Ids inside each part are sorted, so the files diff cleanly.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from typing import Sequence

import numpy as np

from hieramas_jax.benchmarks.data import (BENCHMARKS, DataError, Item, check_benchmark,
                                          items_by_id, load_items)
from hieramas_jax.paths import SPLITS_DIR

SPLIT_SEED = 0
PARTS = ("train", "val", "test")
SETTINGS = ("main", "generalization")
GENERALIZATION_PARTS = PARTS + ("test_ood",)
N_HELD_OUT_SUBJECTS = 5

# (test, val) sizes; train is the rest. Test sizes are the paper's (accuracy steps 1/64,
# 1/90, 1/250).
SIZES = {"humaneval_plus": (64, 20), "math": (90, 60), "mmlu_redux": (250, 125)}
# A fixed number per benchmark mixed into the seed (not hash(): that is salted per process).
_STREAM = {"humaneval_plus": 1, "math": 2, "mmlu_redux": 3, "mmlu_redux/generalization": 4}

REGENERATE_COMMAND = "python -m hieramas_jax.benchmarks.splits --write"


class SplitError(ValueError):
  """An unknown split part or setting, or a saved split file that does not match the data."""


def _split_path(benchmark: str, setting: str):
  name = benchmark if setting == "main" else f"{benchmark}_{setting}"
  return SPLITS_DIR / f"{name}.json"


def _allocate(counts: dict[str, int], total: int) -> dict[str, int]:
  """Largest-remainder proportional allocation of `total` over strata of sizes `counts`.

  Ties in the remainder go to the stratum that sorts first, so the result is deterministic.
  """
  n = sum(counts.values())
  if total > n:
    raise SplitError(f"cannot draw {total} from {n} items")
  exact = {k: total * c / n for k, c in counts.items()}
  alloc = {k: int(np.floor(v)) for k, v in exact.items()}
  short = total - sum(alloc.values())
  order = sorted(counts, key=lambda k: (-(exact[k] - alloc[k]), k))
  for k in order[:short]:
    alloc[k] += 1
  return alloc


def _stratified_parts(ids_by_stratum: dict[str, list[str]], sizes: Sequence[int],
                      rng: np.random.Generator) -> list[list[str]]:
  """Draw len(sizes) disjoint parts, each stratified, plus the remainder as the last part."""
  pools = {k: list(rng.permutation(sorted(v))) for k, v in sorted(ids_by_stratum.items())}
  parts = []
  for size in sizes:
    alloc = _allocate({k: len(v) for k, v in pools.items()}, size)
    part = []
    for k in sorted(pools):
      take = alloc[k]
      part.extend(pools[k][:take])
      pools[k] = pools[k][take:]
    parts.append(sorted(part))
  parts.append(sorted(i for v in pools.values() for i in v))
  return parts


def _eligible(benchmark: str) -> list[Item]:
  items = list(load_items(benchmark))
  if benchmark == "mmlu_redux":
    items = [it for it in items if it.meta["error_type"] == "ok"]
  return items


def _stratum(item: Item) -> str:
  if item.benchmark == "math":
    return f"level{item.meta['level']}"
  if item.benchmark == "mmlu_redux":
    return item.meta["subject"]
  return "all"


def make_split(benchmark: str, setting: str = "main") -> dict:
  """The split as the recipe gives it (a dict ready to be saved as JSON)."""
  check_benchmark(benchmark)
  _check_setting(benchmark, setting)
  key = benchmark if setting == "main" else f"{benchmark}/{setting}"
  rng = np.random.default_rng([SPLIT_SEED, _STREAM[key]])
  items = _eligible(benchmark)
  test_n, val_n = SIZES[benchmark]
  out = {"benchmark": benchmark, "setting": setting, "seed": SPLIT_SEED,
         "command": REGENERATE_COMMAND, "recipe": "see hieramas_jax/benchmarks/splits.py docstring"}
  if setting == "generalization":
    subjects = sorted({it.meta["subject"] for it in items})
    held_out = sorted(str(s) for s in rng.choice(subjects, size=N_HELD_OUT_SUBJECTS, replace=False))
    out["held_out_subjects"] = held_out
    out["test_ood"] = sorted(it.id for it in items if it.meta["subject"] in held_out)
    items = [it for it in items if it.meta["subject"] not in held_out]
  strata: dict[str, list[str]] = {}
  for it in items:
    strata.setdefault(_stratum(it), []).append(it.id)
  test, val, train = _stratified_parts(strata, (test_n, val_n), rng)
  out.update(train=train, val=val, test=test)
  if benchmark == "mmlu_redux":
    out["dropped_flagged_rows"] = sum(1 for it in load_items(benchmark)
                                      if it.meta["error_type"] != "ok")
  return out


def _check_setting(benchmark: str, setting: str) -> None:
  if setting not in SETTINGS:
    raise SplitError(f"unknown split setting {setting!r}; known: {', '.join(SETTINGS)}")
  if setting == "generalization" and benchmark != "mmlu_redux":
    raise SplitError(f"the generalization setting exists for mmlu_redux only, not {benchmark!r}")


def all_settings() -> list[tuple[str, str]]:
  return [(b, "main") for b in BENCHMARKS] + [("mmlu_redux", "generalization")]


@functools.lru_cache(maxsize=None)
def _load_file(benchmark: str, setting: str) -> dict:
  path = _split_path(benchmark, setting)
  if not path.exists():
    raise SplitError(f"split file missing: {path}; regenerate with `{REGENERATE_COMMAND}`")
  try:
    return json.loads(path.read_text())
  except json.JSONDecodeError as e:
    raise SplitError(f"{path}: malformed JSON ({e.msg})") from None


def split_ids(benchmark: str, part: str, setting: str = "main") -> list[str]:
  """Ids of one part of a saved split.

  Args:
    benchmark: one of BENCHMARKS.
    part: "train", "val" or "test"; "test_ood" too in the generalization setting.
    setting: "main", or "generalization" (mmlu_redux only: 5 subjects held out).

  Raises:
    UnknownBenchmarkError, SplitError: unknown names or a broken split file.
  """
  check_benchmark(benchmark)
  _check_setting(benchmark, setting)
  parts = GENERALIZATION_PARTS if setting == "generalization" else PARTS
  if part not in parts:
    raise SplitError(f"unknown split part {part!r} for {benchmark} ({setting}); "
                     f"known: {', '.join(parts)}")
  data = _load_file(benchmark, setting)
  if part not in data:
    raise SplitError(f"{_split_path(benchmark, setting)} lacks the part {part!r}")
  return list(data[part])


def load_split(benchmark: str, part: str, setting: str = "main") -> list[Item]:
  """Items of one part of a saved split, in the file's (sorted id) order."""
  by_id = items_by_id(benchmark)
  ids = split_ids(benchmark, part, setting)
  missing = [i for i in ids if i not in by_id]
  if missing:
    raise DataError(f"split {benchmark}/{setting}/{part} names ids not in the data: {missing[:3]}")
  return [by_id[i] for i in ids]


def _dump(split: dict) -> str:
  return json.dumps(split, indent=1, sort_keys=True) + "\n"


def check_saved() -> list[str]:
  """Regenerate every split in memory; return one message per saved file that differs."""
  problems = []
  for benchmark, setting in all_settings():
    path = _split_path(benchmark, setting)
    expected = _dump(make_split(benchmark, setting))
    if not path.exists():
      problems.append(f"{path}: missing")
    elif path.read_text() != expected:
      problems.append(f"{path}: differs from what the recipe gives")
  return problems


def write_all() -> None:
  SPLITS_DIR.mkdir(parents=True, exist_ok=True)
  for benchmark, setting in all_settings():
    _split_path(benchmark, setting).write_text(_dump(make_split(benchmark, setting)))
  _load_file.cache_clear()


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  group = parser.add_mutually_exclusive_group(required=True)
  group.add_argument("--check", action="store_true",
                     help="regenerate in memory, fail if a saved file differs")
  group.add_argument("--write", action="store_true", help="(re)write the saved split files")
  args = parser.parse_args(argv)
  if args.write:
    write_all()
    print(f"wrote {len(all_settings())} split files to {SPLITS_DIR}")
    return 0
  problems = check_saved()
  for p in problems:
    print(p, file=sys.stderr)
  if not problems:
    print(f"all {len(all_settings())} saved splits match the recipe (seed {SPLIT_SEED})")
  return 1 if problems else 0


if __name__ == "__main__":
  sys.exit(main())

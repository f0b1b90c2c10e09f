"""Loaders for the vendored benchmark files, as one `Item` type for every benchmark.

The simulated pool (`hieramas_jax.sim`) loads the same items through these functions to
recognise a question in a prompt; it never sees anything else of the caller.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import gzip
import hashlib
import json
from typing import Any, Mapping

from hieramas_jax.errors import UserError
from hieramas_jax.paths import BENCHMARK_DATA_DIR

BENCHMARKS = ("humaneval_plus", "math", "mmlu_redux")
# How tables, figures and the calibration report name each benchmark.
BENCHMARK_TITLES = {"humaneval_plus": "HumanEval+", "math": "MATH", "mmlu_redux": "MMLU-Redux"}

# Benchmark -> vendored file (relative to BENCHMARK_DATA_DIR). Hashes of these bytes go
# into every result's provenance.
DATA_FILES = {
    "humaneval_plus": "humanevalplus/HumanEvalPlus.jsonl.gz",
    "math": "math/math500_test.jsonl",
    "mmlu_redux": "mmlu_redux/mmlu_redux_1.0_normalized.jsonl",
}

# Benchmark -> the domain name the LLM pool and the simulator use.
DOMAIN = {"humaneval_plus": "code", "math": "math", "mmlu_redux": "knowledge"}

LETTERS = "ABCD"


class DataError(UserError, ValueError):
  """A benchmark file or row is missing or malformed."""


class UnknownBenchmarkError(UserError, KeyError):
  """A benchmark name that the suite does not know."""

  def __str__(self) -> str:
    close = difflib.get_close_matches(str(self.args[0]).lower().replace("-", "_"), BENCHMARKS, n=1)
    return (f"unknown benchmark {self.args[0]!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
            + f"; known: {', '.join(BENCHMARKS)}")


@dataclasses.dataclass(frozen=True)
class Item:
  """One benchmark question.

  Attributes:
    benchmark: one of BENCHMARKS.
    id: stable id, unique within the benchmark (HumanEval task id, MATH unique_id,
      `subject/index` for MMLU-Redux).
    question: the text a model is shown (for MMLU the stem plus lettered options; for
      HumanEval+ the function prompt; for MATH the problem).
    answer: gold answer (a letter A-D, a MATH answer string, or the canonical solution body).
    meta: benchmark specific fields (subject, level, entry_point, tests...).
  """

  benchmark: str
  id: str
  question: str
  answer: str
  meta: Mapping[str, Any] = dataclasses.field(default_factory=dict, hash=False, compare=False)

  @property
  def domain(self) -> str:
    return DOMAIN[self.benchmark]


def check_benchmark(name: str) -> str:
  if name not in BENCHMARKS:
    raise UnknownBenchmarkError(name)
  return name


def data_sha256(name: str) -> str:
  """sha256 of the vendored file behind a benchmark (for provenance and the grade caches' keys).

  Hashed once per file version: every HumanEval+ grading keys its cache by it, and rehashing the file
  on each of a table's ~20k gradings cost ~15 s of the runner's one busy core (issue 29's profile).
  The file's size and mtime are part of the memo's key, so an edited file is hashed again.
  """
  path = BENCHMARK_DATA_DIR / DATA_FILES[check_benchmark(name)]
  st = path.stat()
  return _file_sha256(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:  # pylint: disable=unused-argument
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def _read_jsonl(path) -> list[tuple[int, dict]]:
  """(line number, row) for every non-blank line: errors name the line an editor shows."""
  if not path.exists():
    raise DataError(f"benchmark file missing: {path}")
  opener = gzip.open if path.suffix == ".gz" else open
  rows = []
  with opener(path, "rt", encoding="utf-8") as f:
    for lineno, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        row = json.loads(line)
      except json.JSONDecodeError as e:
        raise DataError(f"{path}:{lineno}: malformed JSON ({e.msg})") from None
      if not isinstance(row, dict):
        raise DataError(f"{path}:{lineno}: a row must be a JSON object, got {type(row).__name__}")
      rows.append((lineno, row))
  return rows


def _require(row: dict, keys: tuple[str, ...], where: str) -> None:
  missing = [k for k in keys if k not in row]
  if missing:
    raise DataError(f"{where}: row lacks {', '.join(missing)}")


def _text(row: dict, key: str, where: str) -> str:
  """row[key] as a non-empty string: a null answer must not load as the string "None"."""
  value = row[key]
  if not isinstance(value, str):
    raise DataError(f"{where}: {key} must be a string, got {type(value).__name__} ({value!r:.60})")
  if not value.strip():
    raise DataError(f"{where}: {key} is empty")
  return value


# MMLU-Redux 1.0 rows whose options repeat one another: four marked `ok` by the annotators (their
# gold option is not one of the repeats), one flagged `multiple_correct_answers` (out of every split).
# Vendored byte-identical, so they are allowed here by id and exact options and flagged in meta
# (`duplicate_options`); any other repeat is a DataError.
KNOWN_DUPLICATE_OPTIONS = {
    "business_ethics/22": ("Employee rights", "Employee rights", "Employer duties", "Employee duties"),
    "electrical_engineering/74": ("0.015 joule.", "0.15 joule.", "0.015 joule.", "1.15 joule."),
    "high_school_macroeconomics/25": ("Increase \xa0\xa0\xa0 Increase", "No change \xa0\xa0\xa0 No change",
                                      "Increase \xa0\xa0\xa0 No change", "Increase \xa0\xa0\xa0 Increase"),
    "high_school_physics/54": ("0.16 N", "0.16 N", "0.32 N", "0.36 N"),
    "public_relations/36": ("proactive", "reactive", "manipulative", "manipulative"),
}


def format_mmlu_question(stem: str, choices: list[str]) -> str:
  """The MMLU question as models see it: stem, then `A. ...` lines."""
  options = "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(choices))
  return f"{stem.strip()}\n{options}"


def parse_mmlu_row(row: dict, where: str) -> Item:
  _require(row, ("subject", "index_in_subject", "question", "choices", "answer", "error_type"), where)
  stem = _text(row, "question", where)
  item_id = f"{row['subject']}/{row['index_in_subject']}"
  choices = row["choices"]
  if not isinstance(choices, list) or len(choices) != 4:
    raise DataError(f"{where}: expected 4 choices, got {choices!r:.200}")
  for i, c in enumerate(choices):
    if not isinstance(c, str) or not c.strip():
      raise DataError(f"{where}: choice {LETTERS[i]} must be a non-empty string, got {c!r:.60}")
  duplicate = len({c.strip() for c in choices}) != 4
  if duplicate and KNOWN_DUPLICATE_OPTIONS.get(item_id) != tuple(choices):
    raise DataError(f"{where}: the 4 choices are not distinct: {choices!r:.200}")
  ans = row["answer"]
  if type(ans) is not int or not 0 <= ans < 4:
    raise DataError(f"{where}: answer must be an integer 0-3, got {ans!r:.60}")
  return Item(
      benchmark="mmlu_redux",
      id=item_id,
      question=format_mmlu_question(stem, choices),
      answer=LETTERS[ans],
      meta={"subject": row["subject"], "error_type": row["error_type"],
            "stem": stem, "choices": list(choices), "duplicate_options": duplicate},
  )


def parse_math_row(row: dict, where: str) -> Item:
  _require(row, ("problem", "answer", "subject", "level", "unique_id"), where)
  return Item(
      benchmark="math",
      id=_text(row, "unique_id", where),
      question=_text(row, "problem", where),
      answer=_text(row, "answer", where),
      meta={"subject": row["subject"], "level": int(row["level"]), "solution": row.get("solution", "")},
  )


def parse_humaneval_row(row: dict, where: str) -> Item:
  _require(row, ("task_id", "prompt", "entry_point", "canonical_solution", "test",
                 "base_input", "plus_input", "atol"), where)
  for key in ("base_input", "plus_input"):
    if not isinstance(row[key], list):
      raise DataError(f"{where}: {key} must be a list of argument lists, got {type(row[key]).__name__}")
  atol = row["atol"]
  if atol is not None and (type(atol) not in (int, float) or atol < 0):
    raise DataError(f"{where}: atol must be a number >= 0, got {atol!r:.60}")
  return Item(
      benchmark="humaneval_plus",
      id=_text(row, "task_id", where),
      question=_text(row, "prompt", where),
      answer=_text(row, "canonical_solution", where),
      meta={"entry_point": _text(row, "entry_point", where), "test": row["test"],
            "base_input": row["base_input"], "plus_input": row["plus_input"],
            "atol": atol, "contract": row.get("contract", "")},
  )


_PARSERS = {"humaneval_plus": parse_humaneval_row, "math": parse_math_row, "mmlu_redux": parse_mmlu_row}


@functools.lru_cache(maxsize=None)
def load_items(name: str) -> tuple[Item, ...]:
  """All items of a benchmark, in file order. Cached: the files never change in a run."""
  check_benchmark(name)
  path = BENCHMARK_DATA_DIR / DATA_FILES[name]
  parse = _PARSERS[name]
  items = tuple(parse(row, f"{path.name}:{lineno}") for lineno, row in _read_jsonl(path))
  ids = [it.id for it in items]
  if len(set(ids)) != len(ids):
    raise DataError(f"{path}: duplicate item ids")
  return items


@functools.lru_cache(maxsize=None)
def items_by_id(name: str) -> dict[str, Item]:
  return {it.id: it for it in load_items(name)}

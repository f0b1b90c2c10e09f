"""Loaders for the vendored benchmark files, as one `Item` type for every benchmark.

The simulated pool (`hieramas_jax.sim`) loads the same items through these functions to
recognise a question in a prompt; it never sees anything else of the caller.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import json
from typing import Any, Mapping

from hieramas_jax.paths import BENCHMARK_DATA_DIR

BENCHMARKS = ("humaneval_plus", "math", "mmlu_redux")

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


class DataError(ValueError):
  """A benchmark file or row is missing or malformed."""


class UnknownBenchmarkError(KeyError):
  """A benchmark name that the suite does not know."""

  def __str__(self) -> str:
    return (f"unknown benchmark {self.args[0]!r}; known: {', '.join(BENCHMARKS)}")


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
  """sha256 of the vendored file behind a benchmark (for provenance)."""
  path = BENCHMARK_DATA_DIR / DATA_FILES[check_benchmark(name)]
  return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_jsonl(path) -> list[dict]:
  if not path.exists():
    raise DataError(f"benchmark file missing: {path}")
  opener = gzip.open if path.suffix == ".gz" else open
  rows = []
  with opener(path, "rt", encoding="utf-8") as f:
    for lineno, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        rows.append(json.loads(line))
      except json.JSONDecodeError as e:
        raise DataError(f"{path}:{lineno}: malformed JSON ({e.msg})") from None
  return rows


def _require(row: dict, keys: tuple[str, ...], where: str) -> None:
  missing = [k for k in keys if k not in row]
  if missing:
    raise DataError(f"{where}: row lacks {', '.join(missing)}")


def format_mmlu_question(stem: str, choices: list[str]) -> str:
  """The MMLU question as models see it: stem, then `A. ...` lines."""
  options = "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(choices))
  return f"{stem.strip()}\n{options}"


def parse_mmlu_row(row: dict, where: str) -> Item:
  _require(row, ("subject", "index_in_subject", "question", "choices", "answer", "error_type"), where)
  choices = row["choices"]
  if not isinstance(choices, list) or len(choices) != 4:
    raise DataError(f"{where}: expected 4 choices, got {choices!r}")
  ans = row["answer"]
  if not isinstance(ans, int) or not 0 <= ans < 4:
    raise DataError(f"{where}: answer must be 0-3, got {ans!r}")
  return Item(
      benchmark="mmlu_redux",
      id=f"{row['subject']}/{row['index_in_subject']}",
      question=format_mmlu_question(row["question"], choices),
      answer=LETTERS[ans],
      meta={"subject": row["subject"], "error_type": row["error_type"],
            "stem": row["question"], "choices": list(choices)},
  )


def parse_math_row(row: dict, where: str) -> Item:
  _require(row, ("problem", "answer", "subject", "level", "unique_id"), where)
  return Item(
      benchmark="math",
      id=row["unique_id"],
      question=row["problem"],
      answer=str(row["answer"]),
      meta={"subject": row["subject"], "level": int(row["level"]), "solution": row.get("solution", "")},
  )


def parse_humaneval_row(row: dict, where: str) -> Item:
  _require(row, ("task_id", "prompt", "entry_point", "canonical_solution", "test",
                 "base_input", "plus_input", "atol"), where)
  return Item(
      benchmark="humaneval_plus",
      id=row["task_id"],
      question=row["prompt"],
      answer=row["canonical_solution"],
      meta={"entry_point": row["entry_point"], "test": row["test"],
            "base_input": row["base_input"], "plus_input": row["plus_input"],
            "atol": row["atol"], "contract": row.get("contract", "")},
  )


_PARSERS = {"humaneval_plus": parse_humaneval_row, "math": parse_math_row, "mmlu_redux": parse_mmlu_row}


@functools.lru_cache(maxsize=None)
def load_items(name: str) -> tuple[Item, ...]:
  """All items of a benchmark, in file order. Cached: the files never change in a run."""
  check_benchmark(name)
  path = BENCHMARK_DATA_DIR / DATA_FILES[name]
  parse = _PARSERS[name]
  items = tuple(parse(row, f"{path.name}:{i + 1}") for i, row in enumerate(_read_jsonl(path)))
  ids = [it.id for it in items]
  if len(set(ids)) != len(ids):
    raise DataError(f"{path}: duplicate item ids")
  return items


@functools.lru_cache(maxsize=None)
def items_by_id(name: str) -> dict[str, Item]:
  return {it.id: it for it in load_items(name)}

"""The runner -> report contract: one cell's record, and the one cell key.

`run_table` writes one `CellRecord` per cell into the table record (`record["cells"][key]`, also each
cell's summary.json without its outcomes); the report reads them back with `CellRecord.from_json`.
This module imports nothing of the package, so the report can depend on it without depending on the
runner, and the key format has one home.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Iterable, Mapping

# Keys the report adds to a cell when it derives its statistics (results/table1.json holds them);
# `from_json` accepts and ignores them.
DERIVED_KEYS = ("ci95", "vs_hieramas", "vs_untrained")
# Fields a record may lack (records written before they existed, methods without them).
OPTIONAL_FIELDS = ("untrained",)


def cell_key(label: str, benchmark: str, pool: str, setting: str = "main", seed: int = 0) -> str:
  """`label|benchmark|pool|setting|seed<s>`: a cell's key in a table record (and its W&B run name)."""
  return f"{label}|{benchmark}|{pool}|{setting}|seed{seed}"


def ids_sha256(ids: Iterable[str]) -> str:
  """sha256 of item ids joined by newlines: the one digest of a list of queries (config.json's splits,
  a cell's outcomes, calibration's item sets), so two records of the same queries compare equal."""
  return hashlib.sha256("\n".join(ids).encode()).hexdigest()


class CellRecordError(ValueError):
  """A table record's cell lacks a field the report needs (a record from another version of the runner)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class CellRecord:
  """One finished cell: where it ran, what it scored and cost, and where its run directory is.

  The field order is the JSON's key order: `to_json` writes the same bytes the runner always wrote.

  Attributes:
    method, benchmark, pool, setting, seed, tag: the cell; `label` is `method[-tag]`.
    n, n_correct, accuracy: test queries, correct ones, accuracy in %.
    cost_usd, prompt_tokens, completion_tokens, n_calls, cached_calls, truncated_calls, usage_by_model:
      the test split's inference usage (`evaluate.summarise`).
    mean_cost_usd: cost per test query.
    training: the fit's training usage (None: untrained, or loaded from another cell's fit).
    fit: the fit's summary (None: untrained).
    loaded_from: the run directory whose fit was loaded (None: its own).
    sizes: train / val / test query counts.
    timing: seconds spent fitting or loading and evaluating in this process.
    computed_by: the commits whose code computed the cell.
    run_dir: the cell's run directory, relative to the repository.
    outcomes: per-query outcomes in test order (`ids_sha256`, `correct` as "0"/"1", `cost_usd`).
    untrained: a learned method's untrained check (`runner.run_cell`): the same test queries answered from
      the state its fit starts from, with their usage and outcomes; None (and absent from the JSON) for a
      method without one, or a run that skipped it.
  """

  method: str
  benchmark: str
  pool: str
  setting: str
  seed: int
  tag: str
  label: str
  n: int
  n_correct: int
  accuracy: float
  cost_usd: float
  prompt_tokens: int
  completion_tokens: int
  n_calls: int
  cached_calls: int
  truncated_calls: int
  usage_by_model: Mapping[str, list[int]]
  mean_cost_usd: float
  training: Mapping[str, Any] | None
  fit: Mapping[str, Any] | None
  loaded_from: str | None
  sizes: Mapping[str, int]
  timing: Mapping[str, float]
  computed_by: list[Mapping[str, Any]]
  run_dir: str
  outcomes: Mapping[str, Any]
  untrained: Mapping[str, Any] | None = None

  @property
  def key(self) -> str:
    return cell_key(self.label, self.benchmark, self.pool, self.setting, self.seed)

  def sibling_key(self, label: str) -> str:
    """The key of another row's cell at the same benchmark, pool, setting and seed (paired comparisons)."""
    return cell_key(label, self.benchmark, self.pool, self.setting, self.seed)

  def to_json(self) -> dict[str, Any]:
    """The record as the table record and summary.json hold it (field order = key order; an optional field
    that is None is left out, so a record without it keeps the bytes it always had)."""
    return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
            if not (f.name in OPTIONAL_FIELDS and getattr(self, f.name) is None)}

  @classmethod
  def from_json(cls, data: Mapping[str, Any]) -> "CellRecord":
    """A record read back from a table record; the report's derived keys are ignored.

    Raises:
      CellRecordError: a field is missing or an unknown one is present (one line naming them).
    """
    names = [f.name for f in dataclasses.fields(cls)]
    missing = [n for n in names if n not in data and n not in OPTIONAL_FIELDS]
    unknown = [k for k in data if k not in names and k not in DERIVED_KEYS]
    if missing or unknown:
      where = cell_key(data.get("label", "?"), data.get("benchmark", "?"), data.get("pool", "?"),
                       data.get("setting", "?"), data.get("seed", "?"))
      raise CellRecordError(f"cell {where}: not a runner cell record"
                            + (f"; missing {', '.join(missing)}" if missing else "")
                            + (f"; unknown {', '.join(unknown)}" if unknown else ""))
    return cls(**{n: data[n] for n in names if n in data})

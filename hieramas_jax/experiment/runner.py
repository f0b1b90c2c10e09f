"""The one runner: cells = method x benchmark x pool x setting x seed, all concurrently under one bound.

Every cell, whatever its method, goes through the same steps:

  1. its items: the saved train / val / test splits of its benchmark and setting ("main", or
     "generalization": MMLU-Redux trained on 25 subjects and tested on the 5 held-out ones), cut to
     the run's limits, identical for every method;
  2. its run directory `<run_root>/<endpoint>/<setting>/seed<s>/<pool>/<benchmark>/<method[-tag]>/`,
     whose config.json records the cell, the method's configuration, the split ids and the sha256 of
     the data and split files; a directory that holds anything else is refused (a changed data file
     is named in the error);
  3. fit or load: a trainable method is fitted once (`fit(train, val, ctx)`, its state under `state/`,
     resumable from there) through a client wrapper that totals the training calls; `fit.json` marks a
     finished fit and holds its summary and training cost; later runs load the state instead (only when
     queries are left to solve);
  4. evaluate: every test query solved and graded, each result appended to items.jsonl as it lands
     (`experiment.evaluate`), so a killed run resumes item by item and, with the response cache, never
     pays for a finished call twice;
  5. summary.json: accuracy, inference cost and tokens, training cost, n.

All cells run at once as asyncio tasks; one semaphore bounds the queries in flight across all of them
(training queries included), so a slow cell never stalls the others. Before any cell starts, every
cell's run directory, data hashes and --load_run are checked (`preflight`: one error naming every
conflict, nothing written). Progress: one live display (per cell its stage, counts, rate and ETA; a table
line), a log line per change of a cell's state (with --verbose), and
`<run_root>/<endpoint>/progress.json` with each cell's state.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import difflib
import functools
import hashlib
import json
import logging
import math
import pathlib
import time
from typing import Any, Iterable, Mapping, Sequence

from hieramas_jax.benchmarks import data as data_lib
from hieramas_jax.benchmarks import sandbox as sandbox_lib
from hieramas_jax.benchmarks import splits as splits_lib
from hieramas_jax.benchmarks.data import Item, check_benchmark
from hieramas_jax.experiment.backend import Backend
from hieramas_jax.experiment.console import LiveDisplay
from hieramas_jax.experiment.evaluate import ItemResult, evaluate, load_done, summarise
from hieramas_jax.experiment.provenance import atomic_write_json, process_commit, provenance
from hieramas_jax.experiment.rundir import (RunConfigMismatchError, StateError, from_repo, prepare_run_dir, read_json,
                                            repo_relative, run_dir_conflict, safe_name)
from hieramas_jax.experiment.writers import (ConsoleWriter, JsonlWriter, MultiWriter, NullWriter, StageWandbWriters,
                                             WandbWriter, scalar_leaves, stable_run_id, wandb_group)
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.mas.runtime import RunSettings
from hieramas_jax.methods.api import RunContext
from hieramas_jax.methods.registry import CELL_ARGS, check_method_names, make_method

log = logging.getLogger(__name__)

SETTINGS = ("main", "generalization")
# The generalization setting's test part: the 5 held-out MMLU-Redux subjects (paper Table 3).
TEST_PART = {"main": "test", "generalization": "test_ood"}
# Training queries used by default (all of them elsewhere): MMLU-Redux has 2,349, and the committed
# HieraMAS results train on the first 512; every learned method trains on the same ones.
DEFAULT_TRAIN_LIMIT = {"mmlu_redux": 512}

# `load_from` value meaning: the untagged cell of the same method, run root, setting, seed, pool, benchmark.
SAME_RUN_UNTAGGED = "main"

WORKER_THREADS = 64

FIT_FILE = "fit.json"
STATE_DIR = "state"
TRAINING_COST_FILE = "training_cost.json"
SUMMARY_FILE = "summary.json"
PROGRESS_FILE = "progress.json"
CHOSEN_FILE = "chosen_graphs.json"
# The commits whose code computed a cell's fit or test results (a rerun that only replays adds none).
COMPUTED_FILE = "computed_by.json"
# Trace-summary fields that describe the configuration a method chose for a query (graph, LLMs).
CHOSEN_FIELDS = ("graph_index", "graph_density", "graph_kind", "graph_edges", "graph_score", "choices",
                 "active_roles", "vote_graphs", "edges_per_round", "mean_edge_prob")
PER_QUERY_COLUMNS = ("query_id", "correct", "cost_usd", "chosen_graph", "llms_per_position", "n_calls")


class InvalidRunError(ValueError):
  """Flags that describe no valid run (empty or duplicate lists, unknown setting, bad limits)."""


@dataclasses.dataclass(frozen=True)
class Cell:
  """One cell of a table: a method on a benchmark in a pool setting, split setting and seed.

  Attributes:
    method: registry name.
    benchmark, pool, setting, seed: where.
    tag: a variant name (an ablation); part of the run directory and the cell key.
  """

  method: str
  benchmark: str
  pool: str
  setting: str = "main"
  seed: int = 0
  tag: str = ""

  @property
  def label(self) -> str:
    return self.method + (f"-{self.tag}" if self.tag else "")

  @property
  def key(self) -> str:
    return cell_key(self.label, self.benchmark, self.pool, self.setting, self.seed)


def parse_method_options(values: Iterable[str]) -> dict[str, dict[str, Any]]:
  """["gdesigner.iterations=4", ...] -> {"gdesigner": {"iterations": 4}}."""
  out: dict[str, dict] = {}
  for value in values:
    name, sep, rest = value.partition(".")
    field, eq, raw = rest.partition("=")
    if not (sep and eq and name and field):
      raise InvalidRunError(f"--method_option must look like METHOD.FIELD=VALUE, got {value!r}")
    try:
      parsed = json.loads(raw)
    except json.JSONDecodeError:
      parsed = raw
    out.setdefault(name, {})[field] = parsed
  return out


def cell_key(label: str, benchmark: str, pool: str, setting: str = "main", seed: int = 0) -> str:
  return f"{label}|{benchmark}|{pool}|{setting}|seed{seed}"


@dataclasses.dataclass(frozen=True)
class TableSpec:
  """What to run. Validated on construction, before anything starts.

  Attributes:
    methods, benchmarks, pools: the table's rows and columns.
    setting: "main" or "generalization" (MMLU-Redux only).
    seeds: one run of every cell per seed (the embedded sim's seed too).
    train_limit: per benchmark, the first N training queries (DEFAULT_TRAIN_LIMIT when not given;
      None in the mapping: all).
    val_limit, test_limit: the first N validation / test queries of every benchmark (None: all).
    method_options: per method, keyword options for its factory (budgets, hyperparameters).
    tag: variant name given to every cell (ablations of one method).
    load_from: per method, a finished cell's run directory whose fitted state is loaded instead of fitting
      (inference-only ablations), or SAME_RUN_UNTAGGED for the untagged cell of the same run root, seed,
      pool and benchmark; its training and validation queries must be the same, and the method checks
      that the state fits its configuration.
  """

  methods: tuple[str, ...]
  benchmarks: tuple[str, ...]
  pools: tuple[str, ...]
  setting: str = "main"
  seeds: tuple[int, ...] = (0,)
  train_limit: Mapping[str, int | None] = dataclasses.field(default_factory=dict)
  val_limit: int | None = None
  test_limit: int | None = None
  method_options: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
  tag: str = ""
  load_from: Mapping[str, str] = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    for name, values in (("methods", self.methods), ("benchmarks", self.benchmarks), ("pools", self.pools),
                         ("seeds", self.seeds)):
      if not values:
        raise InvalidRunError(f"--{name} is empty")
      if len(set(values)) != len(values):
        raise InvalidRunError(f"--{name} lists a value twice: {','.join(map(str, values))}")
    check_method_names(self.methods)
    for b in self.benchmarks:
      check_benchmark(b)
    for p in self.pools:
      get_pool(p)
    if self.setting not in SETTINGS:
      raise InvalidRunError(f"unknown setting {self.setting!r}; known: {', '.join(SETTINGS)}")
    if self.setting == "generalization" and set(self.benchmarks) != {"mmlu_redux"}:
      raise InvalidRunError("the generalization setting holds out MMLU-Redux subjects: use --benchmarks=mmlu_redux")
    for name, value in (("val_limit", self.val_limit), ("limit", self.test_limit),
                        *((f"train_limit[{b}]", v) for b, v in self.train_limit.items())):
      if value is not None and value < 1:
        raise InvalidRunError(f"--{name} must be >= 1, got {value}")
    unknown = sorted(set(self.method_options) - set(self.methods)) + sorted(set(self.load_from) - set(self.methods))
    if unknown:
      raise InvalidRunError(f"options or --load_run given for methods not in the run: {', '.join(unknown)}")
    if self.tag and not all(c.isalnum() or c in "-_." for c in self.tag):
      raise InvalidRunError(f"--tag may hold letters, digits, '-', '_' and '.' only; got {self.tag!r}")

  def cells(self) -> list[Cell]:
    return [Cell(m, b, p, self.setting, s, self.tag) for s in self.seeds for p in self.pools
            for b in self.benchmarks for m in self.methods]

  def train_limit_for(self, benchmark: str) -> int | None:
    if benchmark in self.train_limit:
      return self.train_limit[benchmark]
    return DEFAULT_TRAIN_LIMIT.get(benchmark)

  def limits_suffix(self) -> str:
    """"-limit3-train8-val4" for a run cut to those limits, "" for the default splits (names default run roots).

    A training limit equal to the default (MMLU-Redux's 512) names nothing: such a run is the full table's.
    """
    parts = [f"limit{self.test_limit}" if self.test_limit else ""]
    train = sorted({str(v) for b, v in self.train_limit.items() if v and v != DEFAULT_TRAIN_LIMIT.get(b)})
    parts += [f"train{'_'.join(train)}" if train else "", f"val{self.val_limit}" if self.val_limit else ""]
    return "".join(f"-{p}" for p in parts if p)

  def to_json(self) -> dict[str, Any]:
    return {"methods": list(self.methods), "benchmarks": list(self.benchmarks), "pools": list(self.pools),
            "setting": self.setting, "seeds": list(self.seeds),
            "train_limit": {b: self.train_limit_for(b) for b in self.benchmarks},
            "val_limit": self.val_limit, "test_limit": self.test_limit,
            "method_options": {k: dict(v) for k, v in self.method_options.items()}, "tag": self.tag,
            "load_from": {k: v if v == SAME_RUN_UNTAGGED else repo_relative(v) for k, v in self.load_from.items()}}


@dataclasses.dataclass(frozen=True)
class CellItems:
  train: list[Item]
  val: list[Item]
  test: list[Item]


def cell_items(spec: TableSpec, benchmark: str) -> CellItems:
  """The cell's queries: the saved splits of its benchmark and setting, cut to the run's limits."""
  setting = spec.setting

  def part(name: str, limit: int | None) -> list[Item]:
    items = list(splits_lib.load_split(benchmark, name, setting))
    return items[:limit] if limit else items

  return CellItems(part("train", spec.train_limit_for(benchmark)), part("val", spec.val_limit),
                   part(TEST_PART[setting], spec.test_limit))


def ids_sha256(items: Sequence[Item]) -> str:
  return hashlib.sha256("\n".join(it.id for it in items).encode()).hexdigest()


def split_file(benchmark: str, setting: str) -> pathlib.Path:
  """The saved split file of a benchmark and setting (`benchmarks/splits.py` names them this way)."""
  name = benchmark if setting == "main" else f"{benchmark}_{setting}"
  return splits_lib.SPLITS_DIR / f"{name}.json"


def data_record(benchmark: str, setting: str) -> dict[str, str]:
  """sha256 of the data files a cell's results depend on, read now (a changed file refuses to resume)."""
  data_path = data_lib.BENCHMARK_DATA_DIR / data_lib.DATA_FILES[benchmark]
  split_path = split_file(benchmark, setting)
  return {"benchmark": data_lib.data_sha256(benchmark), "benchmark_file": repo_relative(data_path),
          "split": hashlib.sha256(split_path.read_bytes()).hexdigest(), "split_file": repo_relative(split_path)}


@dataclasses.dataclass
class Usage:
  """Calls, tokens and USD of a set of LLM calls (cached replays count at their original cost)."""

  calls: int = 0
  cached_calls: int = 0
  prompt_tokens: int = 0
  completion_tokens: int = 0
  cost_usd: float = 0.0
  wall_s: float = 0.0
  truncated_calls: int = 0
  by_model: dict[str, list[int]] = dataclasses.field(default_factory=dict)  # model -> [calls, prompt, completion]

  def add_call(self, result) -> None:
    self.calls += 1
    self.cached_calls += int(bool(result.cached))
    self.prompt_tokens += int(result.prompt_tokens)
    self.completion_tokens += int(result.completion_tokens)
    self.cost_usd += float(result.cost_usd)
    self.truncated_calls += int(getattr(result, "finish_reason", "") in ("length", "context_overflow"))
    row = self.by_model.setdefault(result.model, [0, 0, 0])
    row[0] += 1
    row[1] += int(result.prompt_tokens)
    row[2] += int(result.completion_tokens)

  def plus(self, other: "Usage") -> "Usage":
    """The sum of two usages (per-model rows added)."""
    by_model = {m: list(r) for m, r in self.by_model.items()}
    for m, r in other.by_model.items():
      by_model[m] = [a + b for a, b in zip(by_model.get(m, [0, 0, 0]), r)]
    return Usage(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in dataclasses.fields(Usage)
                    if f.name != "by_model"}, by_model=dict(sorted(by_model.items())))

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


class TrainingMeter:
  """The client `fit` sees: forwards every call and totals it; `commit()` persists the totals.

  A fit calls `ctx.commit()` right after saving a checkpoint at a quiescent point, and the runner
  once more at the end. A fit killed in between resumes from its last checkpoint and repeats (from
  the response cache) exactly the calls made after it, which were not committed: every training call
  is counted once, across any number of kills.
  """

  def __init__(self, client, path: pathlib.Path):
    self.client, self.path = client, pathlib.Path(path)
    fix = f"delete {self.path.parent} (the cell then refits; cached calls cost nothing)"
    committed = read_json(self.path, fix) if self.path.exists() else {}
    try:
      self.committed = Usage(**_typed_record(committed, self.path, fix))
    except TypeError as e:
      raise StateError(f"{self.path}: not a usage record ({e}); {fix}") from None
    self.pending = Usage()
    self._pending_costs: list[float] = []  # summed with fsum at commit: a total free of arrival order
    self._since = time.monotonic()

  async def chat(self, model, messages, *, temperature, max_tokens, sample_index=0):
    result = await self.client.chat(model, messages, temperature=temperature, max_tokens=max_tokens,
                                    sample_index=sample_index)
    self.pending.add_call(result)
    self._pending_costs.append(float(result.cost_usd))
    return result

  def commit(self) -> None:
    now = time.monotonic()
    total = self.committed.plus(self.pending)
    total.cost_usd = math.fsum([self.committed.cost_usd, *self._pending_costs])
    total.wall_s += now - self._since
    self.committed, self.pending, self._since, self._pending_costs = total, Usage(), now, []
    atomic_write_json(self.path, total.to_json())


class TableProgress:
  """The table's progress: one live display (per cell its stage, counts, rate, ETA; a table line),
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
                          note=f"accuracy {extra['accuracy']:.2f}" if "accuracy" in extra else None)
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


def table_root(run_root: str | pathlib.Path, endpoint_name: str) -> pathlib.Path:
  return pathlib.Path(run_root) / safe_name(endpoint_name)


def cell_dir(root: pathlib.Path, cell: Cell) -> pathlib.Path:
  return root / cell.setting / f"seed{cell.seed}" / cell.pool / cell.benchmark / cell.label


def outcomes(results: Sequence[ItemResult]) -> dict[str, Any]:
  """Per-query outcomes in test-split order, compactly: what the report's statistics need."""
  return {"ids_sha256": hashlib.sha256("\n".join(r.item_id for r in results).encode()).hexdigest(),
          "correct": "".join("1" if r.correct else "0" for r in results),
          "cost_usd": [round(r.cost_usd, 10) for r in results]}


def load_source(cell: Cell, spec: TableSpec, root: pathlib.Path) -> pathlib.Path | None:
  """The run directory whose fit this cell loads (None: it fits its own)."""
  source = spec.load_from.get(cell.method)
  if source is None:
    return None
  if source == SAME_RUN_UNTAGGED:
    if not cell.tag:
      raise InvalidRunError(f"{cell.key}: an untagged cell cannot load the untagged cell (itself)")
    return cell_dir(root, dataclasses.replace(cell, tag=""))
  return from_repo(source)


def load_mismatch(theirs: Mapping[str, Any], mine: Mapping[str, Any], method) -> list[str]:
  """Every difference between a finished fit's config.json and this cell's that changes training.

  Training and validation queries (sizes and ids), the data files, the sampling settings, the endpoint,
  the benchmark, pool and seed, and the method's own training fields (`method.training_fields()`, when it
  has some: inference-time fields such as K may differ). Empty: the fit can be loaded.
  """
  out = []
  for part in ("train", "val"):
    a, b = theirs["splits"][part], mine["splits"][part]
    if a != b:
      out.append(f"{part} queries {a['n']} vs {b['n']}" + (" (other ids)" if a["n"] == b["n"] else ""))
  for key in ("data", "settings", "endpoint"):
    if theirs.get(key) != mine.get(key):
      out.append(f"{key} {json.dumps(theirs.get(key))} vs {json.dumps(mine.get(key))}")
  for key in ("method", "benchmark", "pool", "setting", "seed"):
    if theirs["cell"].get(key) != mine["cell"].get(key):
      out.append(f"{key} {theirs['cell'].get(key)!r} vs {mine['cell'].get(key)!r}")
  fields = getattr(method, "training_fields", None)
  if callable(fields):
    a, b = theirs.get("method_config") or {}, mine.get("method_config") or {}
    out += [f"{f} {a.get(f)!r} vs {b.get(f)!r}" for f in fields() if a.get(f) != b.get(f)]
  return out


async def _fit_or_load(cell: Cell, method, items: CellItems, ctx: RunContext, run_dir: pathlib.Path,
                       source: pathlib.Path | None, *, need_state: bool, writers, progress: TableProgress,
                       show_bars: bool) -> dict[str, Any]:
  """Fits (resuming), or loads a finished fit; returns the fit record (summary, training usage)."""
  fit_path = run_dir / FIT_FILE
  if source is not None:
    source_fit = source / FIT_FILE
    if not source_fit.exists():
      raise InvalidRunError(f"--load_run {repo_relative(source)} holds no finished fit ({FIT_FILE} missing)")
    theirs = read_json(source / "config.json", f"--load_run {repo_relative(source)} is damaged: retrain it")
    mine = read_json(run_dir / "config.json", f"delete {repo_relative(run_dir)} and rerun")
    differences = load_mismatch(theirs, mine, method)
    if differences:
      raise RunConfigMismatchError(f"--load_run {repo_relative(source)} was trained differently: "
                                   f"{'; '.join(differences)}; cannot load it (run it with the same training "
                                   "flags and data sizes, or train this cell itself)")
    if need_state:
      method.load(source / STATE_DIR)
    record = _fit_record(source_fit, f"--load_run {repo_relative(source)} is damaged: retrain it")
    return {**record, "loaded_from": repo_relative(source)}
  if fit_path.exists():
    record = _fit_record(fit_path, f"delete {repo_relative(run_dir)} (the cell then refits)")
    if need_state:
      method.load(run_dir / STATE_DIR)
    return record
  progress.status(cell.key, "fitting", train=len(items.train), val=len(items.val))
  meter = TrainingMeter(ctx.client, run_dir / TRAINING_COST_FILE)
  fit_ctx = dataclasses.replace(ctx, client=meter, state_dir=run_dir / STATE_DIR, writer=writers,
                                progress=show_bars, checkpoint=meter.commit, report=progress.reporter(cell.key))
  summary = dict(await method.fit(items.train, items.val, fit_ctx))
  meter.commit()
  # A method whose own durable records know its training cost exactly (a per-query search store)
  # reports it; otherwise the meter's committed total is it.
  training = summary.pop("training_usage", None) or meter.committed.to_json()
  record = {"summary": summary, "training": training}
  atomic_write_json(fit_path, record)
  progress.status(cell.key, "fitted", training_cost_usd=round(float(training["cost_usd"]), 6))
  return record


def _computed_by(run_dir: pathlib.Path, *, computed_now: bool) -> list[dict[str, Any]]:
  """The commits that computed this cell (COMPUTED_FILE), this one added when it computed anything.

  Why: a table rebuilt or resumed at a later commit (a rewrite of the report, say) must still name
  the code that produced each number, not the code that last wrote the file.
  """
  path = run_dir / COMPUTED_FILE
  fix = f"delete {path} (the commits that computed the cell are then unknown) or the run directory"
  entries = read_json(path, fix) if path.exists() else []
  if not isinstance(entries, list) or not all(isinstance(e, dict) and "commit" in e for e in entries):
    raise StateError(f"{path}: expected a list of {{commit, dirty}} records; {fix}")
  here = process_commit()
  if computed_now and here not in entries:
    entries.append(here)
    atomic_write_json(path, entries)
  return entries


def _typed_record(record: Any, path: pathlib.Path, fix: str) -> dict[str, Any]:
  """`record` if it is a usage total (numbers, and `by_model`: model -> [calls, prompt, completion]
  integers), else a StateError naming `path`."""
  def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)
  by_model = record.get("by_model", {}) if isinstance(record, dict) else None
  if not isinstance(record, dict) or not all(number(v) for k, v in record.items() if k != "by_model") or not (
      isinstance(by_model, dict) and all(isinstance(row, list) and len(row) == 3 and all(
          isinstance(x, int) and not isinstance(x, bool) for x in row) for row in by_model.values())):
    raise StateError(f"{path}: expected an object of numbers; {fix}")
  return record


def _fit_record(path: pathlib.Path, fix: str) -> dict[str, Any]:
  """A finished fit's record (fit.json), checked: an object with a summary and a usage total."""
  record = read_json(path, fix)
  if not isinstance(record, dict) or not isinstance(record.get("summary"), dict):
    raise StateError(f"{path}: not a fit record (no summary object); {fix}")
  _typed_record(record.get("training"), path, fix)
  return record


def build_method(cell: Cell, spec: TableSpec):
  """The cell's method instance; a bad option is one clear error (before any cell starts)."""
  options = dict(spec.method_options.get(cell.method, {}))
  try:
    return make_method(cell.method, benchmark=cell.benchmark, pool=cell.pool, seed=cell.seed, **options)
  except TypeError as e:
    raise InvalidRunError(f"{cell.method} on {cell.benchmark}/{cell.pool}: {_option_error(cell, options, e)}") from e
  except ValueError as e:
    raise InvalidRunError(f"{cell.method} on {cell.benchmark}/{cell.pool}: {e}") from e


def _option_error(cell: Cell, options: Mapping[str, Any], error: TypeError) -> str:
  """"--method_option gdesigner.iteratons: no such field (did you mean iterations?); fields: ..." instead of
  the constructor's TypeError: the fields are those the method describes itself with."""
  try:
    fields = sorted(set(make_method(cell.method, benchmark=cell.benchmark, pool=cell.pool, seed=cell.seed).describe())
                    - set(CELL_ARGS))
  except (TypeError, ValueError):
    return str(error)
  unknown = [k for k in options if k not in fields]
  if not unknown:
    return str(error)
  parts = []
  for k in unknown:
    close = difflib.get_close_matches(k, fields, n=1)
    parts.append(f"--method_option {cell.method}.{k}: no such field" + (f" (did you mean {close[0]}?)" if close else ""))
  return "; ".join(parts) + f"; {cell.method}'s fields: {', '.join(fields)}"


def wandb_group_of(root: pathlib.Path) -> str:
  """The reproduction a cell belongs to: its run root's name and endpoint ("table1/sim-seed0-8de37b2e697a")."""
  return wandb_group(f"{root.parent.name}/{root.name}")


def chosen_record(result: ItemResult) -> dict[str, Any]:
  """What the method chose for one query (graph, LLMs per position), from its trace summary."""
  return {"item_id": result.item_id, "correct": result.correct,
          **{k: result.trace[k] for k in CHOSEN_FIELDS if k in result.trace}}


def per_query_rows(results: Sequence[ItemResult]) -> list[list[Any]]:
  """Rows of the per-query W&B table (PER_QUERY_COLUMNS): the chosen graph and LLMs as compact JSON."""
  rows = []
  for r in results:
    t = r.trace
    graph = {k: t[k] for k in ("graph_index", "graph_kind", "graph_density", "graph_edges", "edges_per_round")
             if k in t}
    llms = t.get("choices", t.get("models"))
    rows.append([r.item_id, bool(r.correct), float(r.cost_usd), json.dumps(graph) if graph else "",
                 json.dumps(llms) if llms is not None else "", int(r.n_calls)])
  return rows


def wandb_config(cell: Cell, method_config: Mapping[str, Any], plan_config: Mapping[str, Any],
                 run_dir: pathlib.Path) -> dict[str, Any]:
  """A cell's W&B config: its own values at the top level (method, benchmark, pool, seed, the method's
  fields, the sampling settings, split sizes, endpoint), not the whole command's lists of methods and
  benchmarks."""
  splits = plan_config.get("splits") or {}
  return {**dict(plan_config.get("settings") or {}), **json.loads(json.dumps(dict(method_config), default=str)),
          **dataclasses.asdict(cell),
          "label": cell.label, "row": row_label(cell), "endpoint": plan_config.get("endpoint"),
          **{f"n_{part}": v.get("n") for part, v in splits.items()}, "run_dir": repo_relative(run_dir)}


def row_label(cell: Cell) -> str:
  """The cell's Table 1 row label ("HieraMAS", "GDesigner"; a tagged variant adds its tag): its W&B job_type."""
  from hieramas_jax.report.paper import METHOD_TITLES  # pylint: disable=import-outside-toplevel
  title = METHOD_TITLES.get(cell.method, cell.method)
  return (f"{title} [{cell.tag}]" if cell.tag else title)[:64]


@dataclasses.dataclass
class CellWriters:
  """A cell's writers: `fit` (training curves: console, metrics.jsonl, one W&B run per stage, opened on
  its first step) and the cell's own W&B run, opened when its evaluation starts (from a worker thread:
  `wandb.init` blocks for about a second) and fed each query's result as it lands (`EvalStream`).

  Every W&B run has a stable id (`stable_run_id` of the run directory and the stage): a killed and
  resumed cell resumes its runs, and a rerun that computes nothing opens none."""

  fit: MultiWriter
  stages: NullWriter
  open_eval: Any  # () -> a writer

  @classmethod
  def make(cls, run_dir: pathlib.Path, cell: Cell, config: Mapping[str, Any], *, group: str,
           use_wandb: bool) -> "CellWriters":
    tags = (cell.setting, f"seed{cell.seed}", cell.pool, cell.benchmark, cell.tag)
    stages: NullWriter = NullWriter()
    open_eval: Any = NullWriter
    if use_wandb:
      run_id = stable_run_id(repo_relative(run_dir))
      stages = StageWandbWriters(run_dir, config, method=cell.method, name=cell.key, group=group, tags=tags,
                                 job_type=row_label(cell), run_id=run_id)
      open_eval = functools.partial(WandbWriter, run_dir, config, name=cell.key, group=group,
                                    job_type=row_label(cell), tags=tags, run_id=run_id)
    return cls(MultiWriter([ConsoleWriter(cell.key), JsonlWriter(run_dir), stages]), stages, open_eval)

  def log_fit(self, cell: Cell, run_dir: pathlib.Path, fit: Mapping[str, Any]) -> None:
    """A fit that ran in this process: its summary and checkpoints go to its stage run(s)."""
    if isinstance(self.stages, StageWandbWriters) and not self.stages.runs:
      self.stages.write_scalars(0, {f"{cell.method}/fitted": 1.0})  # a fit that logs no curve still gets a run
    self.stages.write_summary(scalar_leaves({"fit": fit.get("summary") or {}, "training": fit.get("training") or {}}))
    self.stages.write_artifact(f"checkpoints-{cell.key}", "model", [run_dir / STATE_DIR, run_dir / FIT_FILE])

  def finish_eval(self, writer, cell: Cell, run_dir: pathlib.Path, record: Mapping[str, Any]) -> None:
    """The summary and the results files, then the cell's run is closed."""
    try:
      writer.write_summary(scalar_leaves({k: v for k, v in record.items() if k not in ("outcomes", "seed")}))
      writer.write_artifact(f"results-{cell.key}", "results",
                            [run_dir / SUMMARY_FILE, run_dir / "items.jsonl", run_dir / CHOSEN_FILE])
    finally:
      writer.close()

  def close(self) -> None:
    self.fit.close()


class EvalStream:
  """Feeds a cell's W&B run as results land: running accuracy and cost (in completion order, counting the
  queries a resumed run had already done) and the query's row of the incremental `per_query` table."""

  def __init__(self, writer, done: Sequence[ItemResult]):
    self.writer = writer
    self.correct = float(sum(r.correct for r in done))
    self.costs = [r.cost_usd for r in done]

  def add(self, n_done: int, result: ItemResult) -> None:
    self.correct += result.correct
    self.costs.append(result.cost_usd)
    self.writer.write_scalars(n_done, {"eval/running_accuracy": 100.0 * self.correct / n_done,
                                       "eval/running_cost_usd": math.fsum(self.costs),
                                       "eval/correct": float(result.correct), "eval/cost_usd": result.cost_usd})
    log_rows = getattr(self.writer, "log_rows", None)
    if log_rows is not None:
      log_rows("per_query", PER_QUERY_COLUMNS, per_query_rows([result]))


@dataclasses.dataclass(frozen=True)
class CellPlan:
  """A cell before it starts: its queries, the fit it loads, its run directory and config.json's content."""

  cell: Cell
  method: Any
  items: CellItems
  source: pathlib.Path | None
  run_dir: pathlib.Path
  config: Mapping[str, Any]

  @property
  def sizes(self) -> dict[str, int]:
    return {"train": len(self.items.train), "val": len(self.items.val), "test": len(self.items.test)}


class PreflightError(InvalidRunError, RunConfigMismatchError):
  """Every conflict found before a table starts (run directories, --load_run, data hashes): one line each."""

  def __init__(self, problems: Sequence[str]):
    super().__init__("\n".join(problems))
    self.problems = list(problems)


def plan_cell(cell: Cell, spec: TableSpec, backend: Backend, *, root: pathlib.Path, settings: RunSettings,
              method) -> CellPlan:
  """What the cell will run and where, computed without writing anything."""
  items = cell_items(spec, cell.benchmark)
  if not items.test:
    raise InvalidRunError(f"{cell.key}: no test queries")
  source = load_source(cell, spec, root)
  config = {
      "cell": dataclasses.asdict(cell), "endpoint": backend.endpoint.name, "settings": dataclasses.asdict(settings),
      "method_config": json.loads(json.dumps(method.describe(), default=str)),
      "load_from": repo_relative(source) if source is not None else None,
      "splits": {name: {"n": len(part), "ids_sha256": ids_sha256(part)}
                 for name, part in (("train", items.train), ("val", items.val), ("test", items.test))},
      "data": data_record(cell.benchmark, cell.setting),
      # Grades depend on the isolation: a run graded in the fallback never resumes under bubblewrap.
      **({"sandbox": sandbox_lib.isolation().mode} if cell.benchmark == "humaneval_plus" else {})}
  return CellPlan(cell, method, items, source, cell_dir(root, cell), json.loads(json.dumps(config)))


def load_problems(plan: CellPlan) -> list[str]:
  """Why the cell cannot load its --load_run (empty: it can, or it loads nothing)."""
  source = plan.source
  if source is None:
    return []
  if not (source / FIT_FILE).exists():
    return [f"--load_run {repo_relative(source)} holds no finished fit ({FIT_FILE} missing)"]
  try:
    theirs = read_json(source / "config.json", f"--load_run {repo_relative(source)} is damaged: retrain it")
  except StateError as e:
    return [str(e)]
  differences = load_mismatch(theirs, plan.config, plan.method)
  if differences:
    return [f"--load_run {repo_relative(source)} was trained differently: {'; '.join(differences)}; cannot load it "
            "(run it with the same training flags and data sizes, or train this cell itself)"]
  return []


def preflight(plans: Sequence[CellPlan]) -> None:
  """Checks every cell's run directory, data hashes and --load_run before any cell starts; writes nothing.

  Raises:
    PreflightError: naming every conflict, one line each.
  """
  problems: list[str] = []
  for plan in plans:
    conflict = run_dir_conflict(plan.run_dir, plan.config)
    if conflict is not None:
      problems.append(str(conflict))
    problems += load_problems(plan)
  if problems:
    raise PreflightError(problems)


async def run_cell(plan: CellPlan, backend: Backend, *, root: pathlib.Path, bound: asyncio.Semaphore,
                   progress: TableProgress, settings: RunSettings = RunSettings(), show_bars: bool = False,
                   use_wandb: bool = False, flags: Mapping[str, Any] | None = None) -> dict[str, Any]:
  """Fit-or-load, evaluate and summarise one cell (checked by `preflight`); returns its record for the table."""
  cell, method, items, source, sizes = plan.cell, plan.method, plan.items, plan.source, plan.sizes
  run_dir = prepare_run_dir(plan.run_dir, plan.config)
  writers = CellWriters.make(run_dir, cell, wandb_config(cell, method.describe(), plan.config, run_dir),
                             group=wandb_group_of(root), use_wandb=use_wandb)
  try:
    ctx = RunContext(backend.client, get_pool(cell.pool), cell.seed, settings, bound=bound)
    wanted = {it.id for it in items.test}
    done = {k for k in load_done(run_dir) if k in wanted}
    need_state = len(done) < len(wanted)
    fit = None
    eval_writer = None
    started = time.monotonic()
    fits_now = method.trainable and source is None and not (run_dir / FIT_FILE).exists()
    if method.trainable:
      fit = await _fit_or_load(cell, method, items, ctx, run_dir, source, need_state=need_state,
                               writers=writers.fit, progress=progress, show_bars=show_bars)
      if fits_now:
        writers.log_fit(cell, run_dir, fit)
    fitted = time.monotonic()
    if need_state:
      await method.prepare([it for it in items.test if it.id not in done], ctx)
    progress.status(cell.key, "evaluating", done=len(done))
    # The cell's W&B run opens when its queries start (a rerun that computes nothing opens none).
    eval_writer = await asyncio.to_thread(writers.open_eval) if need_state else None
    stream = EvalStream(eval_writer, [r for k, r in load_done(run_dir).items() if k in wanted]) \
        if eval_writer is not None else None

    def on_item(n_done: int, result: ItemResult) -> None:
      progress.item(cell.key, n_done)
      if stream is not None:
        stream.add(n_done, result)

    results = await evaluate(method, items.test, ctx, run_dir=run_dir, bound=bound, progress=False, desc=cell.key,
                             report=on_item)
    summary = summarise(results)
    timing = {"fit_or_load_s": round(fitted - started, 3), "evaluate_s": round(time.monotonic() - fitted, 3)}
    # A variant that loads another cell's fit spent nothing on training itself.
    training = fit["training"] if fit and not fit.get("loaded_from") else None
    record = {**dataclasses.asdict(cell), "label": cell.label, **summary,
              "mean_cost_usd": summary["cost_usd"] / max(summary["n"], 1),
              "training": training, "fit": (fit or {}).get("summary"),
              "loaded_from": (fit or {}).get("loaded_from"),
              "sizes": sizes,
              "timing": timing,
              "computed_by": _computed_by(run_dir, computed_now=fits_now or need_state),
              "run_dir": repo_relative(run_dir), "outcomes": outcomes(results)}
    atomic_write_json(run_dir / SUMMARY_FILE, {k: v for k, v in record.items() if k != "outcomes"})
    chosen = [chosen_record(r) for r in results]
    if any(len(c) > 2 for c in chosen):
      atomic_write_json(run_dir / CHOSEN_FILE, chosen)
    if eval_writer is not None:
      await asyncio.to_thread(writers.finish_eval, eval_writer, cell, run_dir, record)
      eval_writer = None
    progress.status(cell.key, "done", accuracy=round(summary["accuracy"], 2))
    return record
  except BaseException:
    progress.status(cell.key, "failed")
    raise
  finally:
    if eval_writer is not None:
      eval_writer.close()
    writers.close()


def plan_table(spec: TableSpec, backends: Mapping[int, Backend], root: pathlib.Path,
               settings: RunSettings = RunSettings()) -> list[CellPlan]:
  """Every cell's plan, checked by `preflight` (PreflightError naming every conflict); writes nothing."""
  plans, problems = [], []
  for c in spec.cells():
    try:
      plans.append(plan_cell(c, spec, backends[c.seed], root=root, settings=settings, method=build_method(c, spec)))
    except InvalidRunError as e:
      problems.append(str(e))
  if problems:
    raise PreflightError(problems)
  preflight(plans)
  return plans


async def run_table(spec: TableSpec, backends: Mapping[int, Backend], *, run_root: str | pathlib.Path,
                    flags: Mapping[str, Any], command: str | None = None, max_queries: int = 32,
                    progress: bool = True, settings: RunSettings = RunSettings(),
                    use_wandb: bool = False) -> dict[str, Any]:
  """Runs every cell of `spec` concurrently; returns the table record (cells + provenance).

  Args:
    spec: what to run.
    backends: one open backend per seed of the spec (each seed is its own simulated world on the sim).
    run_root: parent of the run directories.
    flags: the run's flags, for provenance (secrets redacted there).
    command: the exact command (default: this process's argv).
    max_queries: the one global bound on queries in flight, shared by every cell.
    progress: show the table's progress bar.
    settings: sampling settings of every MAS call.
    use_wandb: mirror each cell's metrics to its own W&B run (mode from WANDB_MODE, default offline).

  Raises:
    The first cell error, after every other cell has finished or failed (their work is on disk, and a
    rerun resumes it); nothing is returned then, so no table is written from a partial run.
  """
  missing = sorted(set(spec.seeds) - set(backends))
  if missing:
    raise InvalidRunError(f"no backend for seeds {missing}")
  labels = {backends[s].label for s in spec.seeds}
  endpoint = backends[spec.seeds[0]].endpoint.name
  root = table_root(run_root, endpoint)
  plans = plan_table(spec, backends, root, settings)
  cells = [p.cell for p in plans]
  totals = {p.cell.key: len(p.items.test) for p in plans}
  bound = asyncio.Semaphore(max_queries)
  # Cells push compiles, embeddings and jitted steps to worker threads; the default pool (cores + 4)
  # would let a few long compiles hold every worker while other cells' millisecond steps queue.
  loop = asyncio.get_running_loop()
  loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=WORKER_THREADS,
                                                                  thread_name_prefix="cells"))
  table_progress = TableProgress(totals, root / spec.setting / PROGRESS_FILE, enabled=progress)
  started = time.monotonic()
  try:
    outcomes_ = await asyncio.gather(*(run_cell(p, backends[p.cell.seed], root=root, bound=bound,
                                                progress=table_progress, settings=settings, use_wandb=use_wandb,
                                                flags=flags)
                                       for p in plans), return_exceptions=True)
  finally:
    table_progress.close()
  errors = [(c, e) for c, e in zip(cells, outcomes_) if isinstance(e, BaseException)]
  for c, e in errors:
    log.error("%s failed: %s: %s", c.key, type(e).__name__, e)
  if errors:
    raise errors[0][1]
  seeds = list(spec.seeds)
  return {"spec": spec.to_json(), "endpoint": endpoint,
          "endpoints": {str(s): backends[s].endpoint.name for s in spec.seeds},
          # Where the calls went: URLs, model ids, a pool file's dated prices, the spend cap and what was spent.
          "backends": {str(s): backends[s].describe() for s in spec.seeds},
          "run_root": repo_relative(root), "wall_s": round(time.monotonic() - started, 3),
          "cells": {c.key: r for c, r in zip(cells, outcomes_)},
          "provenance": provenance(seed=seeds[0] if len(seeds) == 1 else seeds, benchmarks=spec.benchmarks,
                                   flags=flags, backend="sim" if labels == {"sim"} else ",".join(sorted(labels)),
                                   command=command)}

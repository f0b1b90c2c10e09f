"""What a table runs: its cells, its spec (validated before anything starts) and each cell's queries.

The spec is data: entry points build it from flags, `runner.run_table` runs it, and its `to_json` is
the table record's `spec`. A cell's queries and data fingerprint are computed here too, because they
are a function of the spec alone (the same for every method).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
from typing import Any, Iterable, Mapping

from hieramas_jax.benchmarks import data as data_lib
from hieramas_jax.benchmarks import splits as splits_lib
from hieramas_jax.benchmarks.data import Item, check_benchmark
from hieramas_jax.errors import UserError
from hieramas_jax.experiment.record import cell_key
from hieramas_jax.experiment.rundir import repo_relative
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.methods.registry import check_method_names

# The generalization setting's test part: the 5 held-out MMLU-Redux subjects (paper Table 3).
TEST_PART = {"main": "test", "generalization": "test_ood"}
# Training queries used by default (all of them elsewhere): MMLU-Redux has 2,349, and the committed
# HieraMAS results train on the first 512; every learned method trains on the same ones.
DEFAULT_TRAIN_LIMIT = {"mmlu_redux": 512}

# `load_from` value meaning: the untagged cell of the same method, run root, setting, seed, pool, benchmark.
SAME_RUN_UNTAGGED = "main"


class InvalidRunError(UserError, ValueError):
  """Flags that describe no valid run (empty or duplicate lists, unknown setting, bad limits)."""


@dataclasses.dataclass(frozen=True)
class Cell:
  """One cell of a table: a method on a benchmark in a pool setting, split setting and seed.

  Attributes:
    method: registry name (a calibration cell: its configuration's name, the method built on the fly;
      `calibration.Measurer`).
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



@dataclasses.dataclass(frozen=True, kw_only=True)
class TableSpec:
  """What to run. Validated on construction, before anything starts.

  Keyword-only: a spec names every value it sets, so a reader never counts positions.

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
    untrained_check: also answer each learned cell's test queries from the state its fit starts from (methods
      with `load_untrained`), so the report can say whether training beat the untrained method, paired on the
      same queries. Its calls are counted apart (neither inference nor training cost).
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
  untrained_check: bool = False

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
    if self.setting not in splits_lib.SETTINGS:
      raise InvalidRunError(f"unknown setting {self.setting!r}; known: {', '.join(splits_lib.SETTINGS)}")
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

  def results_suffix(self) -> str:
    """"_limit3_train8_val4" for a run cut to those limits, "" otherwise: the suffix of the results files a
    limited run writes (every program writing under results/ uses it), so a quick look never overwrites
    a committed full-size result."""
    return self.limits_suffix().replace("-", "_")

  def to_json(self) -> dict[str, Any]:
    return {"methods": list(self.methods), "benchmarks": list(self.benchmarks), "pools": list(self.pools),
            "setting": self.setting, "seeds": list(self.seeds),
            "train_limit": {b: self.train_limit_for(b) for b in self.benchmarks},
            "val_limit": self.val_limit, "test_limit": self.test_limit,
            "method_options": {k: dict(v) for k, v in self.method_options.items()}, "tag": self.tag,
            "load_from": {k: v if v == SAME_RUN_UNTAGGED else repo_relative(v) for k, v in self.load_from.items()},
            **({"untrained_check": True} if self.untrained_check else {})}


@dataclasses.dataclass(frozen=True)
class CellItems:
  train: list[Item]
  val: list[Item]
  test: list[Item]


def cell_items(spec: TableSpec, benchmark: str) -> CellItems:
  """The cell's queries: the saved splits of its benchmark and setting, cut to the run's limits.

  A limit larger than its split is refused rather than clamped: the run would be the whole split under
  a `_limit5000` name and run root, a copy of the full run that nothing would ever find as one.

  Raises:
    InvalidRunError: a limit above its split's size (naming the flag, the split and its size).
  """
  setting = spec.setting

  def part(name: str, limit: int | None, flag: str) -> list[Item]:
    items = list(splits_lib.load_split(benchmark, name, setting))
    default = flag == "train_limit" and limit == DEFAULT_TRAIN_LIMIT.get(benchmark)  # not the user's choice
    if limit and limit > len(items) and not default:
      raise InvalidRunError(f"--{flag}={limit} is more than the {len(items)} queries of {benchmark}'s {name} split "
                            f"({setting} setting): give at most {len(items)}, or leave it out for the whole split")
    return items[:limit] if limit else items

  return CellItems(part("train", spec.train_limit_for(benchmark), "train_limit"),
                   part("val", spec.val_limit, "val_limit"), part(TEST_PART[setting], spec.test_limit, "limit"))


def train_command(cell: Cell, *, run_root: str | None = None, train_limit: int | None = None,
                  val_limit: int | None = None, test_limit: int | None = None) -> str:
  """The command that trains the untagged `cell` a --load_run names, for the message that refuses it.

  HieraMAS cells come from `train_hieramas.py` (every HieraMASConfig field a flag), every other method's
  from `reproduce_table1.py`; the limits and run root are the loading run's, so the trained cell lands
  where the load looks for it.
  """
  if cell.method == "hieramas":
    args = ["experiments/train_hieramas.py", f"--benchmark={cell.benchmark}", f"--pool={cell.pool}",
            f"--seed={cell.seed}"]
  else:
    args = ["experiments/reproduce_table1.py", f"--methods={cell.method}", f"--benchmarks={cell.benchmark}",
            f"--pools={cell.pool}", f"--seeds={cell.seed}"]
    if cell.setting != "main":
      args.append(f"--setting={cell.setting}")
  args += [f"--{name}={value}" for name, value in (("train_limit", train_limit), ("val_limit", val_limit),
                                                   ("limit", test_limit), ("run_root", run_root)) if value]
  return "python " + " ".join(args)


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

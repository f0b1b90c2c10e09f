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
cell's run directory, data hashes and --load_run are checked (`check_plans`: one error naming every
conflict, nothing written). Progress: one live display (per cell its stage, counts, rate and ETA; a table
line), a log line per change of a cell's state (with --verbose), and
`<run_root>/<endpoint>/progress.json` with each cell's state.

Beside it: `spec` (what a table runs), `record` (a finished cell's record, the report's input), `usage`
(training cost), `progress` (the live display) and `cell_writers` (metrics and W&B).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import difflib
import json
import logging
import pathlib
import time
from typing import Any, Mapping, Sequence

from hieramas_jax.benchmarks import sandbox as sandbox_lib
from hieramas_jax.experiment import writers as writers_lib
from hieramas_jax.experiment.backend import Backend
from hieramas_jax.experiment.cell_writers import CellWriters, EvalStream, wandb_config, wandb_group_of
from hieramas_jax.experiment.evaluate import ItemResult, evaluate, load_done, summarise
from hieramas_jax.experiment.progress import TableProgress
from hieramas_jax.experiment.provenance import process_commit, provenance
from hieramas_jax.experiment.record import CellRecord, ids_sha256
from hieramas_jax.experiment.rundir import (CHOSEN_FILE, COMPUTED_FILE, FIT_FILE, PROGRESS_FILE, STATE_DIR,
                                            SUMMARY_FILE, TRAINING_COST_FILE, UNTRAINED_DIR, RunConfigMismatchError,
                                            RunDirLockedError, StateError, from_repo, prepare_run_dir, read_json,
                                            repo_relative, run_dir_conflict, run_dir_lock, safe_name)
from hieramas_jax.experiment.spec import (SAME_RUN_UNTAGGED, Cell, CellItems, InvalidRunError, TableSpec,
                                          cell_items, data_record, train_command)
from hieramas_jax.experiment.usage import TrainingMeter, check_usage_record
from hieramas_jax.fileio import atomic_write_json
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.mas.runtime import RunSettings
from hieramas_jax.methods.api import RunContext
from hieramas_jax.methods.registry import CELL_ARGS, make_method

log = logging.getLogger(__name__)

WORKER_THREADS = 64

# Trace-summary fields that describe the configuration a method chose for a query (graph, LLMs).
CHOSEN_FIELDS = ("graph_index", "graph_density", "graph_kind", "graph_edges", "graph_score", "choices",
                 "active_roles", "vote_graphs", "edges_per_round", "mean_edge_prob")


def table_root(run_root: str | pathlib.Path, endpoint_name: str) -> pathlib.Path:
  return pathlib.Path(run_root) / safe_name(endpoint_name)


def cell_dir(root: pathlib.Path, cell: Cell) -> pathlib.Path:
  return root / cell.setting / f"seed{cell.seed}" / cell.pool / cell.benchmark / cell.label


def outcomes(results: Sequence[ItemResult]) -> dict[str, Any]:
  """Per-query outcomes in test-split order, compactly: what the report's statistics need."""
  return {"ids_sha256": ids_sha256(r.item_id for r in results),
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



def _fit_record(path: pathlib.Path, fix: str) -> dict[str, Any]:
  """A finished fit's record (fit.json), checked: an object with a summary and a usage total."""
  record = read_json(path, fix)
  if not isinstance(record, dict) or not isinstance(record.get("summary"), dict):
    raise StateError(f"{path}: not a fit record (no summary object); {fix}")
  check_usage_record(record.get("training"), path, fix)
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



def chosen_record(result: ItemResult) -> dict[str, Any]:
  """What the method chose for one query (graph, LLMs per position), from its trace summary."""
  return {"item_id": result.item_id, "correct": result.correct,
          **{k: result.trace[k] for k in CHOSEN_FIELDS if k in result.trace}}



@dataclasses.dataclass(frozen=True)
class CellPlan:
  """A cell before it starts: its queries, the fit it loads, its run directory and config.json's content."""

  cell: Cell
  method: Any
  items: CellItems
  source: pathlib.Path | None
  run_dir: pathlib.Path
  config: Mapping[str, Any]
  untrained: Any = None  # a second instance of the method for the untrained check (`untrained_method`)

  @property
  def sizes(self) -> dict[str, int]:
    return {"train": len(self.items.train), "val": len(self.items.val), "test": len(self.items.test)}


class TablePlanError(InvalidRunError, RunConfigMismatchError):
  """Every conflict found in a table's plans before it starts (run directories, --load_run, data hashes):
  one line each.

  Not `llm.preflight.PreflightError`, which says the endpoints cannot serve the models; this one says the
  run directories and fits cannot hold the table. Both come before anything is written or paid.
  """

  def __init__(self, problems: Sequence[str]):
    problems = list(dict.fromkeys(problems))  # a problem of the spec (a --limit) is every cell's: said once
    super().__init__("\n".join(problems))
    self.problems = problems


def plan_cell(cell: Cell, method, items: CellItems, backend: Backend, *, root: pathlib.Path,
              settings: RunSettings, source: pathlib.Path | None = None) -> CellPlan:
  """What the cell will run and where (its queries given), computed without writing anything.

  The one way a cell is planned: a table's cells (`plan_spec_cell`: the spec's splits and registry
  method) and calibration's (a fixed item sample, a method built on the fly) get the same run
  directory layout and config.json, hence the same resume and refusal rules.
  """
  if not items.test:
    raise InvalidRunError(f"{cell.key}: no test queries")
  config = {
      "cell": dataclasses.asdict(cell), "endpoint": backend.endpoint.name, "settings": dataclasses.asdict(settings),
      "method_config": json.loads(json.dumps(method.describe(), default=str)),
      "load_from": repo_relative(source) if source is not None else None,
      "splits": {name: {"n": len(part), "ids_sha256": ids_sha256(it.id for it in part)}
                 for name, part in (("train", items.train), ("val", items.val), ("test", items.test))},
      "data": data_record(cell.benchmark, cell.setting),
      # Grades depend on the isolation: a run graded in the fallback never resumes under bubblewrap.
      **({"sandbox": sandbox_lib.isolation().mode} if cell.benchmark == "humaneval_plus" else {})}
  return CellPlan(cell, method, items, source, cell_dir(root, cell), json.loads(json.dumps(config)))


def plan_spec_cell(cell: Cell, spec: TableSpec, backend: Backend, *, root: pathlib.Path, settings: RunSettings,
                   method) -> CellPlan:
  """A table cell's plan: its queries are the spec's splits, its fit may be loaded (--load_run)."""
  plan = plan_cell(cell, method, cell_items(spec, cell.benchmark), backend, root=root, settings=settings,
                   source=load_source(cell, spec, root))
  return dataclasses.replace(plan, untrained=untrained_method(cell, spec, method))


def untrained_method(cell: Cell, spec: TableSpec, method) -> Any:
  """A second instance of the cell's method for its untrained check (`spec.untrained_check`, a learned method
  with `load_untrained`), else None. Its state is taken only when the check runs (`_untrained_check`)."""
  if not (spec.untrained_check and method.trainable and callable(getattr(method, "load_untrained", None))):
    return None
  return build_method(cell, spec)


async def _untrained_check(plan: CellPlan, ctx: RunContext, run_dir: pathlib.Path, *, bound: asyncio.Semaphore,
                           progress: TableProgress, save_traces: bool) -> tuple[dict[str, Any], bool]:
  """The cell's test queries answered by its method in the state its fit starts from; returns the record's
  `untrained` entry and whether anything was computed now.

  Why: a learned row's accuracy says nothing of its learning (issue 27: HieraMAS's policy stayed uniform while its
  row looked fine). The same queries, paired, from the untrained state say whether training beat the method's own
  starting point (the report's verdict, `report/table1.py`). Its own folder (`untrained/`), so it resumes
  like the test split and never mixes with the cell's results; its calls are counted there, not in the cell's
  inference or training cost.
  """
  where = run_dir / UNTRAINED_DIR
  tests = plan.items.test
  wanted = {it.id for it in tests}
  done = {k for k in load_done(where) if k in wanted}
  method = plan.untrained
  computing = len(done) < len(wanted)
  if computing:
    progress.status(plan.cell.key, "untrained check", done=len(done))
    await asyncio.to_thread(method.load_untrained)
    await method.prepare([it for it in tests if it.id not in done], ctx)
  results = await evaluate(method, tests, ctx, run_dir=where, bound=bound, progress=False,
                           desc=f"{plan.cell.key} untrained", save_traces=save_traces)
  summary = summarise(results)
  keep = ("n", "n_correct", "accuracy", "cost_usd", "prompt_tokens", "completion_tokens", "n_calls", "cached_calls")
  return {**{k: summary[k] for k in keep}, "run_dir": repo_relative(where), "outcomes": outcomes(results)}, computing


def load_problems(plan: CellPlan) -> list[str]:
  """Why the cell cannot load its --load_run (empty: it can, or it loads nothing)."""
  source = plan.source
  if source is None:
    return []
  if not (source / FIT_FILE).exists():
    trained = dataclasses.replace(plan.cell, tag="")
    # A source laid out as `cell_dir` under `table_root` names its run root, where the command must train it.
    laid_out = len(source.parents) > 5 and source == cell_dir(source.parents[4], trained)
    return [f"--load_run {repo_relative(source)} holds no finished fit ({FIT_FILE} missing): train it first: "
            + train_command(trained, run_root=repo_relative(source.parents[5]) if laid_out else None,
                            train_limit=plan.sizes["train"], val_limit=plan.sizes["val"],
                            test_limit=plan.sizes["test"])
            + " (with this run's training flags)"]
  try:
    theirs = read_json(source / "config.json", f"--load_run {repo_relative(source)} is damaged: retrain it")
  except StateError as e:
    return [str(e)]
  differences = load_mismatch(theirs, plan.config, plan.method)
  if differences:
    return [f"--load_run {repo_relative(source)} was trained differently: {'; '.join(differences)}; cannot load it "
            "(run it with the same training flags and data sizes, or train this cell itself)"]
  return []


def check_plans(plans: Sequence[CellPlan]) -> None:
  """Checks every cell's run directory, data hashes and --load_run before any cell starts; writes nothing.

  Raises:
    TablePlanError: naming every conflict, one line each.
  """
  problems: list[str] = []
  for plan in plans:
    conflict = run_dir_conflict(plan.run_dir, plan.config)
    if conflict is not None:
      problems.append(str(conflict))
    problems += load_problems(plan)
  if problems:
    raise TablePlanError(problems)


def lock_plans(plans: Sequence[CellPlan]) -> contextlib.ExitStack:
  """Takes every cell's run-directory lock (`rundir.run_dir_lock`) before any cell starts; close to release.

  Raises:
    TablePlanError: naming every cell another process is writing (the locks taken so far are released).
  """
  stack = contextlib.ExitStack()
  problems = []
  with contextlib.ExitStack() as taking:
    for plan in plans:
      try:
        taking.enter_context(run_dir_lock(plan.run_dir))
      except RunDirLockedError as e:
        problems.append(str(e))
    if problems:
      raise TablePlanError(problems)
    stack.push(taking.pop_all())
  return stack


async def run_cell(plan: CellPlan, backend: Backend, *, root: pathlib.Path, bound: asyncio.Semaphore,
                   progress: TableProgress, settings: RunSettings = RunSettings(), show_bars: bool = False,
                   use_wandb: bool = False, flags: Mapping[str, Any] | None = None,
                   save_traces: bool = True) -> CellRecord:
  """Fit-or-load, evaluate and summarise one cell (checked by `check_plans`); returns its record for the table.

  `save_traces=False` keeps only the graded results (items.jsonl), not every call's text: calibration's
  cells run thousands of queries each and are read back only as results.
  """
  cell, method, items, source, sizes = plan.cell, plan.method, plan.items, plan.source, plan.sizes
  run_dir = prepare_run_dir(plan.run_dir, plan.config)
  writers = CellWriters.make(run_dir, cell, wandb_config(cell, method.describe(), plan.config, run_dir),
                             group=wandb_group_of(root), use_wandb=use_wandb)
  eval_writer = None  # bound before anything can raise: `finally` reads it
  try:
    ctx = RunContext(backend.client, get_pool(cell.pool), cell.seed, settings, bound=bound)
    wanted = {it.id for it in items.test}
    done = {k for k in load_done(run_dir) if k in wanted}
    need_state = len(done) < len(wanted)
    fit = None
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
                             report=on_item, save_traces=save_traces)
    summary = summarise(results)
    timing = {"fit_or_load_s": round(fitted - started, 3), "evaluate_s": round(time.monotonic() - fitted, 3)}
    untrained, checked_now = None, False
    if plan.untrained is not None:
      checked = time.monotonic()
      untrained, checked_now = await _untrained_check(plan, ctx, run_dir, bound=bound, progress=progress,
                                                      save_traces=save_traces)
      timing["untrained_check_s"] = round(time.monotonic() - checked, 3)
    # A variant that loads another cell's fit spent nothing on training itself.
    training = fit["training"] if fit and not fit.get("loaded_from") else None
    record = CellRecord(**dataclasses.asdict(cell), label=cell.label, **summary,
                        mean_cost_usd=summary["cost_usd"] / max(summary["n"], 1),
                        training=training, fit=(fit or {}).get("summary"),
                        loaded_from=(fit or {}).get("loaded_from"),
                        sizes=sizes,
                        timing=timing,
                        computed_by=_computed_by(run_dir, computed_now=fits_now or need_state or checked_now),
                        run_dir=repo_relative(run_dir), outcomes=outcomes(results), untrained=untrained)
    atomic_write_json(run_dir / SUMMARY_FILE, {k: v for k, v in record.to_json().items() if k != "outcomes"})
    chosen = [chosen_record(r) for r in results]
    if any(len(c) > 2 for c in chosen):
      atomic_write_json(run_dir / CHOSEN_FILE, chosen)
    if eval_writer is not None:
      await asyncio.to_thread(writers.finish_eval, eval_writer, cell, run_dir, record.to_json())
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
  """Every cell's plan, checked by `check_plans` (TablePlanError naming every conflict); writes nothing."""
  plans, problems = [], []
  for c in spec.cells():
    try:
      plans.append(plan_spec_cell(c, spec, backends[c.seed], root=root, settings=settings,
                                  method=build_method(c, spec)))
    except InvalidRunError as e:
      problems.append(str(e))
  if problems:
    raise TablePlanError(problems)
  check_plans(plans)
  return plans


async def run_table(spec: TableSpec, backends: Mapping[int, Backend], *, run_root: str | pathlib.Path,
                    flags: Mapping[str, Any], command: str | None = None, max_queries: int = 32,
                    progress: bool = True, settings: RunSettings = RunSettings(),
                    use_wandb: bool = False, progress_path: pathlib.Path | None = None) -> dict[str, Any]:
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
    progress_path: where progress.json goes (default `<root>/<setting>/progress.json`; a Ray worker running
      one cell keeps its own, so that the driver's is the table's).

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
  if use_wandb:
    writers_lib.import_wandb()  # before any worker thread opens a run (`import_wandb` says why)
  started = time.monotonic()
  with lock_plans(plans):
    table_progress = TableProgress(totals, progress_path or root / spec.setting / PROGRESS_FILE, enabled=progress)
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
  return table_record(spec, {s: backends[s].describe() for s in spec.seeds}, labels, root=root,
                      wall_s=time.monotonic() - started, cells={c.key: r.to_json() for c, r in zip(cells, outcomes_)},
                      flags=flags, command=command)


def table_record(spec: TableSpec, described: Mapping[int, Mapping[str, Any]], labels: set[str], *,
                 root: pathlib.Path, wall_s: float, cells: Mapping[str, Any], flags: Mapping[str, Any],
                 command: str | None = None) -> dict[str, Any]:
  """The table record (cells + provenance) of a run, whichever executor ran its cells (this process's event
  loop, or Ray workers: `experiment.ray_executor`); `described` is each seed's `Backend.describe()`."""
  seeds = list(spec.seeds)
  return {"spec": spec.to_json(), "endpoint": described[seeds[0]]["name"],
          "endpoints": {str(s): described[s]["name"] for s in seeds},
          # Where the calls went: URLs, model ids, a pool file's dated prices, the spend cap and what was spent.
          "backends": {str(s): dict(described[s]) for s in seeds},
          "run_root": repo_relative(root), "wall_s": round(wall_s, 3),
          "cells": dict(cells),
          "provenance": provenance(seed=seeds[0] if len(seeds) == 1 else seeds, benchmarks=spec.benchmarks,
                                   flags=flags, backend="sim" if labels == {"sim"} else ",".join(sorted(labels)),
                                   command=command)}

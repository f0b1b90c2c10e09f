"""A cell's metric writers: training curves to the console, metrics.jsonl and W&B, and the cell's own
W&B run fed each test query's result as it lands.

Apart from the runner so the run reads as fit -> evaluate -> summary, with logging beside it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import pathlib
from typing import Any, Mapping, Sequence

from hieramas_jax.experiment.evaluate import ItemResult
from hieramas_jax.experiment.rundir import CHOSEN_FILE, FIT_FILE, STATE_DIR, SUMMARY_FILE, repo_relative
from hieramas_jax.experiment.spec import Cell
from hieramas_jax.experiment.writers import (ConsoleWriter, JsonlWriter, MultiWriter, NullWriter, StageWandbWriters,
                                             WandbWriter, scalar_leaves, stable_run_id, wandb_group)
from hieramas_jax.methods.registry import title_of

PER_QUERY_COLUMNS = ("query_id", "correct", "cost_usd", "chosen_graph", "llms_per_position", "n_calls")


def wandb_group_of(root: pathlib.Path) -> str:
  """The reproduction a cell belongs to: its run root's name and endpoint ("table1/sim-seed0-8de37b2e697a")."""
  return wandb_group(f"{root.parent.name}/{root.name}")


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
  title = title_of(cell.method)
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
  queries a resumed run had already done), and each query's row of the `per_query` table, which the run
  logs once, whole (the queries a resumed run had already done included), when it closes."""

  def __init__(self, writer, done: Sequence[ItemResult]):
    self.writer = writer
    self.correct = float(sum(r.correct for r in done))
    self.costs = [r.cost_usd for r in done]
    log_rows = getattr(writer, "log_rows", None)
    if log_rows is not None and done:
      log_rows("per_query", PER_QUERY_COLUMNS, per_query_rows(done))

  def add(self, n_done: int, result: ItemResult) -> None:
    self.correct += result.correct
    self.costs.append(result.cost_usd)
    self.writer.write_scalars(n_done, {"eval/running_accuracy": 100.0 * self.correct / n_done,
                                       "eval/running_cost_usd": math.fsum(self.costs),
                                       "eval/correct": float(result.correct), "eval/cost_usd": result.cost_usd})
    log_rows = getattr(self.writer, "log_rows", None)
    if log_rows is not None:
      log_rows("per_query", PER_QUERY_COLUMNS, per_query_rows([result]))

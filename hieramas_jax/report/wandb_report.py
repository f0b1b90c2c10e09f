"""The HTML report's views as a W&B report (`wandb-workspaces`), for users whose runs are on a W&B server.

Built from the runs the suite logs (`experiment/writers.py`): every Table 1 cell is a run named
`<label>|<benchmark>|<pool>|<setting>|seed<s>` with job_type = its row label and the summary `accuracy`,
`mean_cost_usd`...; each training stage a run `<cell>/<stage>` (job_type `<method>:<stage>`) with the
`stage1/*`, `stage2/*` or `<method>/*` curves; sweep points are train_hieramas cells tagged by the swept
value; calibration and the benchmarks are runs of job_type `calibration` and `bench_<key>`.

`build_report` only constructs the object (no network); `report.save()` (experiments/wandb_report.py
--save) publishes it and needs a W&B login.
"""

from __future__ import annotations

from typing import Any

SIM_NOTE = ("Runs on the embedded simulated pool (hieramas_jax.sim) are not real LLM results; their W&B "
            "configs carry the backend, and every figure of the offline report says \"simulated pool\".")


def build_report(entity: str, project: str, *, group: str | None = None, title: str | None = None) -> Any:
  """The W&B report object (wandb_workspaces.reports.v2.Report); nothing is sent anywhere.

  Args:
    entity, project: where the runs are (given explicitly: looking up a default entity needs the server).
    group: restrict every panel to one reproduction (the W&B group, e.g. "table1/sim-seed0-8de37b2e697a").
  """
  import wandb_workspaces.reports.v2 as wr  # pylint: disable=import-outside-toplevel

  def runset(name: str, query: str, groupby=()):
    return wr.Runset(entity=entity, project=project, name=name, query=query,
                     groupby=list(groupby), filters=f"Group = '{group}'" if group else "")

  cells = runset("Table 1 cells", "|seed", groupby=("job_type",))
  stage1 = runset("HieraMAS stage 1", "/stage1")
  stage2 = runset("HieraMAS stage 2", "/stage2")
  baselines = runset("Learned baselines' fits", "/fit")
  sweeps = runset("Sweep points (train_hieramas cells)", "hieramas-")
  calibration = runset("Calibration", "calibration")
  bench = runset("Benchmarks", "bench")
  blocks = [
      wr.H1(title or "hieramas-jax: the paper's experiments as this suite reproduces them"),
      wr.CalloutBlock(SIM_NOTE),
      wr.TableOfContents(),
      wr.H2("Cost against accuracy (Table 1 cells)"),
      wr.P("Each point is one cell: mean cost per test query against accuracy; group by job_type to compare methods."),
      wr.PanelGrid(runsets=[cells], panels=[
          wr.ScatterPlot(title="cost against accuracy", x=wr.SummaryMetric("mean_cost_usd"),
                         y=wr.SummaryMetric("accuracy"), log_x=True),
          wr.BarPlot(title="accuracy per method", metrics=[wr.SummaryMetric("accuracy")]),
          wr.BarPlot(title="training cost per method (USD)", metrics=[wr.SummaryMetric("training/cost_usd")]),
          wr.LinePlot(title="running accuracy over the test split", y=["eval/running_accuracy"]),
      ]),
      wr.H2("Per-query results (chosen graph, LLMs per position)"),
      wr.PanelGrid(runsets=[cells], panels=[wr.WeavePanelSummaryTable(table_name="per_query")]),
      wr.H2("Training curves"),
      wr.PanelGrid(runsets=[stage1], panels=[
          wr.LinePlot(title="stage 1 loss", y=["stage1/loss"]),
          wr.LinePlot(title="stage 1 system reward", y=["stage1/batch_mean_system_reward", "stage1/val_mean_reward"]),
          wr.LinePlot(title="stage 1 accuracy", y=["stage1/batch_accuracy", "stage1/val_accuracy"]),
          wr.LinePlot(title="stage 1 entropy and skip rate", y=["stage1/entropy", "stage1/skip_rate"]),
      ]),
      wr.PanelGrid(runsets=[stage2], panels=[
          wr.LinePlot(title="stage 2 classifier loss", y=["stage2/train_loss", "stage2/val_loss"])]),
      wr.PanelGrid(runsets=[baselines], panels=[
          wr.LinePlot(title="learned baselines", y=["gdesigner/loss", "masrouter/loss", "aflow/round_score"])]),
      wr.H2("Sweeps: graph pool size K and proposers W (Tables 6, 7)"),
      wr.PanelGrid(runsets=[sweeps], panels=[
          wr.ScatterPlot(title="accuracy against K", x=wr.Config("k_pool"), y=wr.SummaryMetric("accuracy")),
          wr.ScatterPlot(title="cost against K", x=wr.Config("k_pool"), y=wr.SummaryMetric("mean_cost_usd")),
          wr.ScatterPlot(title="accuracy against W", x=wr.Config("num_proposers"), y=wr.SummaryMetric("accuracy")),
          wr.ScatterPlot(title="cost against W", x=wr.Config("num_proposers"), y=wr.SummaryMetric("mean_cost_usd")),
      ]),
      wr.H2("Calibration of the simulated pool"),
      wr.PanelGrid(runsets=[calibration], panels=[
          wr.BarPlot(title="Full-Graph average (validation)",
                     metrics=[wr.SummaryMetric("validation/full_graph/average"),
                              wr.SummaryMetric("validation/full_graph/target")]),
          wr.BarPlot(title="fit cells outside the tolerance", metrics=[wr.SummaryMetric("fit/n_outside")])]),
      wr.H2("Benchmarks"),
      wr.PanelGrid(runsets=[bench], panels=[wr.RunComparer()]),
      wr.H2("Figures 3 and 4, every table"),
      wr.MarkdownBlock("The chosen topologies (Figure 3), the LLM preferences (Figure 4) and every table of "
                       "`results/` are in the offline report: `make report`, then open "
                       "`results/report/index.html`. The per-query tables above hold the same chosen graphs "
                       "and LLMs per position, and each cell's `results-*` artifact its results files."),
  ]
  return wr.Report(project=project, entity=entity, title=title or "hieramas-jax reproduction",
                   description="Table 1 cells, training stages, sweeps and calibration logged by hieramas-jax.",
                   blocks=blocks, width="fluid")


def describe(report: Any) -> list[dict[str, Any]]:
  """A plain summary of the report's blocks (type, text or panels with their metrics and runset queries)."""
  out = []
  for block in report.blocks:
    entry: dict[str, Any] = {"type": type(block).__name__}
    if hasattr(block, "panels"):
      entry["runsets"] = [r.query for r in block.runsets]
      entry["panels"] = [{"type": type(p).__name__, "title": getattr(p, "title", None),
                          "metrics": [_metric_name(m) for m in _metrics(p)]} for p in block.panels]
    elif hasattr(block, "text"):
      entry["text"] = str(block.text)
    out.append(entry)
  return out


def _metrics(panel) -> list:
  found = []
  for field in ("x", "y", "metrics"):
    value = getattr(panel, field, None)
    if isinstance(value, list):
      found += value
    elif value is not None and not (field == "x" and value == "Step"):
      found.append(value)
  table = getattr(panel, "table_name", None)
  return found + ([table] if table else [])


def _metric_name(m) -> str:
  return m if isinstance(m, str) else getattr(m, "name", str(m))

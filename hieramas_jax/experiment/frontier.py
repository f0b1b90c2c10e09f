"""Runs HieraMAS over cost weights k under both rewards, through the same runner as Table 1.

One runner table per (recipe, k): method "hieramas" (the published decision-cost reward) or
"hieramas_total_cost" (the total-cost variant), option `reward_k = k`, tag `k<k>`. The recipe's own
default k (300) runs untagged without the option, so it IS the Table 1 cell of that row (trained once,
read by both). Every cell resumes like any runner cell: a killed frontier run picks up where it stopped,
and finished cells are only read. It drives the runner, so it lives in the experiment layer (methods/
never imports it).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from hieramas_jax.experiment.runner import TablePlanError, plan_table, run_table, table_root
from hieramas_jax.experiment.spec import TableSpec
from hieramas_jax.methods.hieramas.config import HieraMASConfig

RECIPE_METHODS = {"published": "hieramas", "total_cost": "hieramas_total_cost"}
DEFAULT_KS = (0.0, 30.0, 100.0, 300.0, 1000.0)


def frontier_tag(k: float) -> str:
  """The cell tag of cost weight k ("" for the recipes' default k, so that point is the Table 1 cell)."""
  return "" if k == HieraMASConfig.reward_k else f"k{k:g}"


def frontier_specs(benchmarks: Sequence[str], pools: Sequence[str], ks: Sequence[float], recipes: Sequence[str], *,
                   seed: int = 0, train_limit: int | None = None, val_limit: int | None = None,
                   test_limit: int | None = None, options: Mapping[str, Any] | None = None
                   ) -> list[tuple[TableSpec, str, float]]:
  """(spec, recipe, k) per point of the frontier, in run order (cheap published recipe first).

  `options` are extra HieraMASConfig fields for every cell (tiny test budgets); with them the default-k
  point also gets `reward_k` explicitly (it then is not a Table 1 cell).
  """
  out = []
  for recipe in recipes:
    method = RECIPE_METHODS[recipe]
    for k in ks:
      tag = frontier_tag(k)
      opts = dict(options or {})
      if tag or opts:
        opts["reward_k"] = float(k)
      spec = TableSpec(methods=(method,), benchmarks=tuple(benchmarks), pools=tuple(pools), setting="main",
                       seeds=(seed,), train_limit={b: train_limit for b in benchmarks} if train_limit else {},
                       val_limit=val_limit, test_limit=test_limit, method_options={method: opts} if opts else {},
                       tag=tag)
      out.append((spec, recipe, float(k)))
  return out


async def run_frontier(specs: Sequence[tuple[TableSpec, str, float]], backends, *, run_root, flags: Mapping[str, Any],
                       max_queries: int = 32, progress: bool = True, use_wandb: bool = False
                       ) -> tuple[dict[str, Any], dict[str, float], dict[str, Any]]:
  """Runs (or reads) every spec; returns (cells by key, k by cell label, the last table's provenance)."""
  problems = []
  for spec, _, _ in specs:  # every table checked before the first starts: a conflict is never found late
    try:
      plan_table(spec, backends, table_root(run_root, backends[spec.seeds[0]].endpoint.name))
    except TablePlanError as e:
      problems += e.problems
  if problems:
    raise TablePlanError(problems)
  cells, ks, prov = {}, {}, {}
  for spec, _, k in specs:
    table = await run_table(spec, backends, run_root=run_root, flags=flags, max_queries=max_queries,
                            progress=progress, use_wandb=use_wandb)
    for key, cell in table["cells"].items():
      cells[key] = cell
      ks[cell["label"]] = k
    prov = table["provenance"]
  return cells, ks, prov

"""HieraMAS's cost-accuracy frontier: trained over cost weights k, against every Table 1 method.

  python experiments/hieramas_frontier.py                                   # the full frontier (make frontier)
  python experiments/hieramas_frontier.py --benchmarks=math --pools=gpt-5-mini --ks=0,300 --recipes=published \
      --train_limit=8 --val_limit=4 --limit=8 --out_dir=/tmp/f                                        # smoke

Each point is one runner cell (`experiment/frontier.py`) in Table 1's run root, so the recipes' default
k (300) is the Table 1 cell itself and every cell resumes. The baselines' points come from Table 1's record
(`--table1`, results/table1.json). Writes <out_dir>/hieramas_frontier.{json,md,png} (`report/frontier.py`).
"""

from __future__ import annotations

import json
import pathlib

from absl import flags

from hieramas_jax import aio
from hieramas_jax.experiment import cli
from hieramas_jax.experiment.backend import BACKEND_FLAG_NAMES
from hieramas_jax.experiment.cli import (LIMITED_ROOT_HELP, default_run_root, open_backends, refuse_cut_run,
                                        selected_flags)
from hieramas_jax.experiment.console import define_verbose_flag
from hieramas_jax.experiment.frontier import DEFAULT_KS, RECIPE_METHODS, frontier_specs, run_frontier
from hieramas_jax.experiment.rundir import repo_relative
from hieramas_jax.experiment.spec import InvalidRunError
from hieramas_jax.llm.endpoint import define_backend_flags
from hieramas_jax.paths import REPO_DIR, RESULTS_DIR
from hieramas_jax.report.frontier import frontier_record, write_frontier

FLAGS = flags.FLAGS
flags.DEFINE_list("benchmarks", ["humaneval_plus", "math", "mmlu_redux"], "Benchmarks.")
flags.DEFINE_list("pools", ["gpt-5-mini", "qwen3-80b"], "Table 1 settings.")
flags.DEFINE_list("ks", [f"{k:g}" for k in DEFAULT_KS], "Cost weights k of the reward (0: cost ignored).")
flags.DEFINE_list("recipes", list(RECIPE_METHODS), "HieraMAS recipes: published (decision-cost reward), total_cost.")
flags.DEFINE_integer("seed", 0, "The run's seed (and the embedded sim's).")
flags.DEFINE_integer("limit", None, "Only the first N test queries (smoke runs).", lower_bound=1)
flags.DEFINE_integer("train_limit", None, "Only the first N training queries.", lower_bound=1)
flags.DEFINE_integer("val_limit", None, "Only the first N validation queries.", lower_bound=1)
flags.DEFINE_string("table1", str(RESULTS_DIR / "table1.json"), "Table 1's record (the baselines' points).")
flags.DEFINE_integer("max_queries", 64, "Most queries in flight at once (one global bound).", lower_bound=1)
flags.DEFINE_string("run_root", str(REPO_DIR / "runs" / "table1"), "Parent of the run directories (Table 1's)."
                    + LIMITED_ROOT_HELP)
flags.DEFINE_string("out_dir", str(RESULTS_DIR), "Where hieramas_frontier.{json,md,png} are written.")
flags.DEFINE_bool("sim_process", True, "Serve the embedded sim from its own process.")
flags.DEFINE_bool("progress", True, "Show progress bars.")
flags.DEFINE_bool("wandb", False, "Every cell its own W&B run (offline unless WANDB_MODE=online).")
define_backend_flags()
define_verbose_flag()

RUN_FLAGS = ("benchmarks", "pools", "ks", "recipes", "seed", "limit", "train_limit", "val_limit", "table1",
             "max_queries", "run_root", "out_dir", "sim_process", "wandb") + BACKEND_FLAG_NAMES


def _parse_ks(values) -> tuple[float, ...]:
  try:
    ks = tuple(float(v) for v in values)
  except ValueError:
    raise InvalidRunError(f"--ks must be numbers, got {','.join(values)}") from None
  if not ks or any(k < 0 for k in ks) or len(set(ks)) != len(ks):
    raise InvalidRunError(f"--ks must be distinct values >= 0, got {','.join(values)}")
  return ks


def _check_recipes(recipes) -> None:
  unknown = sorted(set(recipes) - set(RECIPE_METHODS))
  if unknown or not recipes:
    raise InvalidRunError(f"--recipes must name some of {', '.join(RECIPE_METHODS)}; got {','.join(recipes)}")


def main():
  ks = _parse_ks(FLAGS.ks)
  _check_recipes(FLAGS.recipes)
  specs = frontier_specs(FLAGS.benchmarks, FLAGS.pools, ks, FLAGS.recipes, seed=FLAGS.seed,
                         train_limit=FLAGS.train_limit, val_limit=FLAGS.val_limit, test_limit=FLAGS.limit)
  suffix = specs[0][0].results_suffix()
  refuse_cut_run(FLAGS, ("benchmarks", "pools", "ks", "recipes"), out_flag="out_dir", suffix=suffix,
                 overwrites=f"{repo_relative(FLAGS.out_dir)}/hieramas_frontier.json")

  async def go():
    async with open_backends(FLAGS, (FLAGS.seed,), sim_process=FLAGS.sim_process) as backends:
      return await run_frontier(specs, backends, run_root=default_run_root(FLAGS, specs[0][0]),
                                flags=selected_flags(FLAGS, RUN_FLAGS), max_queries=FLAGS.max_queries,
                                progress=FLAGS.progress, use_wandb=FLAGS.wandb)

  cells, k_of, prov = aio.run(go())
  table1 = pathlib.Path(FLAGS.table1)
  baseline_cells = json.loads(table1.read_text())["cells"] if table1.exists() else {}
  record = frontier_record(cells, baseline_cells, k_of, prov)
  for path in write_frontier(record, FLAGS.out_dir, suffix=suffix):
    print(f"wrote {path}")
  for s in record["settings"].values():
    print(f"  {s['benchmark']}/{s['pool']}: HieraMAS frontier {s['position']} the baselines' Pareto front")


if __name__ == "__main__":
  cli.run(main, jax_cache=True)

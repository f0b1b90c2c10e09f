"""Regret of HieraMAS against the best static configuration, on the simulated pool: three runner rows.

  python experiments/oracle_regret.py                   # make regret: every benchmark, both pools
  python experiments/oracle_regret.py --benchmarks=math --pools=qwen3-80b --out_dir=/tmp/r   # one cell
  python experiments/oracle_regret.py --benchmarks=math --budget=600 --limit=30 --out_dir=/tmp/r

Runs (or resumes, or just reads) the cells `static_search` (whose fit is the successive-halving search
on train + val), `random_config`, `hieramas` and the single-call `base` and `cot` through
`experiment.runner`, in Table 1's run root by default, so the HieraMAS cells trained for Table 1 are the
ones compared. Writes <out_dir>/regret.json and regret.md (`report/regret.py`).
"""

from __future__ import annotations

import pathlib

from absl import flags

from hieramas_jax.experiment import cli
from hieramas_jax.experiment.backend import BACKEND_FLAG_NAMES
from hieramas_jax.experiment.cli import LIMITED_ROOT_HELP, default_run_root, refuse_cut_run, run_spec, selected_flags
from hieramas_jax.experiment.console import define_verbose_flag
from hieramas_jax.experiment.rundir import repo_relative
from hieramas_jax.experiment.spec import TableSpec, parse_method_options
from hieramas_jax.experiment.writers import log_result_run
from hieramas_jax.fileio import atomic_write_json, atomic_write_text
from hieramas_jax.llm.endpoint import define_backend_flags
from hieramas_jax.paths import REPO_DIR, RESULTS_DIR
from hieramas_jax.report.regret import SINGLE_CALL, regret_markdown, regret_record

FLAGS = flags.FLAGS
flags.DEFINE_list("benchmarks", ["humaneval_plus", "math", "mmlu_redux"], "Benchmarks.")
flags.DEFINE_list("pools", ["gpt-5-mini", "qwen3-80b"], "Pool settings (those of results/regret.json by default).")
flags.DEFINE_integer("seed", 0, "The run's one seed (graph pool, candidates, mutants, order; also the sim's).")
flags.DEFINE_integer("budget", 8000, "Search budget per cell: (configuration x item) queries on train + val.",
                     lower_bound=1)
flags.DEFINE_integer("max_search_items", 200, "The search uses a seeded random subset of at most this many "
                     "train+val items.", lower_bound=1)
flags.DEFINE_integer("num_random_graphs", 30, "Random DAGs in the graph pool (plus chain, star, full).",
                     lower_bound=0)
flags.DEFINE_multi_string("search_option", [], "FIELD=VALUE of the search (methods/static_search/search.py "
                          "SearchConfig; VALUE as JSON), e.g. min_items=8; repeatable.")
flags.DEFINE_integer("limit", None, "Only the first N test queries (smoke runs).")
flags.DEFINE_integer("train_limit", None, "Only the first N training queries (default: all; MMLU-Redux 512).")
flags.DEFINE_integer("val_limit", None, "Only the first N validation queries.")
flags.DEFINE_integer("max_queries", 64, "Most queries in flight at once (one global bound).", lower_bound=1)
flags.DEFINE_string("run_root", str(REPO_DIR / "runs" / "table1"), "Parent of the run directories (Table 1's)."
                    + LIMITED_ROOT_HELP)
flags.DEFINE_string("out_dir", str(RESULTS_DIR), "Where regret.json / regret.md are written.")
flags.DEFINE_bool("sim_process", True, "Serve the embedded sim from its own process.")
flags.DEFINE_bool("progress", True, "Show progress bars.")
flags.DEFINE_bool("wandb", True, "Every cell and the regret file its own W&B run (offline unless WANDB_MODE=online or "
                  "WANDB_API_KEY is set).")
define_backend_flags()
define_verbose_flag()

RUN_FLAGS = ("benchmarks", "pools", "seed", "budget", "max_search_items", "num_random_graphs", "search_option", "limit",
             "train_limit",
             "val_limit", "max_queries", "run_root", "out_dir", "sim_process", "wandb") + BACKEND_FLAG_NAMES


def build_spec() -> TableSpec:
  options = {"budget": FLAGS.budget, "max_search_items": FLAGS.max_search_items,
             "num_random_graphs": FLAGS.num_random_graphs,
             **parse_method_options(f"static_search.{o}" for o in FLAGS.search_option).get("static_search", {})}
  train_limit = {b: FLAGS.train_limit for b in FLAGS.benchmarks} if FLAGS.train_limit else {}
  return TableSpec(
      methods=("static_search", "random_config", "hieramas", *SINGLE_CALL), benchmarks=tuple(FLAGS.benchmarks),
      pools=tuple(FLAGS.pools), setting="main", seeds=(FLAGS.seed,), train_limit=train_limit,
      val_limit=FLAGS.val_limit, test_limit=FLAGS.limit,
      method_options={"static_search": options, "random_config": {"num_random_graphs": FLAGS.num_random_graphs}})


def main():
  spec = build_spec()
  suffix = spec.results_suffix()
  refuse_cut_run(FLAGS, ("benchmarks", "pools"), out_flag="out_dir", suffix=suffix,
                 overwrites=f"{repo_relative(FLAGS.out_dir)}/regret.json")
  run_flags = selected_flags(FLAGS, RUN_FLAGS)
  table = run_spec(spec, FLAGS, run_root=default_run_root(FLAGS, spec), flags=run_flags,
                   max_queries=FLAGS.max_queries, progress=FLAGS.progress, use_wandb=FLAGS.wandb,
                   sim_process=FLAGS.sim_process)
  record = regret_record(table)
  atomic_write_json(f"{FLAGS.out_dir}/regret{suffix}.json", record)
  atomic_write_text(f"{FLAGS.out_dir}/regret{suffix}.md", regret_markdown(record))
  if FLAGS.wandb:
    log_result_run(f"{FLAGS.out_dir}/regret{suffix}.json", record, job_type="oracle_regret", name=f"regret{suffix}",
                   group=f"{pathlib.Path(FLAGS.run_root).name}/{table['endpoint']}", config=run_flags,
                   extra_files=[f"{FLAGS.out_dir}/regret{suffix}.md"])
  print(f"wrote {FLAGS.out_dir}/regret{suffix}.json and .md:")
  for key, e in record["entries"].items():
    print(f"  {key}: oracle={e['oracle_reward']:.4f} random={e['random_reward']:.4f} learned={e['learned_reward']} "
          f"regret={e['regret']}")


if __name__ == "__main__":
  cli.run(main, jax_cache=True)

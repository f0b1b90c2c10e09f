"""Table 1 (and Tables 3, 4, 11) from one command, on the embedded simulated pool by default.

  python experiments/reproduce_table1.py                                  # all 66 cells (make reproduce-table1)
  python experiments/reproduce_table1.py --setting=generalization --benchmarks=mmlu_redux   # Table 3
  python experiments/reproduce_table1.py --seeds=0,1,2                    # mean +- sd over seeds
  python experiments/reproduce_table1.py --methods=base,gdesigner --benchmarks=math --limit=5 --train_limit=8 \\
      --method_option=gdesigner.iterations=2 --out_dir=/tmp/t1

Every cell (method x benchmark x pool x seed) runs through `experiment.runner` concurrently under one
bound on queries in flight: learned methods fit on the same training split (resumable), every method is
evaluated on the same test split, and each cell's run directory under --run_root makes a killed run
resume where it stopped. Every cell's run directory is checked before any starts (one error naming every
conflict); a run with limits and no --run_root gets its own root named by them (runs/table1-limit3-train8).
Writes <out_dir>/table1.{md,json}, table4.{md,json} (inference cost) and table11.{md,json} (training cost),
or table3.{md,json} for --setting=generalization; a run with limits gets their suffix (`table1_limit3_train8`,
`TableSpec.results_suffix`), so a quick run never overwrites the full tables.
"""

from __future__ import annotations

import logging

from absl import flags

from hieramas_jax.experiment import cli
from hieramas_jax.experiment.backend import BACKEND_FLAG_NAMES
from hieramas_jax.experiment.cli import (LIMITED_ROOT_HELP, default_run_root, refuse_cut_run, run_spec,
                                        selected_flags)
from hieramas_jax.experiment.rundir import repo_relative
from hieramas_jax.experiment.console import define_verbose_flag
from hieramas_jax.experiment.dry_run import dry_run_report
from hieramas_jax.experiment.spec import InvalidRunError, TableSpec, parse_method_options
from hieramas_jax.llm.endpoint import define_backend_flags
from hieramas_jax.methods.registry import known_methods
from hieramas_jax.paths import REPO_DIR, RESULTS_DIR
from hieramas_jax.report.paper import BEYOND_PAPER_METHODS, TABLE1_METHODS
from hieramas_jax.report.table1 import write_tables


FLAGS = flags.FLAGS
flags.DEFINE_list("methods", list(TABLE1_METHODS), "Methods (registry names).")
flags.DEFINE_list("benchmarks", ["humaneval_plus", "math", "mmlu_redux"], "Benchmarks.")
flags.DEFINE_list("pools", ["gpt-5-mini", "qwen3-80b"], "Table 1 settings (strong backbone).")
flags.DEFINE_enum("setting", "main", ["main", "generalization"], "main: Table 1; generalization: Table 3 "
                  "(MMLU-Redux, 5 subjects held out of training and tested on).")
flags.DEFINE_list("seeds", ["0"], "Seeds; each is one run of every cell (and the embedded sim's seed).")
flags.DEFINE_integer("limit", None, "Only the first N test queries of each benchmark (quick runs).")
flags.DEFINE_integer("train_limit", None, "Only the first N training queries of every benchmark (default: all, "
                     "MMLU-Redux 512).")
flags.DEFINE_integer("val_limit", None, "Only the first N validation queries.")
flags.DEFINE_multi_string("method_option", [], "METHOD.FIELD=VALUE (VALUE as JSON, else a string), e.g. "
                          "gdesigner.iterations=4; repeatable.")
flags.DEFINE_string("out_dir", str(RESULTS_DIR), "Where the table files are written.")
flags.DEFINE_string("run_root", str(REPO_DIR / "runs" / "table1"), "Parent of the per-cell run directories."
                    + LIMITED_ROOT_HELP)
flags.DEFINE_integer("max_queries", 64, "Most queries in flight at once, over all cells (one global bound).",
                     lower_bound=1)
flags.DEFINE_bool("sim_process", True, "With --backend=sim and no --base_url: serve the sim from its own process "
                  "(its own core) instead of a thread.")
flags.DEFINE_bool("wandb", True, "Every cell and training stage its own W&B run (offline unless WANDB_MODE=online or "
                  "WANDB_API_KEY is set; `make wandb-sync` uploads offline runs).")
flags.DEFINE_bool("progress", True, "Show the table's progress bar.")
flags.DEFINE_enum("executor", "process", ["process", "ray"], "process: every cell in this process; ray: each cell a "
                  "Ray task on every core (a local cluster) or on the cluster at --ray_address (README: 'Many cores, "
                  "many machines').")
flags.DEFINE_string("ray_address", None, "--executor=ray: join this running cluster (`ray start --head` prints it), "
                    "instead of starting a local one.")
flags.DEFINE_integer("ray_workers", None, "--executor=ray without --ray_address: the local cluster's CPUs (default: "
                     "every core).", lower_bound=1)
flags.DEFINE_integer("ray_cells_per_cpu", 1, "--executor=ray: cells at once per CPU (a cell mostly waits on its calls; "
                     "each is a worker process of about 1 GB).", lower_bound=1)
flags.DEFINE_bool("extended", False, "Table 1 extended (issue 32): the paper's methods plus those published "
                  f"after it ({', '.join(BEYOND_PAPER_METHODS)}) on the same runner, written as table1_extended, "
                  "table4_extended and table11_extended; with the default --run_root, Table 1's finished cells are "
                  "reused.")
flags.DEFINE_bool("untrained_check", True, "Also answer each learned cell's test queries from the state its fit "
                  "starts from (methods with load_untrained: GDesigner, MASRouter, AFlow, AgentPrune, MaAS, "
                  "ARG-Designer), so the table says whether training beat the untrained method on the same queries "
                  "(paired); its calls are counted apart from inference and training cost.")
flags.DEFINE_bool("dry_run", False, "Print the calls, tokens and dollars the run would spend per cell (an estimate from "
                  "the committed simulated run, at the chosen endpoints' prices), then exit: nothing sent or written.")
define_backend_flags()
define_verbose_flag()

RUN_FLAGS = ("extended", "methods", "benchmarks", "pools", "setting", "seeds", "limit", "train_limit", "val_limit",
             "method_option", "out_dir", "run_root", "max_queries", "sim_process", "wandb", "executor", "ray_address",
             "ray_workers", "ray_cells_per_cpu", "untrained_check") + BACKEND_FLAG_NAMES


def build_spec() -> TableSpec:
  try:
    seeds = tuple(int(s) for s in FLAGS.seeds)
  except ValueError:
    raise InvalidRunError(f"--seeds must be integers, got {','.join(FLAGS.seeds)}") from None
  methods = tuple(FLAGS.methods)
  if FLAGS.extended and FLAGS.setting != "main":
    raise InvalidRunError("--extended extends Table 1 (--setting=main)")
  if FLAGS["methods"].using_default_value:
    methods += BEYOND_PAPER_METHODS if FLAGS.extended else ()
    missing = [m for m in methods if m not in known_methods()]
    if missing:
      logging.warning("not registered in this checkout, left out: %s", ", ".join(missing))
      methods = tuple(m for m in methods if m not in missing)
  train_limit = {b: FLAGS.train_limit for b in FLAGS.benchmarks} if FLAGS.train_limit else {}
  return TableSpec(methods=methods, benchmarks=tuple(FLAGS.benchmarks), pools=tuple(FLAGS.pools),
                   setting=FLAGS.setting, seeds=seeds, train_limit=train_limit, val_limit=FLAGS.val_limit,
                   test_limit=FLAGS.limit, method_options=parse_method_options(FLAGS.method_option),
                   untrained_check=FLAGS.untrained_check)


def _suffix(spec: TableSpec) -> str:
  """The tables' file-name suffix: "_extended" for --extended, then the limits' ("_limit3")."""
  return ("_extended" if FLAGS.extended else "") + spec.results_suffix()


def main():
  spec = build_spec()
  if not FLAGS.dry_run:
    # A table of some methods, benchmarks or pools is not Table 1 (Table 3's one benchmark is its whole).
    name = "table1" if spec.setting == "main" else "table3"
    refuse_cut_run(FLAGS, ("methods", "benchmarks", "pools"), out_flag="out_dir",
                   overwrites=f"{repo_relative(FLAGS.out_dir)}/{name}{_suffix(spec)}.json",
                   suffix=spec.results_suffix(),
                   allowed={"benchmarks": ["mmlu_redux"]} if spec.setting == "generalization" else None)
  if FLAGS.dry_run:
    print(dry_run_report(spec, FLAGS))
    return
  record = run_spec(spec, FLAGS, run_root=default_run_root(FLAGS, spec), flags=selected_flags(FLAGS, RUN_FLAGS),
                    max_queries=FLAGS.max_queries, progress=FLAGS.progress, use_wandb=FLAGS.wandb,
                    sim_process=FLAGS.sim_process, executor=FLAGS.executor, ray_address=FLAGS.ray_address,
                    ray_workers=FLAGS.ray_workers, ray_cells_per_cpu=FLAGS.ray_cells_per_cpu)
  written = write_tables(record, FLAGS.out_dir, suffix=_suffix(spec))
  print(f"{len(record['cells'])} cells in {record['wall_s']:.1f} s; wrote " + ", ".join(str(p) for p in written))


if __name__ == "__main__":
  cli.run(main, jax_cache=True)

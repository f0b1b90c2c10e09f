"""Benchmark: Table 1 on the embedded sim, from a cold cache and from a warm one, in two segments.

  python experiments/bench_table1.py                       # writes results/bench.json key "table1"
  python experiments/bench_table1.py --limit=5 --train_limit=16 --out=/tmp/bench.json   # a quick check
  python experiments/bench_table1.py --scaling --scaling_runs=process --scaling_seeds=1,2,3 ...  # over seeds
  python experiments/bench_table1.py --install         # make install on a fresh clone: key "install"

By default `table`: the command a user runs, every row (goal on 2 cores cold <= 600 s, warm <= 60 s), cold,
warm and rerun. `--segments=published,suite_recipe_row` times issue 20's split instead: the rows as their
authors ran them (same goals) and the suite's total-cost HieraMAS variant alone (no goal), each in its own
cache; a segment not timed keeps its earlier figures. What is timed and how: `hieramas_jax.bench.table1`.
"""

from __future__ import annotations

from absl import flags

from hieramas_jax.bench import table1
from hieramas_jax.bench.results import BENCH_FILE
from hieramas_jax.experiment import cli
from hieramas_jax.experiment.cli import refuse_cut_run
from hieramas_jax.experiment.rundir import repo_relative

FLAGS = flags.FLAGS
flags.DEFINE_integer("limit", None, "Only the first N test queries (a quick check; the goal is for the full table).")
flags.DEFINE_integer("train_limit", None, "Only the first N training queries.")
flags.DEFINE_list("methods", None, "Methods of the `published` segment (default: reproduce_table1.py's, "
                  "less the suite-recipe row).")
flags.DEFINE_list("segments", ["table"], "Which segments to time: table (every row, as the user runs it), "
                  "published, suite_recipe_row, table_jax_encoder (every row, each sentence encoder on the jax "
                  "backend).")
flags.DEFINE_multi_string("method_option", [], "Passed on to reproduce_table1.py (METHOD.FIELD=VALUE), e.g. a "
                          "training budget: hieramas.stage1_steps=25.")
flags.DEFINE_string("out", str(BENCH_FILE), "The bench file; only key `table1` (with --scaling: `table1_scaling`) is written.")
flags.DEFINE_string("work_dir", None, "Where the cold cache and run roots go (default: a temporary directory).")
flags.DEFINE_bool("scaling", False, "Instead: the same table cold in one process and as Ray tasks (key "
                  "table1_scaling; --scaling_runs says which).")
flags.DEFINE_list("scaling_runs", list(table1.SCALING_RUNS), "--scaling: process or ray:<workers>[:<cells per CPU>], "
                  "each timed cold; an earlier entry's other runs of the same scope are kept.")
flags.DEFINE_bool("install", False, "Instead: time `make install` on a fresh clone of HEAD (key install).")
flags.DEFINE_list("scaling_seeds", ["1"], "--scaling: numbers of seeds each run is timed at (n: --seeds=0..n-1).")


def main():
  if FLAGS.install:
    table1.time_install(out=FLAGS.out, work_dir=FLAGS.work_dir)
    return
  if FLAGS.scaling:
    table1.run_scaling(limit=FLAGS.limit, train_limit=FLAGS.train_limit, methods=FLAGS.methods,
                       method_option=FLAGS.method_option, out=FLAGS.out, work_dir=FLAGS.work_dir,
                       runs_wanted=FLAGS.scaling_runs, seed_counts=table1.parse_seed_counts(FLAGS.scaling_seeds))
    return
  refuse_cut_run(FLAGS, ("limit", "train_limit"), out_flag="out",
                 overwrites=f"the table's timings in {repo_relative(FLAGS.out)}")  # a quick check's are not
  table1.run(limit=FLAGS.limit, train_limit=FLAGS.train_limit, methods=FLAGS.methods, segments=FLAGS.segments,
             method_option=FLAGS.method_option, out=FLAGS.out, work_dir=FLAGS.work_dir)


if __name__ == "__main__":
  cli.run(main)

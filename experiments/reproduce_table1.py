"""Table 1 for the methods that exist, on the embedded simulated pool by default.

  python experiments/reproduce_table1.py --seed=0                       # everything (make reproduce-table1)
  python experiments/reproduce_table1.py --benchmarks=math --limit=3 --wandb=false --out_dir=/tmp/t1

Writes <out_dir>/table1.md and table1.json (table1_limit<N>.* with --limit, so a quick run never
overwrites the full table) (accuracy %, total cost USD and n per method x benchmark x
pool, averages, provenance with the exact command). Per-cell run directories under --run_root make an
interrupted run resume where it stopped.
"""

from __future__ import annotations

import logging

from absl import app, flags

from hieramas_jax import aio
from hieramas_jax.experiment.backend import BACKEND_FLAG_NAMES, open_backend
from hieramas_jax.experiment.cli import parse_flags_or_exit, run_or_exit, selected_flags
from hieramas_jax.experiment.table1 import (InvalidRunError, RunConfigMismatchError, Table1Spec, run_table1,
                                            table1_stem)
from hieramas_jax.experiment.writers import ConsoleWriter, WandbWriter
from hieramas_jax.llm.endpoint import define_backend_flags
from hieramas_jax.paths import REPO_DIR, RESULTS_DIR

FLAGS = flags.FLAGS
flags.DEFINE_list("methods", ["base", "cot", "sc", "sc_cot"], "Methods (registry names).")
flags.DEFINE_list("benchmarks", ["humaneval_plus", "math", "mmlu_redux"], "Benchmarks.")
flags.DEFINE_list("pools", ["gpt-5-mini", "qwen3-80b"], "Table 1 settings (strong backbone).")
flags.DEFINE_string("split", "test", "Which saved split to evaluate on: train, val or test.")
flags.DEFINE_integer("seed", 0, "The run's one seed (also the embedded sim's seed).")
flags.DEFINE_integer("limit", None, "Only the first N items of each benchmark's split (quick runs).")
flags.DEFINE_string("out_dir", str(RESULTS_DIR), "Where table1.md / table1.json are written.")
flags.DEFINE_string("run_root", str(REPO_DIR / "runs" / "table1"), "Parent of the per-cell run directories.")
flags.DEFINE_integer("max_queries", 32, "Most queries in flight at once (one global bound).", lower_bound=1)
flags.DEFINE_bool("wandb", True, "Mirror cell summaries to W&B (mode from WANDB_MODE, default offline).")
flags.DEFINE_bool("progress", True, "Show progress bars.")
define_backend_flags()

RUN_FLAGS = ("methods", "benchmarks", "pools", "split", "seed", "limit", "out_dir", "run_root",
             "max_queries", "wandb") + BACKEND_FLAG_NAMES


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  logging.getLogger().setLevel(logging.INFO)
  spec = run_or_exit(lambda: Table1Spec(tuple(FLAGS.methods), tuple(FLAGS.benchmarks), tuple(FLAGS.pools),
                                        FLAGS.split, FLAGS.seed, FLAGS.limit), (InvalidRunError,))
  run_flags = selected_flags(FLAGS, RUN_FLAGS)

  async def go():
    async with open_backend(FLAGS, seed=spec.seed) as backend:
      writers = [ConsoleWriter("table1")]
      if FLAGS.wandb:
        writers.append(WandbWriter(FLAGS.run_root, run_flags, name=f"table1-seed{spec.seed}",
                                   group="table1"))
      try:
        return await run_table1(spec, backend, out_dir=FLAGS.out_dir, run_root=FLAGS.run_root,
                                flags=run_flags, max_queries=FLAGS.max_queries, writers=writers,
                                progress=FLAGS.progress)
      finally:
        for w in writers:
          w.close()

  record = run_or_exit(lambda: aio.run(go()), (InvalidRunError, RunConfigMismatchError))
  print(f"wrote {FLAGS.out_dir}/{table1_stem(spec)}.md and .json; averages: "
        + ", ".join(f"{m}={a:.2f}%" for m, a in record["averages"].items()))


if __name__ == "__main__":
  app.run(main, flags_parser=parse_flags_or_exit)

"""Measure the simulated pool's Base accuracy per model and benchmark against its calibration table.

  python experiments/calibrate_sim.py --seed=0          # make calibrate

Writes <out_dir>/calibration.json and calibration.md (target vs measured, diff, n, source, flag for
cells more than --tolerance points off). Runs the real Base pipeline over HTTP with the real graders;
see hieramas_jax/experiment/calibration.py for the items used.
"""

from __future__ import annotations

import logging

from absl import app, flags

from hieramas_jax import aio
from hieramas_jax.benchmarks.data import BENCHMARKS, check_benchmark
from hieramas_jax.experiment.backend import BACKEND_FLAG_NAMES, open_backend
from hieramas_jax.experiment.calibration import DEFAULT_TOLERANCE_PTS, check_models, run_calibration
from hieramas_jax.experiment.cli import parse_flags_or_exit, run_or_exit, selected_flags
from hieramas_jax.experiment.table1 import RunConfigMismatchError
from hieramas_jax.llm.endpoint import define_backend_flags
from hieramas_jax.llm.registry import MODELS
from hieramas_jax.paths import REPO_DIR, RESULTS_DIR

FLAGS = flags.FLAGS
flags.DEFINE_list("models", list(MODELS), "Models to measure (default: the whole registry).")
flags.DEFINE_list("benchmarks", list(BENCHMARKS), "Benchmarks.")
flags.DEFINE_integer("n_items", 500, "Items per benchmark (all when it has fewer; MMLU-Redux: a seeded "
                     "sample).", lower_bound=1)
flags.DEFINE_integer("code_samples", 3, "HumanEval+ repeats (sample indices 0..k-1).", lower_bound=1)
flags.DEFINE_integer("seed", 0, "Seed of the item sample and of the embedded sim.")
flags.DEFINE_float("tolerance", DEFAULT_TOLERANCE_PTS, "Points off target that flag a cell.")
flags.DEFINE_string("out_dir", str(RESULTS_DIR), "Where calibration.json / .md are written.")
flags.DEFINE_string("run_root", str(REPO_DIR / "runs" / "calibration"), "Per-cell run directories.")
flags.DEFINE_integer("max_queries", 64, "Most queries in flight at once.", lower_bound=1)
flags.DEFINE_bool("progress", True, "Show progress bars.")
define_backend_flags()

RUN_FLAGS = ("models", "benchmarks", "n_items", "code_samples", "seed", "tolerance", "out_dir", "run_root",
             "max_queries") + BACKEND_FLAG_NAMES


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  logging.getLogger().setLevel(logging.INFO)

  def validate():
    for b in FLAGS.benchmarks:
      check_benchmark(b)
    return check_models(FLAGS.models)
  models = run_or_exit(validate)

  async def go():
    async with open_backend(FLAGS, seed=FLAGS.seed) as backend:
      return await run_calibration(backend, models=models, benchmarks=FLAGS.benchmarks, n_items=FLAGS.n_items,
                                   code_samples=FLAGS.code_samples, seed=FLAGS.seed, out_dir=FLAGS.out_dir,
                                   run_root=FLAGS.run_root, flags=selected_flags(FLAGS, RUN_FLAGS),
                                   tolerance=FLAGS.tolerance, max_queries=FLAGS.max_queries,
                                   progress=FLAGS.progress)

  record = run_or_exit(lambda: aio.run(go()), (RunConfigMismatchError,))
  print(f"wrote {FLAGS.out_dir}/calibration.md; {record['n_off']} of {len(record['cells'])} cells off by more "
        f"than {FLAGS.tolerance:g} points (largest {record['max_abs_diff']:.2f})")


if __name__ == "__main__":
  app.run(main, flags_parser=parse_flags_or_exit)

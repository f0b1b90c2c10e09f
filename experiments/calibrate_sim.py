"""Measure the simulated pool through the real pipeline: fit rows, validation, collaboration, cost.

  python experiments/calibrate_sim.py --seed=0          # make calibrate (all sections)
  python experiments/calibrate_sim.py --sections=single --n_items=200 --out_dir=/tmp/cal   # a quick look

Writes <out_dir>/calibration.json and calibration.md (`report/calibration.py`); see
hieramas_jax/experiment/calibration.py for the sections and the items used. Each cell has a resumable run
directory under --run_root.
"""

from __future__ import annotations

from absl import flags

from hieramas_jax import aio
from hieramas_jax.benchmarks.data import BENCHMARKS, check_benchmark
from hieramas_jax.experiment import cli
from hieramas_jax.experiment.backend import BACKEND_FLAG_NAMES
from hieramas_jax.experiment.calibration import (DEFAULT_TOLERANCE_PTS, SECTIONS, check_models, check_sections,
                                                 run_calibration)
from hieramas_jax.experiment.cli import open_backends, refuse_cut_run, selected_flags
from hieramas_jax.experiment.console import define_verbose_flag
from hieramas_jax.experiment.constant_sensitivity import constant_sensitivity
from hieramas_jax.experiment.rundir import repo_relative
from hieramas_jax.experiment.spec import InvalidRunError
from hieramas_jax.experiment.writers import log_result_run
from hieramas_jax.llm.endpoint import define_backend_flags
from hieramas_jax.llm.registry import MODELS
from hieramas_jax.paths import REPO_DIR, RESULTS_DIR
from hieramas_jax.report.calibration import write_calibration

FLAGS = flags.FLAGS
flags.DEFINE_list("models", list(MODELS), "Models of the `single` section (default: the whole registry).")
flags.DEFINE_list("benchmarks", list(BENCHMARKS), "Benchmarks.")
flags.DEFINE_list("sections", list(SECTIONS), f"Sections to measure: {', '.join(SECTIONS)}.")
flags.DEFINE_integer("n_items", 3000, "Items per benchmark (all when it has fewer; MMLU-Redux: a seeded sample).",
                     lower_bound=1)
flags.DEFINE_integer("collab_items", 300, "Items per benchmark of the collaboration table.", lower_bound=1)
flags.DEFINE_list("code_seeds", ["0", "1", "2", "3", "4"], "Sim seeds for HumanEval+ (independent simulated "
                  "worlds); the first is the seed of every other benchmark.")
flags.DEFINE_integer("seed", 0, "Seed of the item samples.")
flags.DEFINE_float("tolerance", DEFAULT_TOLERANCE_PTS, "Points off target that flag a cell.")
flags.DEFINE_string("out_dir", str(RESULTS_DIR), "Where calibration.json / .md are written.")
flags.DEFINE_string("run_root", str(REPO_DIR / "runs" / "calibration"), "Per-cell run directories.")
flags.DEFINE_integer("max_queries", 64, "Most queries in flight at once.", lower_bound=1)
flags.DEFINE_bool("constants", True, "Also compute what each hand-chosen constant of the embedded sim moves (low and "
                  "high alternatives, in process, a few minutes; --backend=sim only).")
flags.DEFINE_bool("progress", True, "Show progress bars.")
flags.DEFINE_bool("wandb", True, "Log calibration.json as a W&B run (offline unless WANDB_MODE=online or "
                  "WANDB_API_KEY is set).")
define_backend_flags()
define_verbose_flag()

# Flags that cut the calibration down from the full one results/calibration.json holds.
PARTIAL_FLAGS = ("models", "benchmarks", "sections", "n_items", "collab_items", "code_seeds", "constants")
RUN_FLAGS = ("models", "benchmarks", "sections", "n_items", "collab_items", "code_seeds", "seed", "tolerance",
             "out_dir", "run_root", "max_queries", "wandb", "constants") + BACKEND_FLAG_NAMES


def check_flags() -> tuple[list[str], list[str], list[int]]:
  """The models, sections and sim seeds the flags ask for, checked before anything runs."""
  for b in FLAGS.benchmarks:
    check_benchmark(b)
  try:
    seeds = [int(s) for s in FLAGS.code_seeds]
  except ValueError:
    raise InvalidRunError(f"--code_seeds must be integers, got {','.join(FLAGS.code_seeds)}") from None
  if not seeds:
    raise InvalidRunError("--code_seeds needs at least one seed")
  # A cut-down calibration (a quick look) would overwrite the committed full one: it names its own --out_dir.
  refuse_cut_run(FLAGS, PARTIAL_FLAGS, out_flag="out_dir",
                 overwrites=f"{repo_relative(FLAGS.out_dir)}/calibration.json")
  return check_models(FLAGS.models), check_sections(FLAGS.sections), seeds


def main():
  models, sections, seeds = check_flags()

  async def go():
    async with open_backends(FLAGS, seeds, use_cache=False) as backends:
      return await run_calibration(backends, models=models, benchmarks=FLAGS.benchmarks, n_items=FLAGS.n_items,
                                   collab_items=FLAGS.collab_items, code_seeds=seeds, seed=FLAGS.seed,
                                   run_root=FLAGS.run_root, flags=selected_flags(FLAGS, RUN_FLAGS), sections=sections,
                                   tolerance=FLAGS.tolerance, max_queries=FLAGS.max_queries, progress=FLAGS.progress,
                                   profile=FLAGS.sim_profile,
                                   constants=constant_sensitivity if FLAGS.constants and FLAGS.backend == "sim"
                                   and not FLAGS.base_url and not FLAGS.pool_file else None)

  record = aio.run(go())
  write_calibration(record, FLAGS.out_dir)
  if FLAGS.wandb:
    log_result_run(f"{FLAGS.out_dir}/calibration.json", record, job_type="calibration", name="calibration",
                   group=f"calibration/{record['endpoint']}", config=selected_flags(FLAGS, RUN_FLAGS),
                   extra_files=[f"{FLAGS.out_dir}/calibration.md"])
  summary = [f"wrote {FLAGS.out_dir}/calibration.md"]
  if "fit" in record:
    summary.append(f"fit: {record['fit']['n_outside']} of {len(record['fit']['cells'])} cells outside "
                   f"{FLAGS.tolerance:g} points")
  if "validation" in record:
    fg = record["validation"]["full_graph"]
    summary.append(f"Full-Graph average {fg['average']:.2f} (paper {fg['target']:.2f})")
  if "constant_sensitivity" in record:
    summary.append(f"constant sensitivity in {record['constant_sensitivity']['seconds']:.0f} s")
  if "single" in record:
    summary.append(f"single: {record['single']['n_off']} of {len(record['single']['cells'])} cells off")
  print("; ".join(summary))


if __name__ == "__main__":
  cli.run(main)

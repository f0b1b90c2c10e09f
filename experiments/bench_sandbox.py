"""Benchmark: what isolating HumanEval+ programs under bubblewrap costs in grading throughput.

  python experiments/bench_sandbox.py            # writes results/bench.json key "sandbox" (make bench)
  python experiments/bench_sandbox.py --tasks=24 --out=/tmp/bench.json   # a quick look

Both modes (bubblewrap and the fallback) grade the canonical solutions in ABBA passes; with
--timing_checks, how long the sandbox takes to stop runaways and to replay a cached grade. What is
measured and how: `hieramas_jax.bench.sandbox`. Exits 1 if a canonical solution failed.
"""

from __future__ import annotations

import sys

from absl import flags

from hieramas_jax.bench import sandbox
from hieramas_jax.bench.results import BENCH_FILE
from hieramas_jax.experiment import cli
from hieramas_jax.experiment.cli import selected_flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("blocks", 1, "ABBA blocks: each grades all 164 tasks twice per mode", lower_bound=1)
flags.DEFINE_integer("startup_runs", 20, "sequential runs of one light task per mode, for the per-run cost",
                     lower_bound=1)
flags.DEFINE_string("out", None, "output JSON (default results/bench.json)")
flags.DEFINE_integer("tasks", 0, "grade only the first N tasks in the passes (0: all 164)", lower_bound=0)
flags.DEFINE_bool("timing_checks", True, "also time the stops and the cached replay (`timing_checks`)")

PROVENANCE_FLAGS = ("blocks", "startup_runs", "tasks", "timing_checks")


def main():
  record = sandbox.run(blocks=FLAGS.blocks, startup_runs=FLAGS.startup_runs, tasks=FLAGS.tasks,
                       with_timing=FLAGS.timing_checks, out=FLAGS.out or str(BENCH_FILE),
                       flags=selected_flags(FLAGS, PROVENANCE_FLAGS))
  if not record["all_canonical_passed"]:
    sys.exit(1)


if __name__ == "__main__":
  cli.run(main)

"""Timing benchmark: the wall-clock figures the unit tests no longer assert (`hieramas_jax.bench.timing`).

Writes `results/bench.json` key `timing` (with provenance): the MAS runtime's wall over its critical path
on a diamond DAG, the Retry-After waits, the time to give up on an unreachable endpoint.

Run: `python experiments/bench_timing.py` (or `make bench`).
"""

from __future__ import annotations

from absl import flags

from hieramas_jax.bench import timing
from hieramas_jax.bench.results import BENCH_FILE
from hieramas_jax.experiment import cli
from hieramas_jax.experiment.cli import selected_flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("repeats", 5, "Runs per figure (median, min and max reported).")
flags.DEFINE_float("latency_s", 0.15, "Latency of every fake call in the MAS diamond (the old test's 0.15 s).")
flags.DEFINE_string("out", str(BENCH_FILE), "Results file (key `timing`).")

PROVENANCE_FLAGS = ("repeats", "latency_s")


def main():
  timing.run(repeats=FLAGS.repeats, latency_s=FLAGS.latency_s, out=FLAGS.out,
             flags=selected_flags(FLAGS, PROVENANCE_FLAGS))


if __name__ == "__main__":
  cli.run(main)

"""Response-store benchmark: open and lookup at 10k, 100k and 1M entries, the JSONL shards against sqlite.

Writes `results/bench.json` key `cache` (with provenance); what is measured and how:
`hieramas_jax.bench.cache`. Goals (issue 11): open <= 50 ms and lookup <= 100 us at 1M entries, memory
independent of the size.

Run: `python experiments/bench_cache.py` (or `make bench`).
"""

from __future__ import annotations

from absl import flags

from hieramas_jax.bench import cache
from hieramas_jax.bench.results import BENCH_FILE
from hieramas_jax.errors import UserError
from hieramas_jax.experiment import cli
from hieramas_jax.experiment.cli import selected_flags

FLAGS = flags.FLAGS
flags.DEFINE_list("sizes", ["10000", "100000", "1000000"], "Store sizes (entries).")
flags.DEFINE_integer("repeats", 3, "Fresh processes per open measurement (median reported).")
flags.DEFINE_integer("jsonl_repeats", 1, "Fresh processes per JSONL open (the slow baseline: seconds, not ms).")
flags.DEFINE_integer("lookups", 10_000, "Random stored keys (and as many absent ones) looked up per open.")
flags.DEFINE_integer("seed", 0, "Seeds the synthetic records and the lookup order.")
flags.DEFINE_string("workdir", None, "Scratch directory (default: a new temp dir, removed afterwards).")
flags.DEFINE_string("out", str(BENCH_FILE), "Results file (key `cache`).")

PROVENANCE_FLAGS = ("sizes", "repeats", "jsonl_repeats", "lookups", "seed")


def main():
  try:
    sizes = [int(s) for s in FLAGS.sizes]
  except ValueError:
    raise UserError(f"--sizes must be integers, got {','.join(FLAGS.sizes)}") from None
  cache.run(sizes=sizes, repeats=FLAGS.repeats, jsonl_repeats=FLAGS.jsonl_repeats, lookups=FLAGS.lookups,
            seed=FLAGS.seed, workdir=FLAGS.workdir, out=FLAGS.out, flags=selected_flags(FLAGS, PROVENANCE_FLAGS))


if __name__ == "__main__":
  cli.run(main)

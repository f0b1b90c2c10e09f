"""Sentence-encoder benchmark: today's torch path against the ONNX Runtime backends, same weights.

Writes `results/bench.json` key `encoder` (with provenance): texts per second of each backend on a fixed
sample, and how closely its embeddings (and a fixed policy's choices on them) agree with torch's. Goals
(issue 11): >= 3x today's texts/s on 2 cores, min cosine >= 0.99, the same policy choices.
`--composition` measures instead one text per forward pass against batched calls (key
`encoder_composition`). What is measured and how: `hieramas_jax.bench.encoder`.

Run: `python experiments/bench_encoder.py` (or `make bench`).
`--write_reference=tests/data/encoder_reference` rewrites the test's stored reference embeddings instead.
"""

from __future__ import annotations

import pathlib

from absl import flags

from hieramas_jax.bench import encoder
from hieramas_jax.bench.results import BENCH_FILE
from hieramas_jax.experiment import cli
from hieramas_jax.experiment.cli import selected_flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("per_benchmark", 128, "Query-role texts per benchmark in the sample.")
flags.DEFINE_integer("reps", 3, "Interleaved rounds of every backend.")
flags.DEFINE_list("backends", ["torch", "onnx", "onnx-int8"], "Backends to measure (torch first: the reference).")
flags.DEFINE_integer("seed", 0, "Picks the sample's items and the policy checkpoint's initialisation.")
flags.DEFINE_string("pool", "gpt-5-mini", "Pool whose profiles are embedded and which the policy chooses from.")
flags.DEFINE_string("out", str(BENCH_FILE), "Results file (key `encoder`).")
flags.DEFINE_bool("composition", False, "Measure one text per pass against batched calls (key encoder_composition).")
flags.DEFINE_string("write_reference", None, "Write the test's reference sample (texts + torch embeddings) here.")

PROVENANCE_FLAGS = ("per_benchmark", "reps", "backends", "seed", "pool")
COMPOSITION_PROVENANCE_FLAGS = ("per_benchmark", "reps", "seed", "pool", "composition")


def main():
  if FLAGS.write_reference:
    encoder.write_reference(pathlib.Path(FLAGS.write_reference), seed=FLAGS.seed, pool=FLAGS.pool)
  elif FLAGS.composition:
    encoder.run_composition(per_benchmark=FLAGS.per_benchmark, reps=FLAGS.reps, seed=FLAGS.seed, pool=FLAGS.pool,
                            out=FLAGS.out, flags=selected_flags(FLAGS, COMPOSITION_PROVENANCE_FLAGS))
  else:
    encoder.run(per_benchmark=FLAGS.per_benchmark, reps=FLAGS.reps, backends=FLAGS.backends, seed=FLAGS.seed,
                pool=FLAGS.pool, out=FLAGS.out, flags=selected_flags(FLAGS, PROVENANCE_FLAGS))


if __name__ == "__main__":
  cli.run(main)

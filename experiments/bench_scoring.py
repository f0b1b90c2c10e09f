r"""Benchmark: scoring K candidate graphs for a batch of queries, JAX vs PyTorch (issue 3, item 9).

  python experiments/bench_scoring.py            # writes results/bench.json key "scoring"

The same GCN scorer with the same weights as one jitted JAX call, a reference-style torch loop and the
best batched torch version (eager and compiled), outputs checked to agree; plus one query against
K = 10,000 candidates. What is measured and how: `hieramas_jax.bench.scoring`.
"""

from __future__ import annotations

from absl import flags

from hieramas_jax.bench import scoring
from hieramas_jax.bench.results import BENCH_FILE
from hieramas_jax.experiment import cli
from hieramas_jax.experiment.cli import selected_flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("num_graphs", 200, "K candidates per query")
flags.DEFINE_integer("num_queries", 64, "Q queries per call")
flags.DEFINE_integer("num_nodes", 8, "N roles (MMLU-Redux has 8)")
flags.DEFINE_integer("dim", 384, "embedding width D")
flags.DEFINE_integer("hidden", 128, "GCN width H")
flags.DEFINE_integer("repeats", 30, "timed repeats for the batched scorers")
flags.DEFINE_integer("loop_repeats", 3, "timed repeats for the torch loop (each scores all Q x K pairs)")
flags.DEFINE_integer("big_k", 10_000, "K for the single-query large-pool measurement")
flags.DEFINE_integer("seed", 0, "seed for the pool, the embeddings and the weights")
flags.DEFINE_bool("torch_compile", True, "also time torch.compile of the batched torch scorer; "
                  "speedup_vs_torch_batched uses the faster of eager and compiled")
flags.DEFINE_string("out", None, "output JSON (default results/bench.json)")

PROVENANCE_FLAGS = ("num_graphs", "num_queries", "num_nodes", "dim", "hidden", "repeats", "loop_repeats", "big_k",
                    "seed", "torch_compile")


def main():
  scoring.run(num_graphs=FLAGS.num_graphs, num_queries=FLAGS.num_queries, num_nodes=FLAGS.num_nodes, dim=FLAGS.dim,
              hidden=FLAGS.hidden, repeats=FLAGS.repeats, loop_repeats=FLAGS.loop_repeats, big_k=FLAGS.big_k,
              seed=FLAGS.seed, torch_compile=FLAGS.torch_compile, out=FLAGS.out or str(BENCH_FILE),
              flags=selected_flags(FLAGS, PROVENANCE_FLAGS))


if __name__ == "__main__":
  cli.run(main)

"""Executor benchmark: how close the LLM layer and the MAS runtime get to the transport's limits.

Writes `results/bench.json` key `executor` (with provenance): (b) calls per second of LLMClient against
the openai SDK and a bare aiohttp loop, zero sim latency; (a) the MAS runtime's wall over the critical
path with many queries in flight through a depth-3 DAG, against a bare reference executor, on the sim and
on a null server. What is measured and how: `hieramas_jax.bench.executor`.

Run: `python experiments/bench_executor.py` (or `make bench`).
"""

from __future__ import annotations

from absl import flags

from hieramas_jax.bench import executor
from hieramas_jax.bench.results import BENCH_FILE
from hieramas_jax.experiment import cli
from hieramas_jax.experiment.cli import selected_flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("seed", 0, "Sim seed and client jitter seed.")
flags.DEFINE_integer("concurrency", 64, "Requests in flight for the throughput part (all three clients).")
flags.DEFINE_integer("calls", 3000, "Calls per round for LLMClient and the bare loop.")
flags.DEFINE_integer("sdk_calls", 600, "Calls per round for the (slower) openai SDK.")
flags.DEFINE_integer("reps", 3, "Interleaved rounds of the three clients.")
flags.DEFINE_integer("queries", 200, "Queries in flight for the latency-bound part.")
flags.DEFINE_float("latency_s", 0.5, "Fixed sim latency per call for the latency-bound part.")
flags.DEFINE_integer("latency_reps", 3, "Interleaved rounds of this runtime and the bare reference in part (a).")
flags.DEFINE_enum("parts", "ab", list(executor.PARTS), "Which parts to run.")
flags.DEFINE_enum("runner", "aio", list(executor.RUNNERS), "How every client of the run is run (both executors "
                  "and all three throughput clients alike): `aio.run` as the entry points do (uvloop, fewer GC "
                  "passes) or plain `asyncio.run`.")
flags.DEFINE_string("out", str(BENCH_FILE), "Results file (key `executor`).")

SETTINGS_FLAGS = ("seed", "concurrency", "calls", "sdk_calls", "reps", "queries", "latency_s", "latency_reps",
                  "runner")
PROVENANCE_FLAGS = ("seed", "concurrency", "calls", "sdk_calls", "reps", "queries", "latency_s", "latency_reps",
                    "parts", "runner")


def main():
  executor.run(executor.Settings(**selected_flags(FLAGS, SETTINGS_FLAGS)), parts=FLAGS.parts, out=FLAGS.out,
               flags=selected_flags(FLAGS, PROVENANCE_FLAGS))


if __name__ == "__main__":
  cli.run(main)

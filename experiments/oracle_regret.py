"""Best static configuration (oracle), random configurations and regret of HieraMAS, on the simulated pool.

  python experiments/oracle_regret.py --benchmarks=humaneval_plus,math,mmlu_redux --pools=gpt-5-mini
  python experiments/oracle_regret.py --benchmarks=math --budget=600 --limit=30 --results_dir=/tmp/r

Per benchmark and pool: successive halving over static configurations on the train+val split, the
winner and uniformly random configurations measured on the test split, the trained HieraMAS result
read from results/hieramas_<benchmark>_<pool>.json when it exists. Writes (merging with entries
already there) <results_dir>/regret.json and regret.md. Every query is cached in the run directory
(--run_root), so an interrupted run resumes and a rerun only re-reads the learned result.
"""

from __future__ import annotations

import logging
import signal
import sys

from absl import app, flags

from hieramas_jax import aio
from hieramas_jax.experiment import oracle
from hieramas_jax.experiment.backend import BACKEND_FLAG_NAMES, open_backend, sim_endpoint_name
from hieramas_jax.experiment.cli import parse_flags_or_exit, run_or_exit, selected_flags
from hieramas_jax.experiment.provenance import atomic_write_text, provenance
from hieramas_jax.experiment.table1 import RunConfigMismatchError
from hieramas_jax.llm.endpoint import define_backend_flags
from hieramas_jax.paths import REPO_DIR, RESULTS_DIR
from hieramas_jax.sim.server import SimConfig, start_sim_subprocess

FLAGS = flags.FLAGS
flags.DEFINE_list("benchmarks", ["humaneval_plus", "math", "mmlu_redux"], "Benchmarks.")
flags.DEFINE_list("pools", ["gpt-5-mini"], "Pool settings (gpt-5-mini, qwen3-80b).")
flags.DEFINE_integer("seed", 0, "The run's one seed (graph pool, candidates, mutants, order; also the sim's).")
flags.DEFINE_integer("budget", 8000, "Search budget per benchmark: (configuration x item) queries on the "
                     "search split.", lower_bound=1)
flags.DEFINE_integer("num_proposers", 2, "W, proposer positions per supernode (reference: 2).", lower_bound=0)
flags.DEFINE_integer("num_random_graphs", 30, "Random DAGs in the graph pool (plus chain, star, full).",
                     lower_bound=0)
flags.DEFINE_integer("max_search_items", 200, "The search uses a seeded random subset of at most this many "
                     "train+val items.", lower_bound=1)
flags.DEFINE_integer("min_items", 8, "Items in the first successive-halving rung.", lower_bound=1)
flags.DEFINE_integer("max_search_samples", 1, "Sample indices per item in the last rungs of the search.",
                     lower_bound=1)
flags.DEFINE_integer("min_finalists", 3, "A rung never keeps fewer configurations than this.", lower_bound=1)
flags.DEFINE_float("eta", 3.0, "Each rung keeps the best 1/eta and multiplies the items by eta.")
flags.DEFINE_float("mutant_share", 0.5, "Mutants of the survivors added per rung, as a share of them.")
flags.DEFINE_float("sparse_share", 0.5, "Share of random candidates from the sparse family (rest uniform).")
flags.DEFINE_integer("test_samples", 4, "Sample indices the winner runs on each test item.", lower_bound=1)
flags.DEFINE_integer("random_draws_per_item", 4, "Uniformly random configurations per test item.",
                     lower_bound=1)
flags.DEFINE_float("holdout_share", 1 / 3, "Share of the search subset held out of the race; the race's best "
                   "--holdout_finalists are re-ranked on it alone (0: the race's best wins).")
flags.DEFINE_integer("holdout_finalists", 5, "Finalists re-ranked on the holdout.", lower_bound=1)
flags.DEFINE_list("search_splits", ["train", "val"], "Splits the search may see (never test).")
flags.DEFINE_integer("limit", None, "Only the first N items of each split (smoke runs).")
flags.DEFINE_integer("max_queries", 64, "Most queries in flight at once (one global bound).", lower_bound=1)
flags.DEFINE_bool("response_cache", False, "Also keep every LLM response in the on-disk response cache "
                  "(off: the oracle's own per-query cache already makes it resumable).")
flags.DEFINE_string("run_root", str(REPO_DIR / "runs" / "oracle"), "Parent of the per-benchmark run dirs.")
flags.DEFINE_string("results_dir", str(RESULTS_DIR), "Where regret.json / regret.md are written, and where "
                    "hieramas_<benchmark>_<pool>.json are read from.")
flags.DEFINE_bool("progress", True, "Show progress bars.")
flags.DEFINE_bool("sim_process", True, "With --backend=sim and no --base_url: serve the sim from its own "
                  "process (its own core; the search is CPU-bound on both sides) instead of a thread.")
define_backend_flags()

RUN_FLAGS = ("benchmarks", "pools", "seed", "budget", "num_proposers", "num_random_graphs", "max_search_items",
             "min_items", "max_search_samples", "min_finalists", "eta",
             "mutant_share", "sparse_share", "test_samples", "random_draws_per_item", "holdout_share",
             "holdout_finalists", "search_splits", "limit",
             "max_queries", "response_cache", "run_root", "results_dir", "sim_process") + BACKEND_FLAG_NAMES


class _WithBaseUrl:
  """The flags, with --base_url pointing at the sim process this script started."""

  def __init__(self, flag_values, base_url: str):
    self._flags, self.base_url = flag_values, base_url

  def __getattr__(self, name):
    return getattr(self._flags, name)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  logging.getLogger().setLevel(logging.INFO)
  # A plain SIGTERM would skip the `finally` that stops the sim process; exit through it instead.
  signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
  specs = run_or_exit(lambda: [
      oracle.OracleSpec(b, p, seed=FLAGS.seed, budget=FLAGS.budget, num_proposers=FLAGS.num_proposers,
                        num_random_graphs=FLAGS.num_random_graphs,
                        max_search_items=FLAGS.max_search_items, min_items=FLAGS.min_items, eta=FLAGS.eta,
                        max_search_samples=FLAGS.max_search_samples, min_finalists=FLAGS.min_finalists,
                        mutant_share=FLAGS.mutant_share, sparse_share=FLAGS.sparse_share,
                        test_samples=FLAGS.test_samples, random_draws_per_item=FLAGS.random_draws_per_item,
                        holdout_share=FLAGS.holdout_share, holdout_finalists=FLAGS.holdout_finalists)
      for p in FLAGS.pools for b in FLAGS.benchmarks], (oracle.OracleError,))
  run_flags = selected_flags(FLAGS, RUN_FLAGS)

  async def go():
    backend_flags, endpoint_name, handle = FLAGS, None, None
    if FLAGS.backend == "sim" and not FLAGS.base_url and FLAGS.sim_process:
      # Named (with the sim's code + data fingerprint) before the sim starts: that is the sim that runs.
      # The same name as the in-thread sim's: cached outcomes stay valid across both ways.
      endpoint_name = sim_endpoint_name(FLAGS.seed)
      handle = start_sim_subprocess(SimConfig(seed=FLAGS.seed))
      backend_flags = _WithBaseUrl(FLAGS, handle.base_url)
    try:
      return await run_all(backend_flags, endpoint_name)
    finally:
      if handle is not None:
        handle.close()

  async def run_all(backend_flags, endpoint_name):
    async with open_backend(backend_flags, seed=FLAGS.seed, use_cache=FLAGS.response_cache) as backend:
      record = None
      for spec in specs:
        entry = await oracle.run_benchmark(
            spec, backend.client, endpoint_name=endpoint_name or backend.endpoint.name, run_root=FLAGS.run_root,
            search_splits=tuple(FLAGS.search_splits), limit=FLAGS.limit, max_queries=FLAGS.max_queries,
            progress=FLAGS.progress)
        entry["provenance"] = provenance(seed=FLAGS.seed, benchmarks=[spec.benchmark], flags=run_flags,
                                         backend=backend.label)
        entry = oracle.with_regret(entry, FLAGS.results_dir)
        # Written after every benchmark, so a long run's finished benchmarks are never lost.
        record = oracle.merge_regret_file(f"{FLAGS.results_dir}/regret.json",
                                          {oracle.entry_key(spec.benchmark, spec.pool): entry},
                                          label=entry["provenance"].get("label", backend.label))
        atomic_write_text(f"{FLAGS.results_dir}/regret.md", oracle.regret_markdown(record))
        logging.info("%s/%s: oracle %.4f, random %.4f, learned %s, regret %s, %d configurations searched",
                     spec.benchmark, spec.pool, entry["oracle_reward"], entry["random_reward"],
                     entry["learned_reward"], entry["regret"], entry["configurations_searched"])
      return record

  record = run_or_exit(lambda: aio.run(go()), (oracle.OracleError, RunConfigMismatchError))
  print(f"wrote {FLAGS.results_dir}/regret.json and regret.md:")
  for key, e in record["entries"].items():
    print(f"  {key}: oracle={e['oracle_reward']:.4f} random={e['random_reward']:.4f} "
          f"learned={e['learned_reward']} regret={e['regret']}")


if __name__ == "__main__":
  app.run(main, flags_parser=parse_flags_or_exit)

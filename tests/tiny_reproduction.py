"""The one tiny reproduction the end-to-end tests share (the `tiny_reproduction` fixture in conftest.py).

Training even a tiny HieraMAS (JAX compiles of the policy and the scorer, a few stage-1 and stage-2 steps
against the sim over real HTTP) is the costliest thing a test does. The runner's every-method table
(tests/test_runner.py) and the report pages (tests/test_report_pages.py) each used to train their own with
the same budget on the same queries; they now share this one: Base and HieraMAS on MMLU-Redux
(6 training, 3 validation, 3 test queries, gpt-5-mini pool, seed 0), trained once per session.

tests/test_hieramas_pipeline.py keeps its own reference run: its configuration differs on purpose (3
stage-1 steps with a checkpoint per step, 3 stage-2 graphs per query, 2 validation queries), and its
assertions (the steps logged, a kill at step 2 resuming from step 1's checkpoint) are about those.
"""

from __future__ import annotations

import asyncio
import dataclasses
import pathlib
from typing import Any

BENCHMARK, POOL, SEED = "mmlu_redux", "gpt-5-mini", 0
TRAIN, VAL, TEST = 6, 3, 3
MAX_QUERIES = 8
# Each stage a couple of real steps: enough to exercise checkpoints, curves and the learned choice.
TINY_HIERAMAS = {"stage1_steps": 2, "stage1_batch": 2, "stage1_samples": 2, "stage1_val_every": 2, "k_pool": 8,
                 "stage2_graphs": 2, "stage2_epochs": 2, "stage2_batch": 4}
METHODS = ("base", "hieramas")


def spec(methods, options, **kwargs):
  """The tiny table of `methods` (MMLU-Redux 6/3/3, gpt-5-mini, seed 0) with per-method `options`."""
  from hieramas_jax.experiment.spec import TableSpec  # pylint: disable=import-outside-toplevel
  return TableSpec(methods=tuple(methods), benchmarks=(BENCHMARK,), pools=(POOL,), setting="main", seeds=(SEED,),
                   train_limit={BENCHMARK: TRAIN}, val_limit=VAL, test_limit=TEST,
                   method_options={m: o for m, o in options.items() if o}, **kwargs)


async def run(sim, table_spec, run_root: pathlib.Path, *, client_wrapper=None, cache_dir=None) -> dict[str, Any]:
  """Runs `table_spec` against `sim` under `run_root` (finished cells there are resumed, not rerun)."""
  # pylint: disable=import-outside-toplevel
  from hieramas_jax.experiment.backend import Backend
  from hieramas_jax.experiment.runner import run_table
  from hieramas_jax.llm.cache import ResponseCache
  from hieramas_jax.llm.client import LLMClient
  from hieramas_jax.llm.endpoint import sim_endpoint
  endpoint = sim_endpoint(sim.base_url)
  cache = ResponseCache(cache_dir) if cache_dir else None
  try:
    async with LLMClient(endpoint, cache=cache) as client:
      wrapped = client if client_wrapper is None else client_wrapper(client)
      return await run_table(table_spec, {SEED: Backend(wrapped, endpoint, cache)}, run_root=run_root, flags={},
                             max_queries=MAX_QUERIES, progress=False)
  finally:
    if cache is not None:
      cache.close()


@dataclasses.dataclass(frozen=True)
class Reproduction:
  """A finished tiny reproduction: its run root (more cells may be added there) and its table record."""

  sim: Any
  run_root: pathlib.Path
  table: dict[str, Any]


def reproduce(sim, run_root: pathlib.Path) -> Reproduction:
  table = asyncio.run(run(sim, spec(METHODS, {"hieramas": TINY_HIERAMAS}), run_root))
  return Reproduction(sim, run_root, table)

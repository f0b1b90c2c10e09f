"""Fitting the simulated pool's collaboration parameters on published rows, fast and in-process.

The committed calibration (`experiment/calibration.py`) measures the sim through HTTP, the client
and the real graders. Choosing parameters needs thousands of such measurements, so this module runs
the *same methods and the same MAS runtime* against the behaviour model in-process
(`DirectSimClient`: the server's `completion()` without the socket) and grades with the sim's own
knowledge of which answer it gave (`sim_correct`: exact for the sim's texts, which carry the
answer in the benchmark format). The fitted values are then verified through the real pipeline.

The shortcut is the served sim, not a model of it: for the requests the suite's methods send (a plain
question, CoT, proposers' samples, a synthesis over candidates, an agent reading its predecessors, a
decision node), `DirectSimClient` returns byte-identical texts and the same usage and cost as the
runner's `LLMClient` over HTTP to `sim.server.start_sim_in_thread`
(tests/test_sim.py::test_the_fit_shortcut_answers_the_runners_requests_byte_for_byte). Only the
grading differs (`sim_correct` instead of the graders), and the calibration measures through those.

What is fitted, on what (docs/simulator.md):
- `RHO_TAU` and `ERROR_SHARED_SPREAD` on the Self-Consistency and SC+CoT rows of the paper's
  Table 1 (both backbones, three benchmarks), with the MMLU error-coincidence target as a penalty;
Base and CoT are fitted elsewhere (theta.json, COT_LOGIT_GAP). The aggregation mechanism (what a
reader does with candidates) is fitted mechanism-level on the published MoA / Self-MoA rows in
`experiment/aggregation_fit.py`; the paper's LLM-Debate row is no longer fitted (it is a
validation row). Nothing of Full-Graph, HieraMAS or the learned baselines enters a fit.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from hieramas_jax.benchmarks.data import Item, load_items
from hieramas_jax.llm.client import CallResult
from hieramas_jax.llm.registry import get_model, get_pool
from hieramas_jax.mas.runtime import RunSettings, run_mas
from hieramas_jax.methods.api import RunContext
from hieramas_jax.methods.registry import make_method
from hieramas_jax.sim import params as P
from hieramas_jax.sim import reading
from hieramas_jax.sim.model import BehaviourModel
from hieramas_jax.sim.server import SimConfig, completion

# The paper's Table 1 rows used as fit targets (percent; its own small test splits).
PAPER_ROWS: Mapping[str, Mapping[tuple[str, str], float]] = {
    "base": {("humaneval_plus", "gpt-5-mini"): 89.06, ("humaneval_plus", "qwen3-80b"): 84.14,
             ("math", "gpt-5-mini"): 77.78, ("math", "qwen3-80b"): 74.44,
             ("mmlu_redux", "gpt-5-mini"): 92.00, ("mmlu_redux", "qwen3-80b"): 82.40},
    "cot": {("humaneval_plus", "gpt-5-mini"): 87.50, ("humaneval_plus", "qwen3-80b"): 85.94,
            ("math", "gpt-5-mini"): 92.22, ("math", "qwen3-80b"): 90.00,
            ("mmlu_redux", "gpt-5-mini"): 93.60, ("mmlu_redux", "qwen3-80b"): 89.60},
    "sc": {("humaneval_plus", "gpt-5-mini"): 89.06, ("humaneval_plus", "qwen3-80b"): 87.50,
           ("math", "gpt-5-mini"): 93.33, ("math", "qwen3-80b"): 91.11,
           ("mmlu_redux", "gpt-5-mini"): 94.40, ("mmlu_redux", "qwen3-80b"): 83.20},
    "sc_cot": {("humaneval_plus", "gpt-5-mini"): 90.62, ("humaneval_plus", "qwen3-80b"): 85.94,
               ("math", "gpt-5-mini"): 94.44, ("math", "qwen3-80b"): 92.22,
               ("mmlu_redux", "gpt-5-mini"): 93.60, ("mmlu_redux", "qwen3-80b"): 92.80},
    "debate": {("humaneval_plus", "gpt-5-mini"): 87.50, ("humaneval_plus", "qwen3-80b"): 87.50,
               ("math", "gpt-5-mini"): 94.44, ("math", "qwen3-80b"): 94.44,
               ("mmlu_redux", "gpt-5-mini"): 92.80, ("mmlu_redux", "qwen3-80b"): 92.00},
}
# Validation, never fitted: Full-Graph's published average over the six cells (paper text).
FULL_GRAPH_AVERAGE = 92.78
COT_AVERAGE = 89.81
# The paper's SC+CoT average over the six cells (Table 1): Full-Graph's published sign is against it.
SC_COT_AVERAGE = 91.60
# Kim et al. 2025 ("Correlated Errors in Large Language Models"): on a leaderboard multiple-choice
# dataset, two models that both err pick the same wrong option about 60% of the time.
MMLU_ERROR_COINCIDENCE = 0.60

FITTED = ("RHO_TAU", "ERROR_SHARED_SPREAD")


class DirectSimClient:
  """An in-process stand-in for `LLMClient` over the behaviour model: no socket, no cache.

  Requests are shaped as `LLMClient` shapes them (models with a fixed temperature get none) and
  answered by the server's own `completion()`, so texts, tokens and costs are the server's.
  """

  def __init__(self, behaviour: BehaviourModel):
    self.behaviour = behaviour
    self.config = SimConfig(seed=behaviour.seed)
    self.calls = 0

  async def chat(self, model: str, messages: list[dict], *, temperature: float, max_tokens: int,
                 sample_index: int = 0) -> CallResult:
    spec = get_model(model)
    req = {"model": model, "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
           "temperature": None if spec.fixed_temperature else float(temperature), "top_p": None,
           "limit": max_tokens, "sample_index": sample_index}
    body, _ = completion(self.config, self.behaviour, req, json.dumps(req).encode())
    usage = body["usage"]
    self.calls += 1
    return CallResult(text=body["choices"][0]["message"]["content"], model=model,
                      prompt_tokens=usage["prompt_tokens"], completion_tokens=usage["completion_tokens"],
                      cost_usd=spec.cost(usage["prompt_tokens"], usage["completion_tokens"]),
                      latency_s=0.0, cached=False, attempts=1)


def sim_correct(behaviour: BehaviourModel, item: Item, text: str) -> bool:
  """Whether a sim reply's final answer is right (the sim's texts state it in the benchmark format)."""
  if item.benchmark == "mmlu_redux":
    return reading.mmlu_vote(text) == item.answer
  if item.benchmark == "math":
    boxed = reading.last_boxed(text)
    return boxed is not None and reading.math_key(boxed) == reading.math_key(item.answer)
  code = reading.code_block(text)
  correct = behaviour._correct_keys(item)  # pylint: disable=protected-access
  return code is not None and reading.code_key(code) in correct


Solver = Callable[[RunContext, Item], Any]


def method_solver(name: str) -> Solver:
  method = make_method(name)
  return method.solve


def mas_solver(build: Callable[[str, str], Any], settings: RunSettings = RunSettings()) -> Solver:
  """A solver running `build(benchmark, pool name)` (a MASConfig) through the MAS runtime."""
  async def solve(ctx: RunContext, item: Item):
    return await run_mas(ctx.client, item, build(item.benchmark, ctx.pool.name), settings)
  return solve


@dataclasses.dataclass
class CellResult:
  accuracy: float
  n: int
  cost_per_query: float
  calls_per_query: float


def simulate_cell(behaviours: Sequence[BehaviourModel], solver: Solver, items: Sequence[Item], pool_name: str
                  ) -> CellResult:
  """Accuracy (percent), n and mean cost of one solver on `items` under each behaviour (sim seed).

  In-process, no HTTP: not a runner cell (`runner.run_cell`), hence the name."""
  correct, cost, calls = [], 0.0, 0
  pool = get_pool(pool_name)

  async def go(client: DirectSimClient):
    ctx = RunContext(client, pool, client.behaviour.seed)
    return [await solver(ctx, it) for it in items]

  for behaviour in behaviours:
    client = DirectSimClient(behaviour)
    traces = asyncio.run(go(client))
    correct += [sim_correct(behaviour, it, t.final_text) for it, t in zip(items, traces)]
    cost += sum(t.cost_usd for t in traces)
    calls += client.calls
  n = len(correct)
  return CellResult(100.0 * float(np.mean(correct)), n, cost / n, calls / n)


@contextlib.contextmanager
def overridden(values: Mapping[str, float]):
  """Temporarily sets sim parameters (module globals of `sim.params`)."""
  old = {k: getattr(P, k) for k in values}
  try:
    for k, v in values.items():
      setattr(P, k, v)
    yield
  finally:
    for k, v in old.items():
      setattr(P, k, v)


def fit_items(benchmark: str, n_items: int, seed: int = 0) -> list[Item]:
  """All items, or a seeded sample of `n_items` (the calibration's own sampling rule)."""
  items = list(load_items(benchmark))
  if len(items) <= n_items:
    return items
  rng = np.random.default_rng([seed, 7919])
  return [items[i] for i in np.sort(rng.choice(len(items), size=n_items, replace=False))]


def fit_cells(methods: Iterable[str], behaviours_for: Mapping[str, Sequence[BehaviourModel]],
              items_for: Mapping[str, Sequence[Item]]) -> dict[str, dict[str, Any]]:
  """Measured vs target for `methods` over the six benchmark x pool cells (keyed "setting" in the records)."""
  out = {}
  for method in methods:
    for (benchmark, pool), target in PAPER_ROWS[method].items():
      res = simulate_cell(behaviours_for[benchmark], method_solver(method), items_for[benchmark], pool)
      out[f"{method}/{benchmark}/{pool}"] = {"method": method, "benchmark": benchmark, "setting": pool,
                                             "target": target, "measured": round(res.accuracy, 2),
                                             "n": res.n, "cost_per_query": res.cost_per_query}
  return out


def loss(cells: Mapping[str, Mapping[str, Any]], tolerance: float = 3.0) -> float:
  """100 per cell outside the tolerance (the goal counts cells), plus the sum of squared misses."""
  total = 0.0
  for c in cells.values():
    d = c["measured"] - c["target"]
    total += d * d + (100.0 if abs(d) > tolerance else 0.0)
  return total


def error_coincidence(behaviour: BehaviourModel, benchmark: str, items: Sequence[Item],
                      models: Sequence[str] = ("qwen3-80b", "deepseek-v3", "gemma-3-27b", "qwen3-8b", "llama-8b")
                      ) -> dict[str, float]:
  """How often errors coincide: two different models both wrong on the Base prompt choosing the same
  answer, and two samples of one model at T = 1.0 both wrong choosing the same answer."""
  from hieramas_jax.mas import roles  # pylint: disable=import-outside-toplevel
  between, within = [], []
  for it in items:
    msgs = roles.single_model_messages(it, cot=False)
    keys = {}
    for m in models:
      r = behaviour.reply(m, msgs, 0.2, None, 0)
      if r.correct is False:
        keys[m] = r.answer_key
    for a, b in itertools.combinations(sorted(keys), 2):
      between.append(keys[a] == keys[b])
    m = models[-1]
    r0, r1 = (behaviour.reply(m, msgs, 1.0, None, k) for k in (0, 1))
    if r0.correct is False and r1.correct is False:
      within.append(r0.answer_key == r1.answer_key)
  return {"between_models": float(np.mean(between)) if between else float("nan"), "n_between": len(between),
          "within_model_T1": float(np.mean(within)) if within else float("nan"), "n_within": len(within)}


__all__ = ["DirectSimClient", "FITTED", "PAPER_ROWS", "fit_cells", "loss", "overridden", "simulate_cell",
           "sim_correct", "mas_solver", "method_solver", "error_coincidence", "fit_items"]


# ---- the fit ------------------------------------------------------------------------------------

RHO_TAU_GRID = (1.5, 1.75, 2.0, 2.25, 2.5, 3.0)
COINCIDENCE_MODELS = ("qwen3-80b", "deepseek-v3", "gemma-3-27b", "qwen3-8b", "llama-8b")


def fit_shared_spread(behaviour: BehaviourModel, benchmark: str, items: Sequence[Item], target: float,
                      lo: float = 0.0, hi: float = 4.0, steps: int = 12) -> tuple[float, float]:
  """The ERROR_SHARED_SPREAD whose between-model error coincidence is `target` (bisection)."""
  measured = float("nan")
  for _ in range(steps):
    mid = (lo + hi) / 2
    with overridden({"ERROR_SHARED_SPREAD": {**P.ERROR_SHARED_SPREAD, benchmark: mid}}):
      measured = error_coincidence(behaviour, benchmark, items, COINCIDENCE_MODELS)["between_models"]
    if measured < target:
      lo = mid
    else:
      hi = mid
  return round((lo + hi) / 2, 3), measured


def fit_all(n_items: Mapping[str, int], code_seeds: Sequence[int] = (0, 1, 2), progress: Callable[[str], None] = print
            ) -> dict[str, Any]:
  """Fits the shared error spreads, then RHO_TAU, through the in-process pipeline; returns the record."""
  behaviours = {s: BehaviourModel(s) for s in sorted({0, *code_seeds})}
  items_for = {b: fit_items(b, n) for b, n in n_items.items()}
  behaviours_for = {b: [behaviours[s] for s in (code_seeds if b == "humaneval_plus" else (0,))] for b in items_for}
  record: dict[str, Any] = {"n_items": {b: len(v) for b, v in items_for.items()}, "code_seeds": list(code_seeds)}
  spreads = {}
  for b, items in items_for.items():
    spreads[b], measured = fit_shared_spread(behaviours[0], b, items, P.ERROR_COINCIDENCE[b])
    progress(f"ERROR_SHARED_SPREAD[{b}] = {spreads[b]} (coincidence {measured:.3f}, target {P.ERROR_COINCIDENCE[b]})")
  record["ERROR_SHARED_SPREAD"] = spreads
  with overridden({"ERROR_SHARED_SPREAD": spreads}):
    grid = []
    for tau in RHO_TAU_GRID:
      with overridden({"RHO_TAU": tau}):
        cells = fit_cells(("sc", "sc_cot"), behaviours_for, items_for)
      grid.append({"RHO_TAU": tau, "loss": round(loss(cells), 3), "cells": cells})
      progress(f"RHO_TAU {tau}: loss {grid[-1]['loss']}")
    record["RHO_TAU"] = min(grid, key=lambda g: g["loss"])["RHO_TAU"]
    record["rho_tau_grid"] = grid
  return record

"""The AgentPrune baseline: learned spatial-temporal edge logits over strong-model agents, pruned once per
`imp_per_iterations` updates by logit magnitude.

fit: `iterations` REINFORCE updates on batches of `batch_size` training queries (reference: 10 x 4, Adam
lr 0.1, pruning 25% of the remaining edges after updates 5 and 10); each query samples its rounds' spatial
and temporal edges from the current logits and masks (`model.sample_rounds`), runs the agents
(`mas.rounds.run_rounds`, as GDesigner does: every agent played by the setting's strong model, a decision
agent reading everyone at the end), is graded by the benchmark's grader, and its 0/1 utility weights its
edges' log-probability. The state (logits, Adam state, masks, step) is saved after every update (a killed
fit resumes there) and `ctx.commit()` marks it.

solve: the trained logits and pruned masks give the query's edges, drawn with a generator keyed by
(seed, item id) (the public evaluation samples too: `evaluate_mmlu.py` runs `arun` on the trained graph),
then the agents run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from typing import Any, Sequence

import jax.numpy as jnp
import numpy as np
import optax

from hieramas_jax.aio import gather_or_cancel
from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import Item, check_benchmark
from hieramas_jax.learn.batching import batch_indices
from hieramas_jax.learn.checkpoint import params_sha256
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.mas import roles
from hieramas_jax.mas.rounds import RoundAgent, RoundsConfig, run_rounds
from hieramas_jax.mas.trace import Trace
from hieramas_jax.methods.agentprune import model
from hieramas_jax.methods.api import MethodError, RunContext
from hieramas_jax.methods.code_tools import docstring_check
from hieramas_jax.methods.common import ParamState, check_pool, off_loop
from hieramas_jax.methods.digest import item_fold

_TRAIN_STREAM, _SOLVE_STREAM = 1, 2

# The agents the public run scripts seat, mapped to the suite's benchmarks (gsm8k -> MATH, MMLU -> MMLU-Redux,
# HumanEval -> HumanEval+): N agents of one class whose roles are the first N of the prompt set's role cycle
# (`get_role` = `next(itertools.cycle([...]))`). MMLU: 5 AnalyzeAgent (run_mmlu.py `--agent_nums` default 5);
# gsm8k: 4 MathSolver (run_gsm8k.py), the cycle's "Programming Expert" left out (not in the suite's MATH
# role set: 3 agents); HumanEval: 5 CodeWriting (run_humaneval.py), the suite's 5 roles in cycle order.
REFERENCE_AGENTS: dict[str, tuple[str, ...]] = {
    "mmlu_redux": ("Knowlegable Expert", "Critic", "Mathematician", "Psychologist", "Historian"),
    "math": ("Math Solver", "Mathematical Analyst", "Inspector"),
    "humaneval_plus": ("Project Manager", "Algorithm Designer", "Programming Expert", "Test Analyst", "Bug Fixer"),
}
# `--num_rounds` defaults of run_mmlu.py (1), run_gsm8k.py (1) and run_humaneval.py (2).
REFERENCE_ROUNDS: dict[str, int] = {"mmlu_redux": 1, "math": 1, "humaneval_plus": 2}
AGENT_SETS = ("reference", "roles")


@dataclasses.dataclass(frozen=True)
class AgentPruneConfig:
  """AgentPrune's hyperparameters (reference defaults: yanweiyue/AgentPrune experiments/run_*.py argparse).

  Attributes:
    iterations: REINFORCE updates (`--num_iterations`, 10).
    batch_size: training queries per update (`--batch_size`, 4).
    lr: Adam learning rate (`--lr`, 0.1).
    imp_per_iterations: prune after every this many updates (`--imp_per_iterations`, 5).
    pruning_rate: share of the remaining edges each pruning removes (`--pruning_rate`, 0.25).
    rounds: communication rounds per query; None: the reference script's default for the benchmark
      (`REFERENCE_ROUNDS`), resolved by `make`.
    temperature: edge-probability temperature (`construct_*_connection` default, 1).
    initial_spatial_probability, initial_temporal_probability: initial edge probability (0.5).
    agents: "reference" (the run scripts' agents, `REFERENCE_AGENTS`) or "roles" (every role of the suite's
      role set, as the suite's GDesigner seats).
    code_tools: on HumanEval+, code outputs run on the prompt's docstring examples and the readers see the
      result (the reference's `CodeWriting` / `FinalWriteCode`, as GDesigner's; `docstring_check`).
    llm_temperature: sampling temperature of every agent's and the decision's call. The public `achat`
      (llm/gpt_chat.py) sends none, so the API's default, 1.0, applies (the suite's shared setting is 0.2).
  """

  iterations: int = 10
  batch_size: int = 4
  lr: float = 0.1
  imp_per_iterations: int = 5
  pruning_rate: float = 0.25
  rounds: int | None = None
  temperature: float = 1.0
  initial_spatial_probability: float = 0.5
  initial_temporal_probability: float = 0.5
  agents: str = "reference"
  code_tools: bool = True
  llm_temperature: float = 1.0

  def __post_init__(self):
    if self.agents not in AGENT_SETS:
      raise ValueError(f"agentprune agents must be one of {AGENT_SETS}, got {self.agents!r}")
    for name in ("batch_size", "imp_per_iterations"):
      if getattr(self, name) < 1:
        raise ValueError(f"agentprune {name} must be >= 1, got {getattr(self, name)}")
    if self.rounds is not None and self.rounds < 1:
      raise ValueError(f"agentprune rounds must be >= 1 (or None), got {self.rounds}")
    if not 0.0 <= self.llm_temperature <= 2.0:
      raise ValueError(f"agentprune llm_temperature must be in [0, 2], got {self.llm_temperature}")
    if self.iterations < 0 or self.lr <= 0 or self.temperature <= 0 or not 0.0 <= self.pruning_rate < 1.0:
      raise ValueError("agentprune needs iterations >= 0, lr > 0, temperature > 0, 0 <= pruning_rate < 1")
    model.init_logit(self.initial_spatial_probability)
    model.init_logit(self.initial_temporal_probability)


def mask_sha256(masks: dict[str, Any]) -> str:
  h = hashlib.sha256()
  for name in ("spatial", "temporal"):
    h.update(np.asarray(masks[name], np.uint8).tobytes())
  return h.hexdigest()


class AgentPrune:
  """AgentPrune on one benchmark and pool setting."""

  name = "agentprune"
  trainable = True

  def __init__(self, benchmark: str, pool: str, seed: int = 0, config: AgentPruneConfig = AgentPruneConfig()):
    self.benchmark, self.pool_name, self.seed = check_benchmark(benchmark), pool, seed
    if config.rounds is None:
      config = dataclasses.replace(config, rounds=REFERENCE_ROUNDS[benchmark])
    self.config = config
    self.roles = REFERENCE_AGENTS[benchmark] if config.agents == "reference" else roles.roles_for(benchmark)
    for r in self.roles:
      roles.check_role(benchmark, r)
    self.params = None
    self.masks: dict[str, np.ndarray] | None = None

  def describe(self) -> dict[str, Any]:
    return {"benchmark": self.benchmark, "pool": self.pool_name, "seed": self.seed, **dataclasses.asdict(self.config)}

  def _fresh_state(self) -> dict[str, Any]:
    n = len(self.roles)
    params = model.init_params(n, self.config.initial_spatial_probability, self.config.initial_temporal_probability)
    masks = model.initial_masks(n)
    return {"params": params, "opt_state": optax.adam(self.config.lr).init(params), "step": jnp.int32(0),
            "masks": {k: jnp.asarray(v, jnp.float32) for k, v in masks.items()}}

  def _set(self, state: dict[str, Any]) -> None:
    self.params = {k: np.asarray(v) for k, v in state["params"].items()}
    self.masks = {k: np.asarray(v) > 0 for k, v in state["masks"].items()}

  def _code_check(self, item: Item):
    return docstring_check(item) if self.config.code_tools else None

  def _settings(self, ctx: RunContext):
    """The run's settings at AgentPrune's own sampling temperature (the API default its code leaves in place)."""
    return dataclasses.replace(ctx.settings, temperature=self.config.llm_temperature)

  def _sample(self, rng: np.random.Generator):
    return model.sample_rounds(self.params, self.masks, self.config.rounds, rng, self.config.temperature)

  def _rounds_config(self, spatial: Sequence[np.ndarray], temporal: Sequence[np.ndarray], strong: str) -> RoundsConfig:
    return RoundsConfig(tuple(RoundAgent(r, strong) for r in self.roles), tuple(spatial), tuple(temporal), strong)

  async def fit(self, train: Sequence[Item], val: Sequence[Item], ctx: RunContext) -> dict[str, Any]:
    """REINFORCE on the training queries, pruning on schedule (validation is not used: the public code has
    no selection)."""
    del val
    check_pool(self.name, self.pool_name, ctx)
    state_store = ParamState(ctx.require_state_dir(self.name) / "checkpoints")
    template = self._fresh_state()
    state = state_store.restore(template) or template
    bound = ctx.query_bound(32)
    history = []
    ctx.step("reinforce", int(state["step"]), self.config.iterations)
    for step in range(int(state["step"]), self.config.iterations):
      idx = batch_indices(self.seed, step, self.config.batch_size, len(train))
      batch = [train[i] for i in idx]
      self._set(state)
      samples = [self._sample(np.random.default_rng([self.seed, _TRAIN_STREAM, step, b])) for b in range(len(batch))]

      async def one(b):
        spatial, temporal, _ = samples[b]
        async with bound:
          trace = await run_rounds(ctx.client, batch[b], self._rounds_config(spatial, temporal, ctx.pool.strong),
                                   self._settings(ctx), method=self.name, code_check=self._code_check(batch[b]))
        return (await graders.grade_async(batch[b], trace.final_text)).correct

      solved = await gather_or_cancel([asyncio.ensure_future(one(b)) for b in range(len(batch))])
      draws = model.stack_draws([s[2] for s in samples])
      new_state, loss = await off_loop(model.train_step, {k: state[k] for k in ("params", "opt_state", "step")},
                                       draws, jnp.asarray(solved, jnp.float32), lr=self.config.lr,
                                       temperature=self.config.temperature)
      if not np.isfinite(float(loss)):
        raise FloatingPointError(f"agentprune: non-finite loss at step {step}")
      masks = state["masks"]
      pruned = (step + 1) % self.config.imp_per_iterations == 0
      if pruned:  # train_mmlu.py: `if (i_iter+1) % imp_per_iters == 0: graph.update_masks(pruning_rate)`
        masks = {k: jnp.asarray(model.prune_mask(np.asarray(new_state["params"][k]), np.asarray(masks[k]) > 0,
                                                 self.config.pruning_rate), jnp.float32) for k in masks}
      state = {**new_state, "masks": masks}
      state_store.save(step + 1, state)
      ctx.commit()
      ctx.step("reinforce", step + 1, self.config.iterations)
      scalars = {"agentprune/loss": float(loss), "agentprune/batch_accuracy": float(np.mean(solved)),
                 "agentprune/spatial_edges": float(np.sum(np.asarray(masks["spatial"]) > 0)),
                 "agentprune/temporal_edges": float(np.sum(np.asarray(masks["temporal"]) > 0))}
      ctx.log(step + 1, scalars)
      history.append({"step": step + 1, "pruned": pruned, **scalars})
    self._set(state)
    state_store.finish(state)
    # The trained edge probabilities (what `solve` samples unmasked edges with) beside the initial ones, so a
    # report can say how far the logits moved from their start (report/beyond_learning.py); read off the state.
    probs = {k: model.edge_probs(self.params[k], self.config.temperature).round(6).tolist() for k in self.params}
    return {"iterations": self.config.iterations, "params_sha256": params_sha256(state["params"]),
            "masks_sha256": mask_sha256(self.masks),
            "spatial_mask": self.masks["spatial"].astype(int).tolist(),
            "temporal_mask": self.masks["temporal"].astype(int).tolist(),
            "edge_probability": probs,
            "initial_probability": {k: float(model.edge_probs(model.init_logit(p), self.config.temperature))
                                    for k, p in (("spatial", self.config.initial_spatial_probability),
                                                 ("temporal", self.config.initial_temporal_probability))},
            "history": history}

  def load(self, state_dir) -> None:
    state = ParamState.load_finished(state_dir, self._fresh_state(), self.name)
    if int(state["step"]) != self.config.iterations:
      raise MethodError(f"{state_dir} holds an agentprune fit of {int(state['step'])} iterations, not "
                        f"{self.config.iterations}")
    self._set(state)

  def load_untrained(self) -> None:
    """The seeded initial state `fit` starts from, before any update or pruning: every edge unmasked (the runner's untrained check)."""
    self._set(self._fresh_state())

  async def prepare(self, items: Sequence[Item], ctx: RunContext) -> None:
    del items, ctx

  async def solve(self, ctx: RunContext, item: Item) -> Trace:
    check_pool(self.name, self.pool_name, ctx)
    if self.params is None:
      if self.config.iterations:
        raise MethodError("agentprune.solve before fit() or load()")
      self._set(self._fresh_state())
    spatial, temporal, _ = self._sample(np.random.default_rng([self.seed, _SOLVE_STREAM, item_fold(item.id)]))
    trace = await run_rounds(ctx.client, item, self._rounds_config(spatial, temporal, ctx.pool.strong),
                             self._settings(ctx), method=self.name, code_check=self._code_check(item))
    trace.extra["edges_per_round"] = [int(a.sum()) for a in spatial]
    trace.extra["temporal_edges_per_round"] = [int(a.sum()) for a in temporal]
    trace.extra["unmasked_edges"] = {k: int(v.sum()) for k, v in self.masks.items()}
    return trace


def make(*, benchmark: str, pool: str, seed: int = 0, **options) -> AgentPrune:
  get_pool(pool)
  return AgentPrune(benchmark, pool, seed, AgentPruneConfig(**options))

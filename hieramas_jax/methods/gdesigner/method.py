"""The GDesigner baseline: a learned, query-conditioned communication topology over strong-model agents.

fit: `iterations` REINFORCE updates on batches of `batch_size` training queries (reference: 10 x 4,
Adam lr 0.1); each query samples 3 rounds of edges from the current topology net, runs the agents
(`mas.rounds.run_rounds`: every role played by the setting's strong model, a decision agent at the end),
is graded by the benchmark's grader, and its 0/1 utility weights its edges' log-probability. The
latest state is saved after every update (a killed fit resumes there) and `ctx.commit()` marks it.

solve: the trained net gives the query's edge probabilities; 3 DAGs are drawn with a generator seeded
by (seed, item id) (the public code samples at test time too), then the agents run.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from hieramas_jax.aio import gather_or_cancel
from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import Item
from hieramas_jax.learn.batching import batch_indices
from hieramas_jax.learn.checkpoint import params_sha256
from hieramas_jax.learn.encoder import DEFAULT_MODEL
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.mas import roles
from hieramas_jax.mas.rounds import CodeCheck, RoundAgent, RoundsConfig, run_rounds, temporal_from_spatial
from hieramas_jax.mas.trace import Trace
from hieramas_jax.methods.api import MethodError, RunContext
from hieramas_jax.methods.code_tools import docstring_check
from hieramas_jax.methods.common import ParamState, QueryEmbeddings, check_pool, embed_now, off_loop, role_texts
from hieramas_jax.methods.digest import item_fold
from hieramas_jax.methods.gdesigner import model

_TRAIN_STREAM, _SOLVE_STREAM = 1, 2


@dataclasses.dataclass(frozen=True)
class GDesignerConfig:
  """GDesigner's hyperparameters (reference defaults: yanweiyue/GDesigner experiments/run_mmlu.py).

  Attributes:
    iterations: REINFORCE updates (reference 10).
    batch_size: training queries per update (reference 4).
    lr: Adam learning rate (reference 0.1).
    rounds: communication rounds per query (reference 3).
    temperature: edge-probability temperature (reference 1).
    encoder: sentence encoder of role profiles and queries (reference all-MiniLM-L6-v2).
    dropout: GCN dropout while training (reference 0.5).
    edge_range: edge scores min-max normalised to "symmetric" [-1, 1] (reference) or "unit" [0, 1].
    train_params: "gcn" (reference: the optimizer holds only the GCN's parameters) or "all".
    anchor: the GCN's anchor graph: "roles" (reference: the prompt set's role connections,
      `model.ROLE_CONNECTIONS`) or "chain" (the roles in a chain, both directions; the earlier variant).
    code_tools: on HumanEval+, an agent output that is a Python code block runs on the prompt's docstring
      examples in the sandbox and the readers see whether it passed (reference `CodeWriting` /
      `FinalWriteCode`; `docstring_check`); False: no tools (the earlier variant).
  """

  iterations: int = 10
  batch_size: int = 4
  lr: float = 0.1
  rounds: int = 3
  temperature: float = 1.0
  encoder: str = DEFAULT_MODEL
  dropout: float = 0.5
  edge_range: str = "symmetric"
  train_params: str = "gcn"
  anchor: str = "roles"
  code_tools: bool = True

  def __post_init__(self):
    if self.anchor not in model.ANCHORS:
      raise ValueError(f"gdesigner anchor must be one of {model.ANCHORS}, got {self.anchor!r}")
    if self.edge_range not in model.EDGE_RANGES or self.train_params not in model.TRAIN_PARAMS:
      raise ValueError(f"gdesigner edge_range must be one of {model.EDGE_RANGES} and train_params one of "
                       f"{model.TRAIN_PARAMS}; got {self.edge_range!r}, {self.train_params!r}")
    if not 0.0 <= self.dropout < 1.0:
      raise ValueError(f"gdesigner dropout must be in [0, 1), got {self.dropout}")
    for name in ("batch_size", "rounds"):
      if getattr(self, name) < 1:
        raise ValueError(f"gdesigner {name} must be >= 1, got {getattr(self, name)}")
    if self.iterations < 0 or self.lr <= 0 or self.temperature <= 0:
      raise ValueError("gdesigner needs iterations >= 0, lr > 0, temperature > 0")


class GDesigner:
  """GDesigner on one benchmark and pool setting."""

  name = "gdesigner"
  trainable = True

  def __init__(self, benchmark: str, pool: str, seed: int = 0, config: GDesignerConfig = GDesignerConfig()):
    self.benchmark, self.pool_name, self.seed, self.config = benchmark, pool, seed, config
    self.roles = roles.roles_for(benchmark)
    self.net = model.TopologyNet(num_nodes=len(self.roles), temperature=config.temperature, dropout=config.dropout,
                                 edge_range=config.edge_range)
    self.anchor = model.anchor_edges(self.roles, benchmark, config.anchor)
    self.params = None
    self._role_emb: np.ndarray | None = None
    self.queries = QueryEmbeddings(config.encoder)

  def describe(self) -> dict[str, Any]:
    return {"benchmark": self.benchmark, "pool": self.pool_name, "seed": self.seed, **dataclasses.asdict(self.config)}

  def _role_embeddings(self) -> np.ndarray:
    if self._role_emb is None:
      self._role_emb = embed_now(role_texts(self.roles, [roles.role_description(r) for r in self.roles]),
                                 self.config.encoder)
    return self._role_emb

  def _fresh_state(self) -> dict[str, Any]:
    role_emb = self._role_embeddings()
    params = model.init_params(jax.random.key(self.seed), self.net, role_emb, role_emb.shape[1])
    return {"params": params, "opt_state": model.make_optimizer(self.config.lr, self.config.train_params).init(params),
            "step": jnp.int32(0)}

  def _probs(self, query_emb: np.ndarray, dropout_rng=None) -> np.ndarray:
    graph = model.query_graphs(self._role_embeddings(), query_emb, self.anchor)
    return np.asarray(model.edge_probs(self.params, graph, dropout_rng, net=self.net))

  def _code_check(self, item: Item) -> CodeCheck | None:
    return docstring_check(item) if self.config.code_tools else None

  def _rounds_config(self, adjs: Sequence[np.ndarray], strong: str) -> RoundsConfig:
    agents = tuple(RoundAgent(r, strong) for r in self.roles)
    temporal = tuple(np.zeros_like(a) if t == 0 else temporal_from_spatial(a) for t, a in enumerate(adjs))
    return RoundsConfig(agents, tuple(adjs), temporal, strong)

  async def fit(self, train: Sequence[Item], val: Sequence[Item], ctx: RunContext) -> dict[str, Any]:
    """REINFORCE on the training queries (validation queries are not used: the public code has no selection)."""
    del val
    check_pool(self.name, self.pool_name, ctx)
    state_store = ParamState(ctx.require_state_dir(self.name) / "checkpoints")
    await asyncio.to_thread(self._role_embeddings)
    template = await asyncio.to_thread(self._fresh_state)
    state = state_store.restore(template) or template
    await self.queries.ensure([it.question for it in train])  # one embedding job, not one per step
    bound = ctx.query_bound(32)
    history = []
    ctx.step("reinforce", int(state["step"]), self.config.iterations)  # the live display's step, rate, ETA
    for step in range(int(state["step"]), self.config.iterations):
      idx = batch_indices(self.seed, step, self.config.batch_size, len(train))
      batch = [train[i] for i in idx]
      query_emb = await self.queries.get([it.question for it in batch])
      self.params = state["params"]
      # Jitted calls in a worker thread: the first compiles for seconds while other cells keep running.
      # One training-mode pass (dropout key of this step) gives the draws and, recomputed, the loss.
      dropout_rng = jax.random.fold_in(jax.random.key(self.seed), step)
      probs = await asyncio.to_thread(self._probs, query_emb, dropout_rng)
      draws = [model.sample_rounds(probs[b], self.config.rounds, np.random.default_rng([self.seed, _TRAIN_STREAM,
                                                                                          step, b]))
               for b in range(len(batch))]

      async def one(b):
        async with bound:
          trace = await run_rounds(ctx.client, batch[b], self._rounds_config(draws[b][0], ctx.pool.strong),
                                   ctx.settings, method=self.name, code_check=self._code_check(batch[b]))
        return (await graders.grade_async(batch[b], trace.final_text)).correct

      solved = await gather_or_cancel([asyncio.ensure_future(one(b)) for b in range(len(batch))])
      utility = jnp.asarray(solved, jnp.float32)
      considered = jnp.asarray(np.stack([d[1].considered for d in draws]))
      chosen = jnp.asarray(np.stack([d[1].chosen for d in draws]))
      graph = model.query_graphs(self._role_embeddings(), query_emb, self.anchor)
      new_state, loss = await off_loop(
          model.train_step, state, graph, considered, chosen, utility, dropout_rng, net=self.net, lr=self.config.lr,
          train_params=self.config.train_params)
      if not np.isfinite(float(loss)):
        raise FloatingPointError(f"gdesigner: non-finite loss at step {step}")
      state = new_state
      state_store.save(step + 1, state)
      ctx.commit()
      ctx.step("reinforce", step + 1, self.config.iterations)
      scalars = {"gdesigner/loss": float(loss), "gdesigner/batch_accuracy": float(np.mean(solved)),
                 "gdesigner/mean_edge_prob": float(probs.mean())}
      ctx.log(step + 1, scalars)
      history.append({"step": step + 1, **scalars})
    self.params = state["params"]
    state_store.finish(state)
    return {"iterations": self.config.iterations, "params_sha256": params_sha256(self.params), "history": history}

  def load(self, state_dir) -> None:
    state = ParamState.load_finished(state_dir, self._fresh_state(), self.name)
    if int(state["step"]) != self.config.iterations:
      raise MethodError(f"{state_dir} holds a gdesigner fit of {int(state['step'])} iterations, not "
                        f"{self.config.iterations}")
    self.params = state["params"]

  def load_untrained(self) -> None:
    """The seeded initial state `fit` starts from, before any update (the runner's untrained check)."""
    self.params = self._fresh_state()["params"]

  async def prepare(self, items: Sequence[Item], ctx: RunContext) -> None:
    del ctx
    await asyncio.to_thread(self._role_embeddings)
    await self.queries.ensure([it.question for it in items])

  async def solve(self, ctx: RunContext, item: Item) -> Trace:
    check_pool(self.name, self.pool_name, ctx)
    if self.params is None:
      if self.config.iterations:
        raise MethodError("gdesigner.solve before fit() or load()")
      self.params = self._fresh_state()["params"]
    probs = (await asyncio.to_thread(self._probs, await self.queries.get([item.question])))[0]
    rng = np.random.default_rng([self.seed, _SOLVE_STREAM, item_fold(item.id)])
    adjs, _ = model.sample_rounds(probs, self.config.rounds, rng)
    trace = await run_rounds(ctx.client, item, self._rounds_config(adjs, ctx.pool.strong), ctx.settings,
                             method=self.name, code_check=self._code_check(item))
    trace.extra["mean_edge_prob"] = float(probs[~np.eye(len(self.roles), dtype=bool)].mean())
    trace.extra["edges_per_round"] = [int(a.sum()) for a in adjs]
    return trace


def make(*, benchmark: str, pool: str, seed: int = 0, **options) -> GDesigner:
  get_pool(pool)
  return GDesigner(benchmark, pool, seed, GDesignerConfig(**options))

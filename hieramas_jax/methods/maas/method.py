"""The MaAS baseline: a query-conditioned controller samples a subnetwork of the agentic supernet per query.

fit (bingreeky/MaAS `benchmark/benchmark.py evaluate_all_problems`, `scripts/optimizer.py`,
`examples/maas/optimize.py` defaults): `repetitions` (the run command's `--sample 4`) passes over the
training queries in a fixed order, `batch_size` 4 queries at a time; each query samples its architecture
from the current controller, runs it (`supernet.run_architecture`, the training graph), is graded, and
its utility score - 3 x cost (USD) weights its architecture's log-probability; one Adam step (lr 0.01)
per batch. No validation (the public code has none). The state is saved after every batch (a killed fit
resumes there) and `ctx.commit()` marks it.

solve: the trained controller's probabilities for the query, an architecture drawn with the same
threshold rule (the public test also samples; a generator keyed by (seed, item id)), the test graph.

With `format_error` (off by default: a defect of the public code is not copied; on, as that code runs), an
architecture holding MATH's GenerateCoT or
MultiGenerateCoT crashes when that operator is reached and the query is rerun with a fresh architecture,
up to 20 attempts (`supernet.ReferenceFormatError`); the crashed attempts' calls stay in the trace (their
cost is paid), and a query whose 20 attempts all crash scores 0 with no gradient.
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
from hieramas_jax.learn.checkpoint import params_sha256
from hieramas_jax.learn.encoder import DEFAULT_MODEL
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.mas.runtime import ChatClient, RunSettings
from hieramas_jax.mas.trace import Trace
from hieramas_jax.methods.api import MethodError, RunContext
from hieramas_jax.methods.common import ParamState, QueryEmbeddings, check_pool, embed_now, off_loop
from hieramas_jax.methods.digest import item_fold
from hieramas_jax.methods.maas import controller as C
from hieramas_jax.methods.maas import supernet

_TRAIN_STREAM, _SOLVE_STREAM, _SUBSET_STREAM = 1, 2, 3
MAX_ATTEMPTS = 20  # tenacity stop_after_attempt(20) around each query's graph

# Training queries: the public runs split each dataset TRAIN:TEST = 1:4 (paper Sec. 4.1, after AFlow), so
# about 1/5 of the data: HumanEval 164 -> 33; MATH's 617-problem level-5 subset -> 123. MMLU-Redux (not run
# by MaAS) takes MATH's count. A seeded subset of the cell's train split, capped by its size.
TRAIN_QUERIES = {"humaneval_plus": 33, "math": 123, "mmlu_redux": 123}


@dataclasses.dataclass(frozen=True)
class MaASConfig:
  """MaAS's settings (reference values: bingreeky/MaAS examples/maas/optimize.py, models/controller.py,
  benchmark/benchmark.py, configs/llm_config.py).

  Attributes:
    repetitions: passes over the training queries (--sample 4).
    batch_size: queries per Adam step (--batch_size 4).
    lr: Adam learning rate (--lr 0.01).
    layers: supernet layers (MultiLayerController num_layers 4).
    hidden: controller width (hidden_dim 32).
    threshold: a layer's operators are drawn until their probability mass reaches this (0.3).
    cost_weight: utility = score - cost_weight x cost in USD (3).
    train_queries: training queries (0: the whole train split; None: `TRAIN_QUERIES[benchmark]`).
    temperature: every call's temperature (LLMConfig default 0.0; config2.yaml sets none).
    max_tokens: every call's max_tokens (LLMConfig max_token 4096).
    format_error: reproduce the public MATH templates' GenerateCoT / MultiGenerateCoT crash and the
      20-attempt rerun (True, as the code runs); False (default) runs those operators as evidently intended:
      the crash is a defect (a template's literal braces meet str.format), not the method.
    encoder: the query and operator encoder (SentenceTransformer all-MiniLM-L6-v2).
  """

  repetitions: int = 4
  batch_size: int = 4
  lr: float = C.LR
  layers: int = C.NUM_LAYERS
  hidden: int = C.HIDDEN
  threshold: float = C.THRESHOLD
  cost_weight: float = C.COST_WEIGHT
  train_queries: int | None = None
  temperature: float = 0.0
  max_tokens: int = 4096
  format_error: bool = False
  encoder: str = DEFAULT_MODEL

  def __post_init__(self):
    if self.repetitions < 0 or self.batch_size < 1 or self.layers < 1 or self.hidden < 1:
      raise ValueError("maas needs repetitions >= 0, batch_size >= 1, layers >= 1, hidden >= 1")
    if self.lr <= 0 or not 0.0 < self.threshold <= 1.0 or self.cost_weight < 0:
      raise ValueError("maas needs lr > 0, threshold in (0, 1], cost_weight >= 0")
    if self.train_queries is not None and self.train_queries < 0:
      raise ValueError("maas train_queries must be >= 0 (0: all) or None (the reference's count)")
    RunSettings(temperature=self.temperature, max_tokens=self.max_tokens)  # validates both


class MaAS:
  """MaAS on one benchmark and pool setting."""

  name = "maas"
  trainable = True

  def __init__(self, benchmark: str, pool: str, seed: int = 0, config: MaASConfig = MaASConfig()):
    if benchmark not in supernet.OPERATORS:
      raise MethodError(f"maas has no supernet for {benchmark!r}; known: {', '.join(supernet.OPERATORS)}")
    self.benchmark, self.pool_name, self.seed, self.config = benchmark, pool, seed, config
    self.operators = supernet.OPERATORS[benchmark]
    self.net = C.Controller(num_layers=config.layers, hidden=config.hidden)
    self.settings = RunSettings(temperature=config.temperature, max_tokens=config.max_tokens)
    self.params = None
    self._op_emb: np.ndarray | None = None
    self.queries = QueryEmbeddings(config.encoder)

  def describe(self) -> dict[str, Any]:
    return {"benchmark": self.benchmark, "pool": self.pool_name, "seed": self.seed, "operators": list(self.operators),
            **dataclasses.asdict(self.config)}

  # --- controller --------------------------------------------------------------------------------

  def _operator_embeddings(self) -> np.ndarray:
    if self._op_emb is None:
      self._op_emb = embed_now(supernet.operator_descriptions(self.benchmark), self.config.encoder)
    return self._op_emb

  def _fresh_state(self) -> dict[str, Any]:
    params = C.init_params(jax.random.key(self.seed), self.net, self._operator_embeddings())
    return {"params": params, "opt_state": C.make_optimizer(self.config.lr).init(params), "step": jnp.int32(0)}

  def _probs(self, query_emb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    first, later = C.all_log_probs(self.params, jnp.asarray(query_emb, jnp.float32),
                                   jnp.asarray(self._operator_embeddings(), jnp.float32), net=self.net)
    return np.exp(np.asarray(first, np.float64)), np.exp(np.asarray(later, np.float64))

  def train_subset(self, train: Sequence[Item]) -> list[Item]:
    n = self.config.train_queries if self.config.train_queries is not None else TRAIN_QUERIES[self.benchmark]
    order = np.random.default_rng([self.seed, _SUBSET_STREAM]).permutation(len(train))
    return [train[i] for i in (order if n == 0 else order[:n])]

  # --- one query -----------------------------------------------------------------------------------

  async def _run(self, client: ChatClient, item: Item, model: str, first: np.ndarray, later: np.ndarray,
                 rng: np.random.Generator, phase: str, offset: int) -> tuple[Trace, C.Architecture | None]:
    """Samples and runs an architecture; with `format_error`, reruns a crashed one (at most 20 attempts)."""
    spent = []
    for attempt in range(MAX_ATTEMPTS):
      arch = C.sample_architecture(first, later, self.operators, rng, self.config.threshold)
      extra = {"attempt": attempt, "early_stop_at_0": arch.early_stop_at_0}
      try:
        trace = await supernet.run_architecture(
            client, item, arch.names(self.operators), model, self.settings, phase=phase, method=self.name,
            sample_offset=offset * MAX_ATTEMPTS + attempt, extra=extra, format_error=self.config.format_error)
      except supernet.ReferenceFormatError as crash:
        spent.append(crash.trace)
        continue
      trace.calls[:0] = [c for t in spent for c in t.calls]
      trace.extra["crashed_layers"] = [t.extra["layers"] for t in spent]
      return trace, arch
    trace = Trace(item_id=item.id, method=self.name, final_text="",
                  extra={"attempt": MAX_ATTEMPTS, "crashed_layers": [t.extra["layers"] for t in spent]})
    trace.calls.extend(c for t in spent for c in t.calls)
    return trace, None

  # --- Method interface ------------------------------------------------------------------------------

  async def fit(self, train: Sequence[Item], val: Sequence[Item], ctx: RunContext) -> dict[str, Any]:
    """REINFORCE on the training queries (validation queries are not used: the public code has none)."""
    del val
    check_pool(self.name, self.pool_name, ctx)
    subset = self.train_subset(train)
    if not subset and self.config.repetitions:
      raise MethodError("maas.fit needs training queries")
    state_store = ParamState(ctx.require_state_dir(self.name) / "checkpoints")
    await asyncio.to_thread(self._operator_embeddings)
    template = await asyncio.to_thread(self._fresh_state)
    state = state_store.restore(template) or template
    await self.queries.ensure([it.question for it in subset])
    bound = ctx.query_bound(32)
    bs = self.config.batch_size
    per_rep = -(-len(subset) // bs) if subset else 0
    total = self.config.repetitions * per_rep
    op_emb = jnp.asarray(self._operator_embeddings(), jnp.float32)
    history = []
    ctx.step("reinforce", int(state["step"]), total)
    for step in range(int(state["step"]), total):
      rep, b = divmod(step, per_rep)
      batch = subset[b * bs:(b + 1) * bs]  # file order, every repetition (the reference's loop)
      query_emb = np.zeros((bs, op_emb.shape[1]), np.float32)
      query_emb[:len(batch)] = await self.queries.get([it.question for it in batch])
      self.params = state["params"]
      first, later = await asyncio.to_thread(self._probs, query_emb)

      async def one(i):
        rng = np.random.default_rng([self.seed, _TRAIN_STREAM, step, i])
        async with bound:
          trace, arch = await self._run(ctx.client, batch[i], ctx.pool.strong, first[i], later[i], rng, "train", rep)
        correct = (await graders.grade_async(batch[i], trace.final_text)).correct if arch is not None else False
        return float(correct), trace.cost_usd, arch, len(trace.extra.get("crashed_layers", []))

      results = await gather_or_cancel([asyncio.ensure_future(one(i)) for i in range(len(batch))])
      archs = [r[2] if r[2] is not None else C.Architecture((), False) for r in results]
      enc = C.encode(archs, self.config.layers, len(self.operators), bs)
      score = np.zeros((bs,), np.float32)
      cost = np.zeros((bs,), np.float32)
      score[:len(batch)] = [r[0] for r in results]
      cost[:len(batch)] = [r[1] for r in results]
      util = C.utility(jnp.asarray(score), jnp.asarray(cost), self.config.cost_weight)
      new_state, loss = await off_loop(C.train_step, state, jnp.asarray(query_emb), op_emb,
                                       {k: jnp.asarray(v) for k, v in enc.items()}, util, net=self.net,
                                       lr=self.config.lr)
      if not np.isfinite(float(loss)):
        raise FloatingPointError(f"maas: non-finite loss at step {step}")
      state = new_state
      state_store.save(step + 1, state)
      ctx.commit()
      ctx.step("reinforce", step + 1, total)
      # Logged only: the batch's layer-0 operator distributions (`first`, what this step sampled from) as
      # their mean entropy, against ln K (uniform) in the summary, so a report can say how far the
      # controller moved from uniform (report/beyond_learning.py).
      p0 = np.clip(first[:len(batch)], 1e-300, 1.0)
      scalars = {"maas/loss": float(loss), "maas/batch_accuracy": float(np.mean([r[0] for r in results])),
                 "maas/batch_cost_usd": float(sum(r[1] for r in results)),
                 "maas/mean_layers": float(np.mean([len(a.layers) for a in archs])),
                 "maas/crashed_attempts": float(sum(r[3] for r in results)),
                 "maas/layer0_entropy": float(np.mean(-np.sum(p0 * np.log(p0), axis=-1)))}
      ctx.log(step + 1, scalars)
      history.append({"step": step + 1, "repetition": rep, **scalars})
    self.params = state["params"]
    state_store.finish(state)
    return {"steps": total, "train_queries": len(subset), "params_sha256": params_sha256(self.params),
            "batch_size": bs, "cost_weight": self.config.cost_weight, "operators": len(self.operators),
            "max_layer0_entropy": float(np.log(len(self.operators))), "history": history}

  def load(self, state_dir) -> None:
    state = ParamState.load_finished(state_dir, self._fresh_state(), self.name)
    self.params = state["params"]

  def load_untrained(self) -> None:
    """The seeded initial state `fit` starts from, before any update (the runner's untrained check)."""
    self.params = self._fresh_state()["params"]

  async def prepare(self, items: Sequence[Item], ctx: RunContext) -> None:
    del ctx
    await asyncio.to_thread(self._operator_embeddings)
    await self.queries.ensure([it.question for it in items])

  async def solve(self, ctx: RunContext, item: Item) -> Trace:
    check_pool(self.name, self.pool_name, ctx)
    if self.params is None:
      if self.config.repetitions:
        raise MethodError("maas.solve before fit() or load()")
      self.params = await asyncio.to_thread(lambda: self._fresh_state()["params"])
    first, later = await asyncio.to_thread(self._probs, await self.queries.get([item.question]))
    rng = np.random.default_rng([self.seed, _SOLVE_STREAM, item_fold(item.id)])
    trace, _ = await self._run(ctx.client, item, ctx.pool.strong, first[0], later[0], rng, "test", 0)
    trace.extra["layer0_probs"] = [round(float(p), 4) for p in first[0]]
    return trace


def make(*, benchmark: str, pool: str, seed: int = 0, **options) -> MaAS:
  get_pool(pool)
  return MaAS(benchmark, pool, seed, MaASConfig(**options))

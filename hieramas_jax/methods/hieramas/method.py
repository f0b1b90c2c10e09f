"""The HieraMAS method: `fit(train, val, ctx=...)` trains both stages; `solve(ctx, item)` is inference.

Inference (paper Sec. 3.5): the policy fixes every supernode (config `inference`: the reference's
top-N rotation with its drop cap, `policy.rotation_choices`, seeded per query by the run seed and the
item id; or "greedy", argmax per position with skip included), the classifier scores all K candidate
DAGs in one jitted call, G* = argmax, and the MAS runs once. The candidates (config `graph_pool`):
"per_query" (reference) draws K random DAGs for each query, seeded by the run seed and the item id
(`graph_pool.per_query_pool`; one compiled shape [K, N, N] for every query); "shared" scores one pool,
prepared once, for the whole split (`gcn.score_prepared`). With `consensus`, an answer every active role
shares is final (reference). The runner (`experiment.evaluate`) grades.

Stage 1 and stage-2 data use `stage1_proposers` proposer positions (reference: 6 on MMLU-Redux);
inference fills `num_proposers` slots from the rotation, so the two may differ.

Ablations (paper Table 2), chosen by the config, not by code paths hidden elsewhere:
- graph_mode="random_vote" (w/o Graph): `vote_graphs` graphs drawn from the query's candidates (seeded by
  the run seed and the item id), the MAS runs on each, the answer is the majority vote over their final
  answers (`methods.voting`); the reference's --random_graph is vote_graphs = 1 (one graph, one run).
- llm_mode="strong" (w/o LLM Selection): the setting's strong model at every proposer and
  synthesizer position, on the classifier's G*; under the rotation its drop rule still applies.
"""

from __future__ import annotations

import asyncio
import json
import logging
import pathlib
from typing import Any, Sequence

import jax
import numpy as np

from hieramas_jax.benchmarks.data import Item
from hieramas_jax.fileio import atomic_write_json
from hieramas_jax.learn import evidence as evidence_lib
from hieramas_jax.learn import gcn as gcn_lib
from hieramas_jax.learn import graph_pool
from hieramas_jax.learn import policy as policy_lib
from hieramas_jax.learn import stage1 as stage1_lib
from hieramas_jax.learn import stage2 as stage2_lib
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.mas.runtime import run_mas
from hieramas_jax.mas.trace import Trace
from hieramas_jax.methods.api import MethodError, RunContext
from hieramas_jax.methods.common import ENCODER_LOCK
from hieramas_jax.methods.digest import item_fold
from hieramas_jax.methods.hieramas import training
from hieramas_jax.methods.hieramas.config import TOTAL_COST_RECIPE, UNRECORDED_AT_DEFAULT, HieraMASConfig
from hieramas_jax.methods.hieramas.rollout import Setup, consensus_index
from hieramas_jax.methods.voting import majority_vote

log = logging.getLogger(__name__)


class HieraMASError(MethodError):
  """HieraMAS used wrongly (solve before fit/load, wrong pool or benchmark, a state of other training)."""


CONFIG_FILE = "hieramas.json"
EMBED_CHUNK = 16  # queries per encoder-lock hold (x R role texts: a few seconds of encoding)


def inference_pool(cfg: HieraMASConfig, num_roles: int) -> graph_pool.GraphPool:
  """The shared pool (graph_pool="shared"): K - 3 seeded random DAGs over sparse/medium/dense bands, plus
  chain, star, full."""
  return graph_pool.make_pool(cfg.seed, num_roles, cfg.num_candidates - 3, min_density=cfg.pool_min_density,
                              max_density=cfg.pool_max_density, include_reference=True)


def query_candidates(cfg: HieraMASConfig, num_roles: int, item_id: str) -> graph_pool.GraphPool:
  """The K candidates of one test query (graph_pool="per_query", the reference): random DAGs at densities
  U[pool_min_density, pool_max_density] from fold_in(fold_in(key(seed), INFERENCE_TAG), crc32(item id))."""
  key = jax.random.fold_in(jax.random.key(cfg.seed), training.INFERENCE_TAG)
  return graph_pool.per_query_pool(key, item_fold(item_id), cfg.num_candidates, num_roles,
                                   min_density=cfg.pool_min_density, max_density=cfg.pool_max_density)


class HieraMAS:
  """Trained (or loaded) HieraMAS for one benchmark and pool setting.

  Attributes:
    name: registry name.
    config: the run's hyperparameters.
    fit_summary: what the last fit or load found (best stage-1 record, stage-2 statistics).
  """

  name = "hieramas"
  trainable = True

  def __init__(self, config: HieraMASConfig | None = None):
    self.config = config or HieraMASConfig()
    self.setup = Setup.make(self.config.benchmark, get_pool(self.config.pool), self.config.num_proposers,
                            prompt_set=self.config.prompt_set)
    # Stage 1 and the stage-2 data run with stage1_proposers positions (the policy's shape).
    self.train_setup = Setup.make(self.config.benchmark, get_pool(self.config.pool), self.config.stage1_proposers,
                                  prompt_set=self.config.prompt_set)
    self._emb: training.Embeddings | None = None
    self.policy_state = None
    self.scorer_params = None
    # The shared pool (graph_pool="shared") is built and prepared once; per-query candidates in `candidates`.
    self.pool = inference_pool(self.config, self.setup.num_roles) if self.config.graph_pool == "shared" else None
    self._prepared = None if self.pool is None else gcn_lib.prepare_pool(self.pool.adjacency, self.pool.node_mask)
    self._scorer = training.scorer_net(self.config)
    self.fit_summary: dict[str, Any] = {}

  def describe(self) -> dict[str, Any]:
    """The config, less the fields `UNRECORDED_AT_DEFAULT` names while they hold that value."""
    return {k: v for k, v in self.config.to_json().items()
            if not (k in UNRECORDED_AT_DEFAULT and v == UNRECORDED_AT_DEFAULT[k])}

  @property
  def num_choices(self) -> int:
    """Choices a position can give weight to: the pool's models less the excluded ones, plus skip (the maximum
    entropy of the learning evidence is log of it)."""
    return self.train_setup.skip_index + 1 - len(self.config.excluded_models)

  def training_fields(self) -> tuple[str, ...]:
    """The `describe()` fields a loaded fit (--load_run) must share: those that change training."""
    return tuple(self.config.training_fingerprint())

  @property
  def embeddings(self) -> training.Embeddings:
    if self._emb is None:
      cfg = self.config
      self._emb = training.Embeddings(self.train_setup, cfg.encoder, cfg.task_metadata, cfg.policy_inputs,
                                      cfg.excluded_models)
    return self._emb

  async def _embed(self, items: Sequence[Item]) -> training.Embeddings:
    """Loads the encoder and embeds `items` in a worker thread (the event loop keeps serving other cells);
    later calls read the encoder's cache."""
    items = list(items)
    def work():
      with ENCODER_LOCK:
        emb = self.embeddings
      # The lock is taken per chunk, so other cells' small jobs (a role set, a batch of queries) slip in
      # between instead of waiting for a whole training split.
      for start in range(0, len(items), EMBED_CHUNK):
        with ENCODER_LOCK:
          emb.query_role(items[start:start + EMBED_CHUNK])
          emb.queries(items[start:start + EMBED_CHUNK])
      return emb
    return await asyncio.to_thread(work)

  def _check_ctx(self, ctx: RunContext) -> None:
    if ctx.pool.name != self.config.pool:
      raise HieraMASError(f"HieraMAS was configured for pool {self.config.pool!r}, the run uses {ctx.pool.name!r}")

  async def fit(self, train: Sequence[Item], val: Sequence[Item], ctx: RunContext) -> dict[str, Any]:
    """Stage 1, then stage 2 from the best stage-1 checkpoint; resumes whatever `ctx.state_dir` holds.

    Returns a summary (best stage-1 record, stage-2 label statistics and history).
    """
    self._check_ctx(ctx)
    state_dir = ctx.require_state_dir(self.name)
    for it in list(train) + list(val):
      if it.benchmark != self.config.benchmark:
        raise HieraMASError(f"item {it.id} is from {it.benchmark}; this HieraMAS is for {self.config.benchmark}")
    config_path = state_dir / CONFIG_FILE
    if config_path.exists():
      self._check_training(config_path)
    else:
      atomic_write_json(config_path, self.config.to_json())
    emb = await self._embed(list(train) + list(val))
    cfg = self.config
    bound = ctx.query_bound(cfg.max_queries)
    best = await training.train_stage1(ctx.client, self.train_setup, emb, train, val, cfg, state_dir,
                                       settings=ctx.settings, writer=ctx.writer, progress=ctx.progress, bound=bound,
                                       on_checkpoint=ctx.commit, report=ctx.step)
    # Explicit: the best checkpoint, from disk, checked (not whatever the loop's state ended at).
    self.policy_state = training.load_best_policy(cfg, emb, state_dir)
    done = training.stage2_dir(state_dir) / "done.json"
    if done.exists():
      self.scorer_params = training.load_scorer(cfg, emb, state_dir)
      history = json.loads(done.read_text())["history"]
      data = training.load_stage2_data(state_dir)
    else:
      data = training.load_stage2_data(state_dir)
      if data is None:
        data = await training.collect_stage2(ctx.client, self.train_setup, emb, self.policy_state, train, cfg,
                                             settings=ctx.settings, progress=ctx.progress, bound=bound,
                                             report=ctx.step)
        training.save_stage2_data(data, state_dir)
        ctx.commit()
      self.scorer_params, history = await asyncio.to_thread(
          training.train_stage2, data, emb, cfg, state_dir, writer=ctx.writer, step_offset=cfg.stage1_steps,
          progress=ctx.progress, report=ctx.step)
    self.fit_summary = {
        "stage1_best": best,
        "stage2": {"queries": int(data["labels"].shape[0]), "graphs_per_query": int(data["labels"].shape[1]),
                   "positive_rate": float(data["labels"].mean()), "mean_reward": float(data["reward"].mean()),
                   "accuracy": float(data["solved"].mean()),
                   "contrastive_queries": int(stage2_lib.informative_queries(data["reward"]).sum()),
                   "epochs_run": sum(1 for h in history if "val_loss" in h),
                   "best_val_loss": min((h["val_loss"] for h in history if "val_loss" in h), default=None),
                   "skipped": next((h["skipped"] for h in history if "skipped" in h), None),
                   "label_sources": evidence_lib.label_sources(data["solved"], data["reward"], data["adjacency"],
                                                               data["decision_cost"])},
        "evidence": learning_evidence(cfg, state_dir, best, self.num_choices),
    }
    return self.fit_summary

  def _check_training(self, config_path: pathlib.Path) -> None:
    """The state was trained with the same training fields (only inference-time fields may differ)."""
    try:
      trained = HieraMASConfig.from_json(json.loads(config_path.read_text()))
    except (OSError, ValueError, TypeError, RecursionError) as e:  # damaged or edited: one line, not a traceback
      raise HieraMASError(f"{config_path}: not a HieraMAS config ({type(e).__name__}: {str(e)[:200]}); delete "
                          "the cell's run directory (it then refits)") from None
    mine, theirs = self.config.training_fingerprint(), trained.training_fingerprint()
    diff = sorted(k for k in mine if mine[k] != theirs.get(k))
    if diff:
      raise HieraMASError(f"{config_path.parent} was trained with other settings ({', '.join(diff)}); "
                          "cannot use it here")

  def load(self, state_dir: str | pathlib.Path) -> None:
    """Loads the best stage-1 policy and the stage-2 classifier that a finished fit saved (no training).

    Args:
      state_dir: a finished fit's state directory. Its recorded config must describe the same training
        (`HieraMASConfig.training_fingerprint`): only inference-time fields (K, graph/LLM mode...) may differ.
    """
    source = pathlib.Path(state_dir)
    config_path = source / CONFIG_FILE
    if not config_path.exists():
      raise HieraMASError(f"{source} holds no HieraMAS state ({CONFIG_FILE} missing)")
    self._check_training(config_path)
    self.policy_state = training.load_best_policy(self.config, self.embeddings, source)
    self.scorer_params = training.load_scorer(self.config, self.embeddings, source)
    best = json.loads((training.stage1_dir(source) / training.BEST_FILE).read_text())
    self.fit_summary = {"stage1_best": best,
                        "evidence": learning_evidence(self.config, source, best, self.num_choices)}

  async def prepare(self, items: Sequence[Item], ctx: RunContext) -> None:
    """Embeds the queries about to be solved in a worker thread, then compiles inference once."""
    del ctx
    await self._embed(items)
    if items and self.policy_state is not None:
      await asyncio.to_thread(warm_up, self, items[0])

  def candidates(self, item: Item) -> graph_pool.GraphPool:
    """The K candidate DAGs of one query: its own draw (per_query) or the shared pool."""
    if self.pool is not None:
      return self.pool
    return query_candidates(self.config, self.setup.num_roles, item.id)

  def policy_inputs(self, item: Item, *, warm_up: bool = False):
    """One query's policy inputs; `warm_up` stands zeros in for metadata not fetched (compiling only)."""
    emb = self.embeddings
    if warm_up and self.config.task_metadata and item.id not in emb.metadata_text:
      return emb.policy_inputs(emb.query_role([item]), np.zeros((1, emb.profiles.shape[1]), np.float32))
    return emb.item_inputs([item])

  def choose(self, item: Item, *, warm_up: bool = False) -> tuple[np.ndarray, np.ndarray, graph_pool.GraphPool]:
    """(choices [R, P], scores [K], candidates) for one query: the policy's choices and all K candidates
    scored in one jitted call (-inf on masked duplicates)."""
    if self.policy_state is None or self.scorer_params is None:
      raise HieraMASError("HieraMAS.solve before fit() or load()")
    emb = self.embeddings
    inputs = self.policy_inputs(item, warm_up=warm_up)
    cfg = self.config
    if cfg.inference == "rotation":
      rng = np.random.default_rng([cfg.seed, training.INFERENCE_TAG, 1, item_fold(item.id)])
      logits = np.asarray(policy_lib.logits(self.policy_state.params, inputs, net=self.policy_state.net))[0]
      drop_logits = None
      if inputs.metadata is not None:
        # The reference's drop rule (`compute_role_skip_probs`) asks its cache for `get_metadata`, a method
        # TaskMetaCache lacks; the AttributeError is swallowed and the rule reads the logits without metadata.
        no_meta = inputs._replace(metadata=np.zeros_like(inputs.metadata))
        drop_logits = np.asarray(policy_lib.logits(self.policy_state.params, no_meta, net=self.policy_state.net))[0]
      choices = policy_lib.rotation_choices(logits, rng, cfg.num_proposers, top_n=cfg.rotation_top_n,
                                            max_dropped=cfg.max_dropped_roles, droppable=self.setup.checkable,
                                            aggregator_slot=cfg.aggregator_slot, drop_logits=drop_logits)
    else:
      choices = np.asarray(stage1_lib.greedy(self.policy_state, inputs))[0]
    if cfg.llm_mode == "strong":
      strong = self.setup.strong_choices()
      if cfg.inference == "rotation":  # the reference's --fixed_llm keeps the role-drop rule
        strong[choices[:, -1] == self.setup.skip_index, -1] = self.setup.skip_index
      choices = strong
    if self._prepared is not None:
      pool = self.pool
      scores = gcn_lib.score_prepared(self.scorer_params, emb.queries([item]), emb.role_emb, self._prepared,
                                      net=self._scorer)
    else:
      pool = self.candidates(item)
      scores = gcn_lib.score_candidates(self.scorer_params, emb.queries([item]), emb.role_emb, pool.adjacency,
                                        pool.node_mask, net=self._scorer)
    return choices, np.asarray(scores)[0], pool

  def policy_probabilities(self, item: Item) -> np.ndarray:
    """[R, P, M + 1] the policy's normalised logits (softmax at temperature 1; last column: skip) for one
    query: paper Fig. 4's LLM preferences per position, saved with every test query."""
    inputs = self.policy_inputs(item)
    return np.asarray(policy_lib.probabilities(self.policy_state.params, inputs, 1.0, net=self.policy_state.net))[0]

  async def solve(self, ctx: RunContext, item: Item) -> Trace:
    self._check_ctx(ctx)
    metadata_call = None
    if self.config.task_metadata:  # the query's metadata call: the first call of its trace (inference cost)
      metadata_call = await self.embeddings.fetch_one(ctx.client, item, ctx.settings)
    choices, scores, pool = self.choose(item)
    names = self.setup.choice_names(choices)
    if self.config.graph_mode == "classifier":
      g = int(np.argmax(scores))
      config, active = self.setup.to_config(choices, pool.adjacency[g])
      trace = await run_mas(ctx.client, item, config, ctx.settings, method=self.name, prompts=self.setup.prompts)
      trace.extra.update(self._graph_record(pool, g, scores))
    else:
      rng = np.random.default_rng([self.config.seed, training.INFERENCE_TAG, item_fold(item.id)])
      real = np.flatnonzero(pool.graph_mask)  # the distinct candidates
      graphs = rng.choice(real, size=min(self.config.vote_graphs, real.size), replace=False)
      configs = [self.setup.to_config(choices, pool.adjacency[g]) for g in graphs]
      runs = await asyncio.gather(*(run_mas(ctx.client, item, c, ctx.settings, method=self.name,
                                            prompts=self.setup.prompts) for c, _ in configs))
      vote = await majority_vote(item, [t.final_text for t in runs])
      trace = Trace(item_id=item.id, method=self.name, final_text=runs[vote.winner].final_text,
                    calls=[c for t in runs for c in t.calls], node_texts=dict(runs[vote.winner].node_texts),
                    extra={"config": runs[vote.winner].extra["config"], "vote": {"counts": vote.counts,
                                                                                 "winner": vote.winner}})
      active = configs[vote.winner][1]
      trace.extra.update(self._graph_record(pool, int(graphs[vote.winner]), scores))
      trace.extra["vote_graphs"] = [int(g) for g in graphs]
    if self.config.consensus:
      agreed = await consensus_index(item, [trace.node_texts[i] for i in range(len(active))],
                                     self.config.consensus_match)
      if agreed is not None:
        trace.final_text = trace.node_texts[agreed]
        trace.extra["consensus"] = {"node": int(agreed)}
    trace.extra.update({"choices": names, "active_roles": [int(a) for a in active],
                        "llm_mode": self.config.llm_mode, "graph_mode": self.config.graph_mode,
                        "policy_models": list(self.setup.models) + ["skip"],
                        "policy_probs": np.round(self.policy_probabilities(item), 4).tolist()})
    if metadata_call is not None:
      trace.calls.insert(0, metadata_call)
      trace.extra["task_metadata"] = {"text": self.embeddings.metadata_text[item.id],
                                      "source": self.embeddings.metadata_source[item.id]}
    return trace

  def _graph_record(self, pool: graph_pool.GraphPool, g: int, scores: np.ndarray) -> dict[str, Any]:
    """The chosen graph; `graph_index` is its index among the query's candidates (per_query) or in the pool."""
    adj = pool.adjacency[g][:self.setup.num_roles, :self.setup.num_roles]
    return {"graph_index": g, "graph_density": float(pool.density[g]),
            "graph_kind": graph_pool.KIND_NAMES[int(pool.kind[g])], "graph_score": float(scores[g]),
            "graph_edges": [[int(i), int(j)] for i, j in zip(*np.nonzero(adj))]}


def learning_evidence(cfg: HieraMASConfig, state_dir: pathlib.Path, best: dict[str, Any] | None,
                      num_choices: int) -> dict[str, Any]:
  """Both stages' raw learning evidence from a state dir (`learn/evidence.py`; verdicts: report/learning.py).
  A stage recorded before the evidence existed is None."""
  done = training.stage2_dir(state_dir) / "done.json"
  stage2 = json.loads(done.read_text()).get("evidence") if done.exists() else None
  return {"stage1": training.stage1_evidence(state_dir, cfg, best, num_choices), "stage2": stage2}


def warm_up(method: HieraMAS, item: Item) -> None:
  """Compiles the inference functions once before concurrent solving (keeps the event loop responsive)."""
  jax.block_until_ready(method.choose(item, warm_up=True))


def make(*, benchmark: str | None = None, pool: str | None = None, seed: int = 0, config: HieraMASConfig | None = None,
         **fields) -> HieraMAS:
  """`make_method("hieramas", benchmark=..., pool=..., seed=..., stage1_steps=20)`, or with a whole
  `config=HieraMASConfig(...)` (whose benchmark, pool and seed must then agree with the cell's)."""
  if config is None:
    cell = {k: v for k, v in (("benchmark", benchmark), ("pool", pool)) if v is not None}
    config = HieraMASConfig(**cell, seed=seed, **fields)
  else:
    if fields:
      raise HieraMASError(f"give either config= or fields, not both ({', '.join(sorted(fields))})")
    for name, value in (("benchmark", benchmark), ("pool", pool)):
      if value is not None and getattr(config, name) != value:
        raise HieraMASError(f"config.{name} is {getattr(config, name)!r} but the cell's is {value!r}")
  return HieraMAS(config)


def make_total_cost(*, benchmark: str | None = None, pool: str | None = None, seed: int = 0, **fields) -> HieraMAS:
  """HieraMAS with `config.TOTAL_COST_RECIPE` (fields given here override it): the same runner, its own row."""
  method = make(benchmark=benchmark, pool=pool, seed=seed, **{**TOTAL_COST_RECIPE, **fields})
  method.name = "hieramas_total_cost"
  return method

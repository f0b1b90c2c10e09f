"""The two training loops of HieraMAS (paper Alg. 1) over real MAS rollouts.

Stage 1 (policy, multi-level rewards): each step takes a batch of training queries in an order fixed
by the seed, samples `stage1_samples` configurations of each (key fold_in(k_sample, step)) and one
random DAG per rollout (density U[0.3, 0.7], key fold_in(k_graph, step)), runs the whole batch
concurrently, grades system and node outputs, turns them into role rewards and applies one jitted
REINFORCE update. Every `stage1_val_every` steps the greedy policy runs on the validation queries
(reference: on the full DAG; `stage1_val_graph="random"`: one fixed random DAG each) and a strictly
better validation score saves the "best" checkpoint. The latest state is saved every
`stage1_checkpoint_every` steps; a killed run restarts from it and, since every key and the data order
are functions of (seed, step), ends with exactly the result of an uninterrupted run.

Stage 2 (classifier, contrastive labels): the BEST stage-1 checkpoint is restored explicitly and
checked (its parameter hash must equal the one recorded when it was saved, and differ from a fresh
initialisation), then for every training query the frozen greedy policy runs on `stage2_graphs`
random DAGs (density U[0.3, 1.0]); system rewards give contrastive labels (`stage2.contrastive_labels`)
and the GCN is trained with weighted BCE and early stopping on a split by query (`stage2.fit`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import pathlib
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from hieramas_jax.benchmarks.data import Item
from hieramas_jax.errors import UserError
from hieramas_jax.fileio import atomic_write_json
from hieramas_jax.learn import checkpoint as checkpoint_lib
from hieramas_jax.learn import evidence as evidence_lib
from hieramas_jax.learn.batching import batch_indices
from hieramas_jax.learn.checkpoint import params_sha256
from hieramas_jax.learn import gcn as gcn_lib
from hieramas_jax.learn import graph_pool
from hieramas_jax.learn import policy as policy_lib
from hieramas_jax.learn import stage1 as stage1_lib
from hieramas_jax.learn import stage2 as stage2_lib
from hieramas_jax.learn.encoder import get_encoder
from hieramas_jax.llm.registry import get_model
from hieramas_jax.mas.runtime import ChatClient, RunSettings
from hieramas_jax.mas.trace import CallRecord
from hieramas_jax.methods.hieramas import metadata as metadata_lib
from hieramas_jax.methods.hieramas import policy_inputs as policy_inputs_lib
from hieramas_jax.methods.common import off_loop
from hieramas_jax.methods.hieramas.config import HieraMASConfig
from hieramas_jax.methods.hieramas.rollout import Rollout, Setup, batch_rewards, rollout_system_rewards, run_rollouts

log = logging.getLogger(__name__)

# `RunContext.step`: (stage, done, total) for the table's live display.
StageReport = Callable[[str, int, "int | None"], None]


def _report(report: StageReport | None, stage: str, done: int, total: int | None) -> None:
  if report is not None:
    report(stage, done, total)

# Fold-in tags of the run key: one independent stream per stage.
STAGE1_TAG, STAGE2_TAG, INFERENCE_TAG = 1, 2, 3


class TrainingError(UserError, RuntimeError):
  """A training stage cannot go on (e.g. a checkpoint that is not what was saved)."""


class Embeddings:
  """Sentence embeddings the policy and classifier need, each text embedded once (encoder cache).

  Attributes:
    setup: roles and pool.
    encoder: the sentence encoder (`learn.encoder.get_encoder(name)`).
    profiles: [M, D] LLM profile embeddings (paper Table 12), pool order.
    role_emb: [R, D] role-description embeddings (classifier node features).
    task_metadata: the policy takes each query's metadata embedding (config `task_metadata`).
    excluded: [M + 1] bool, the models the policy never chooses (config `exclude_llms`), or None when none is.
    metadata_text: item id -> the formatted metadata text (`metadata.format_text`) of every query fetched.
    metadata_source: item id -> "llm" or "heuristic" (the reference's fallback when the answer does not parse).
  """

  def __init__(self, setup: Setup, encoder_name: str, task_metadata: bool = False, policy_inputs: str = "suite",
               excluded_models: Sequence[str] = ()):
    self.setup = setup
    self.encoder = get_encoder(encoder_name)
    self.profiles = self.encoder.encode([get_model(m).profile for m in setup.models])
    self.role_emb = self.encoder.encode([f"{r}: {d}" for r, d in zip(setup.roles, setup.descriptions)])
    self.task_metadata = task_metadata
    self._text = policy_inputs_lib.TEXTS[policy_inputs]  # h_{Q,r}'s text (config `policy_inputs`)
    unknown = sorted(set(excluded_models) - set(setup.models))
    if unknown:
      raise TrainingError(f"cannot exclude {', '.join(unknown)}: not in the pool ({', '.join(setup.models)})")
    # None without exclusions: the default policy's inputs (and compiled functions) stay what they were.
    self.excluded = (np.array([m in excluded_models for m in setup.models] + [False]) if excluded_models
                     else None)
    self.metadata_text: dict[str, str] = {}
    self.metadata_source: dict[str, str] = {}

  def query_role(self, items: Sequence[Item]) -> np.ndarray:
    """[B, R, D]: h_{Q,r} = f(Q, r, desc(r)) for every item and role (the text of config `policy_inputs`)."""
    texts = [self._text(it.question, r, d) for it in items for r, d in zip(self.setup.roles, self.setup.descriptions)]
    return self.encoder.encode(texts).reshape(len(items), self.setup.num_roles, -1)

  def queries(self, items: Sequence[Item]) -> np.ndarray:
    """[B, D]: the query alone (joined with the role embeddings in the classifier's node features)."""
    return self.encoder.encode([it.question for it in items])

  async def fetch_metadata(self, client: ChatClient, items: Sequence[Item], settings: RunSettings = RunSettings(),
                           bound: asyncio.Semaphore | None = None) -> list[CallRecord]:
    """Makes the metadata call of every item not fetched yet (concurrently, under `bound`); returns their
    records. A no-op without `task_metadata`."""
    todo = list({it.id: it for it in items if it.id not in self.metadata_text}.values()) if self.task_metadata else []

    async def one(item):
      if bound is None:
        return await self.fetch_one(client, item, settings)
      async with bound:
        return await self.fetch_one(client, item, settings)

    return list(await asyncio.gather(*(one(it) for it in todo)))

  async def fetch_one(self, client: ChatClient, item: Item, settings: RunSettings = RunSettings()) -> CallRecord:
    """One item's metadata call (always made: a test query's call goes into its trace); keeps its text."""
    record, meta, source = await metadata_lib.fetch(client, item, self.setup.decision_model, settings)
    self.metadata_text[item.id] = metadata_lib.format_text(meta)
    self.metadata_source[item.id] = source
    return record

  def metadata(self, items: Sequence[Item]) -> np.ndarray | None:
    """[B, D] the items' metadata embeddings (None without `task_metadata`).

    Raises:
      TrainingError: an item whose metadata was never fetched (`fetch_metadata` first).
    """
    if not self.task_metadata:
      return None
    missing = [it.id for it in items if it.id not in self.metadata_text]
    if missing:
      raise TrainingError(f"no task metadata fetched for {len(missing)} queries (first: {missing[0]})")
    return self.encoder.encode([self.metadata_text[it.id] for it in items])

  def policy_inputs(self, query_role: np.ndarray, metadata: np.ndarray | None = None) -> policy_lib.PolicyInputs:
    if self.task_metadata and metadata is None:
      raise TrainingError("this policy takes task metadata; none was given")
    mask = np.ones((self.setup.num_roles, self.setup.num_proposers + 1), bool)
    return policy_lib.PolicyInputs(jnp.asarray(query_role), jnp.asarray(self.profiles), jnp.asarray(mask),
                                   None if metadata is None else jnp.asarray(metadata),
                                   None if self.excluded is None else jnp.asarray(self.excluded))

  def item_inputs(self, items: Sequence[Item]) -> policy_lib.PolicyInputs:
    """The policy's inputs for `items` (query-role and, with `task_metadata`, metadata embeddings)."""
    return self.policy_inputs(self.query_role(items), self.metadata(items))


def random_graphs(key: jax.Array, count: int, num_nodes: int, min_density: float, max_density: float,
                  fold: int | None = None) -> np.ndarray:
  """[count, N, N] random DAGs (reference recipe, `graph_pool.random_dags`) from `key`, or from
  `fold_in(key, fold)` (compiled: called once per training step or query)."""
  if fold is None:
    return np.asarray(graph_pool.random_dags(key, jnp.full((count,), min_density, jnp.float32),
                                             jnp.full((count,), max_density, jnp.float32), num_nodes=num_nodes))
  return np.asarray(graph_pool.random_dags_at(key, np.uint32(fold), np.float32(min_density), np.float32(max_density),
                                              count=count, num_nodes=num_nodes))


def consensus_rule(cfg: HieraMASConfig) -> str | None:
  """The consensus override's rule ("text" or "answer"), None when the run has none."""
  return cfg.consensus_match if cfg.consensus else None


def validation_graphs(cfg: HieraMASConfig, key: jax.Array, count: int, num_nodes: int) -> np.ndarray:
  """[count, N, N] the graphs stage 1 validates on: the full DAG for every query (reference), or one random
  DAG each at stage 1's densities."""
  if cfg.stage1_val_graph == "full":
    return np.broadcast_to(graph_pool.full(num_nodes), (count, num_nodes, num_nodes)).copy()
  return random_graphs(key, count, num_nodes, cfg.stage1_min_density, cfg.stage1_max_density)


def stage1_config(cfg: HieraMASConfig) -> stage1_lib.Stage1Config:
  """learn's stage-1 config from the run's: every field from HieraMASConfig, the one home of the defaults."""
  return stage1_lib.Stage1Config(learning_rate=cfg.stage1_lr, weight_decay=cfg.stage1_weight_decay,
                                 clip_norm=cfg.stage1_clip, entropy_coef=cfg.stage1_entropy,
                                 total_steps=max(cfg.stage1_steps, 1), tau_start=cfg.stage1_tau_start,
                                 tau_end=cfg.stage1_tau_end, samples_per_query=cfg.stage1_samples,
                                 baseline=cfg.stage1_baseline, sampling=cfg.stage1_sampling,
                                 learning_rate_end=cfg.stage1_lr_end)


def policy_net(cfg: HieraMASConfig) -> policy_lib.LLMSelectionPolicy:
  return policy_lib.HEADS[cfg.policy_head](hidden=cfg.policy_hidden, skip_logit_init=cfg.policy_skip_logit_init)


def scorer_net(cfg: HieraMASConfig) -> gcn_lib.GCNScorer:
  return gcn_lib.GCNScorer(hidden=cfg.gcn_hidden, dropout_rate=cfg.gcn_dropout)


def stage1_keys(cfg: HieraMASConfig) -> dict[str, jax.Array]:
  keys = jax.random.split(jax.random.fold_in(jax.random.key(cfg.seed), STAGE1_TAG), 5)
  return dict(zip(("init", "sample", "update", "graph", "val"), keys))


def fresh_policy_state(cfg: HieraMASConfig, emb: Embeddings) -> stage1_lib.Stage1State:
  """The initial stage-1 state (also the template checkpoints are restored into)."""
  dim = emb.profiles.shape[1]
  rows = cfg.stage1_batch * cfg.stage1_samples
  meta = np.zeros((rows, dim), np.float32) if emb.task_metadata else None
  inputs = emb.policy_inputs(np.zeros((rows, emb.setup.num_roles, dim), np.float32), meta)
  return stage1_lib.create_state(stage1_keys(cfg)["init"], inputs, stage1_config(cfg), policy_net(cfg))


@dataclasses.dataclass(frozen=True)
class Validation:
  accuracy: float
  mean_reward: float
  mean_cost: float

  def metric(self, select_by: str) -> float:
    """Higher is better. "accuracy": accuracy, ties broken by mean reward (|reward| <= 2.5, weight 1e-4
    keeps it below one query's worth of accuracy for up to 4000 validation queries)."""
    if select_by == "reward":
      return self.mean_reward
    return self.accuracy + 1e-4 * self.mean_reward


def summarize_rollouts(rollouts: Sequence[Rollout], k: float, system_cost: str) -> Validation:
  """Accuracy, mean system reward (charging `system_cost`) and mean total USD of a batch."""
  solved = np.array([r.system_solved for r in rollouts], bool)
  reward = rollout_system_rewards(rollouts, k=k, system_cost=system_cost)
  return Validation(float(solved.mean()), float(reward.mean()), float(np.mean([r.system_cost for r in rollouts])))


BEST_FILE = "best.json"
# Stage 1's learning evidence (`learn/evidence.py`): the drift curve, the untrained policy's validation
# outcomes and every validation's per-query outcomes; rewritten whole after each step (a few KB).
EVIDENCE_FILE = "evidence.json"


def stage1_dir(run_dir: pathlib.Path) -> pathlib.Path:
  return pathlib.Path(run_dir) / "checkpoints" / "stage1"


def stage2_dir(run_dir: pathlib.Path) -> pathlib.Path:
  return pathlib.Path(run_dir) / "checkpoints" / "stage2"


async def train_stage1(client: ChatClient, setup: Setup, emb: Embeddings, train: Sequence[Item], val: Sequence[Item],
                       cfg: HieraMASConfig, run_dir: pathlib.Path, *, settings: RunSettings = RunSettings(),
                       writer=None, progress: bool = True, bound: asyncio.Semaphore | None = None,
                       on_checkpoint: Callable[[], None] | None = None, report: StageReport | None = None
                       ) -> dict[str, Any]:
  """Runs (or resumes) stage 1; returns the best checkpoint's record (step, metric, params hash).

  `bound` caps the rollouts in flight (the run's global bound; default `cfg.max_queries`);
  `on_checkpoint` is called after every save, when no rollout is in flight.

  Raises:
    FloatingPointError: a non-finite loss (says the step).
    RolloutError: a non-finite reward (says the query and role).
  """
  if not val:
    raise TrainingError("stage 1 needs validation queries (best-by-validation checkpoint)")
  keys = stage1_keys(cfg)
  s1cfg = stage1_config(cfg)
  bound = bound if bound is not None else asyncio.Semaphore(cfg.max_queries)

  def saved():
    if on_checkpoint is not None:
      on_checkpoint()

  await emb.fetch_metadata(client, list(train) + list(val), settings, bound)
  train_qr, train_meta = emb.query_role(train), emb.metadata(train)
  val_inputs = emb.item_inputs(val)
  val_graphs = validation_graphs(cfg, keys["val"], len(val), setup.num_roles)
  state = fresh_policy_state(cfg, emb)
  init_probs = await off_loop(policy_lib.probabilities, state.params, val_inputs, 1.0, net=state.net)
  ckpt = checkpoint_lib.Checkpointer(stage1_dir(run_dir))
  best_path = stage1_dir(run_dir) / BEST_FILE
  evidence_path = stage1_dir(run_dir) / EVIDENCE_FILE
  try:
    if ckpt.latest_step() is not None:
      state = ckpt.restore_latest(state)
      log.info("stage 1: resumed from step %d", int(state.step))
    best = json.loads(best_path.read_text()) if best_path.exists() else None
    evidence = json.loads(evidence_path.read_text()) if evidence_path.exists() else {"curve": {}, "validations": {}}

    async def run_validation(params_state) -> tuple[Validation, dict[str, Any]]:
      # Jitted steps run in a worker thread: their first call compiles for seconds, and the event loop
      # meanwhile keeps serving the other cells of a table.
      choices = np.asarray(await off_loop(stage1_lib.greedy, params_state, val_inputs))
      rollouts = await run_rollouts(client, setup, val, choices, val_graphs, settings, bound=bound,
                                    grade_nodes=False, consensus=consensus_rule(cfg))
      return summarize_rollouts(rollouts, cfg.reward_k, cfg.system_cost), validation_outcomes(rollouts, cfg)

    async def drift(step: int) -> None:
      probs = await off_loop(policy_lib.probabilities, state.params, val_inputs, 1.0, net=state.net)
      entropy, kl = (float(x) for x in await off_loop(evidence_lib.policy_drift, probs, init_probs,
                                                      val_inputs.slot_mask))
      evidence["curve"][str(step)] = {"entropy": entropy, "kl_from_init": kl}
      atomic_write_json(evidence_path, evidence)
      if writer is not None:
        writer.write_scalars(step, {"stage1/val_policy_entropy": entropy, "stage1/val_kl_from_init": kl})

    async def validate(step: int):
      nonlocal best
      v, outcomes = await run_validation(state)
      evidence["validations"][str(step)] = outcomes
      atomic_write_json(evidence_path, evidence)
      metric = v.metric(cfg.stage1_select_by)
      improved = best is None or metric > best["metric"]
      # Only strict improvements reach the best manager, so it never has to break a tie itself.
      ckpt.save(step, state, metric if improved else None)
      if improved:
        best = {"step": step, "metric": metric, "val_accuracy": v.accuracy, "val_mean_reward": v.mean_reward,
                "val_mean_cost": v.mean_cost, "params_sha256": params_sha256(state.params)}
        atomic_write_json(best_path, best)
      saved()
      if writer is not None:
        writer.write_scalars(step, {"stage1/val_accuracy": v.accuracy, "stage1/val_mean_reward": v.mean_reward,
                                    "stage1/val_mean_cost_usd": v.mean_cost, "stage1/val_best_metric": best["metric"]})

    start = int(state.step)
    if "untrained" not in evidence:
      # The untrained policy on the same validation queries and graphs: the paired comparison that says
      # whether training helped (never a candidate for the best checkpoint).
      _, evidence["untrained"] = await run_validation(fresh_policy_state(cfg, emb))
      await drift(0)
    if cfg.stage1_steps == 0 and best is None:
      await validate(0)
    bar = tqdm(total=cfg.stage1_steps, initial=start, desc=f"stage 1 {setup.benchmark}", disable=not progress,
               dynamic_ncols=True, leave=False)
    _report(report, "stage 1", start, cfg.stage1_steps)
    try:
      for step in range(start, cfg.stage1_steps):
        # G samples of each query, consecutive (the leave-one-out baseline groups them).
        idx = np.repeat(batch_indices(cfg.seed, step, cfg.stage1_batch, len(train)), cfg.stage1_samples)
        inputs = emb.policy_inputs(train_qr[idx], None if train_meta is None else train_meta[idx])
        choices, tau = await off_loop(stage1_lib.sample_step, state, inputs, keys["sample"], s1cfg)
        graphs = random_graphs(keys["graph"], len(idx), setup.num_roles, cfg.stage1_min_density,
                               cfg.stage1_max_density, fold=step)
        rollouts = await run_rollouts(client, setup, [train[i] for i in idx], np.asarray(choices), graphs, settings,
                                      bound=bound, consensus=consensus_rule(cfg))
        rewards = batch_rewards(rollouts, alpha=cfg.alpha, k=cfg.reward_k, system_cost=cfg.system_cost,
                                role_checkable=setup.checkable)
        effective = None
        if cfg.stage1_mask_unused:
          effective = jnp.asarray(stage1_lib.effective_positions(choices, [r.active_roles for r in rollouts]))
        system = None
        if cfg.activation_credit == "system":
          system = jnp.asarray(rollout_system_rewards(rollouts, k=cfg.reward_k, system_cost=cfg.system_cost))
        batch = stage1_lib.Stage1Batch(inputs, choices, jnp.asarray(rewards), tau, effective, system)
        state, metrics = await off_loop(stage1_lib.update_step, state, batch, keys["update"])
        stage1_lib.check_finite(metrics, step)
        done = step + 1
        await drift(done)
        summary = summarize_rollouts(rollouts, cfg.reward_k, cfg.system_cost)
        skip_rate = float((np.asarray(choices) == setup.skip_index).mean())
        if writer is not None:
          writer.write_scalars(done, {
              "stage1/loss": float(metrics["loss"]), "stage1/entropy": float(metrics["entropy"]),
              "stage1/grad_norm": float(metrics["grad_norm"]), "stage1/mean_role_reward": float(rewards.mean()),
              "stage1/batch_accuracy": summary.accuracy, "stage1/batch_mean_system_reward": summary.mean_reward,
              "stage1/batch_mean_cost_usd": summary.mean_cost, "stage1/tau": float(tau),
              "stage1/skip_rate": skip_rate})
        bar.update(1)
        bar.set_postfix(acc=f"{summary.accuracy:.2f}", reward=f"{float(rewards.mean()):.3f}")
        _report(report, "stage 1", done, cfg.stage1_steps)
        if done % cfg.stage1_val_every == 0 or done == cfg.stage1_steps:
          await validate(done)
        elif done % cfg.stage1_checkpoint_every == 0:
          ckpt.save(done, state)
          saved()
    finally:
      bar.close()
  finally:
    ckpt.close()
  return best


def validation_outcomes(rollouts: Sequence[Rollout], cfg: HieraMASConfig) -> dict[str, Any]:
  """Per validation query (in split order): solved as a "0"/"1" string and the system reward."""
  reward = rollout_system_rewards(rollouts, k=cfg.reward_k, system_cost=cfg.system_cost)
  return {"solved": "".join("1" if r.system_solved else "0" for r in rollouts),
          "reward": [round(float(x), 6) for x in reward]}


def stage1_evidence(run_dir: pathlib.Path, cfg: HieraMASConfig, best: dict[str, Any] | None,
                    num_choices: int) -> dict[str, Any] | None:
  """Stage 1's learning evidence for the fit summary (None for a run from before it was recorded):
  the drift curve [[step, entropy, KL from init], ...], the untrained policy's validation outcomes, the
  final step's (not chosen by validation: the honest comparison) and the best checkpoint's."""
  path = stage1_dir(run_dir) / EVIDENCE_FILE
  if not path.exists():
    return None
  ev = json.loads(path.read_text())
  steps = sorted(int(k) for k in ev["validations"])
  final = steps[-1] if steps else None
  best_step = None if best is None else best["step"]
  return {"select_by": cfg.stage1_select_by, "max_entropy": float(np.log(num_choices)),
          "curve": [[int(k), v["entropy"], v["kl_from_init"]] for k, v in sorted(ev["curve"].items(),
                                                                                 key=lambda kv: int(kv[0]))],
          "untrained": ev.get("untrained"), "final_step": final,
          "final": None if final is None else ev["validations"][str(final)],
          "best_step": best_step, "best": ev["validations"].get(str(best_step))}


def load_best_policy(cfg: HieraMASConfig, emb: Embeddings, run_dir: pathlib.Path) -> stage1_lib.Stage1State:
  """Restores the BEST stage-1 checkpoint and proves it is the one that was saved.

  The reference code's MATH stage 2 silently keeps a freshly initialised selector (a key mismatch);
  here the restored parameters must hash to the value recorded when the best checkpoint was saved,
  and (unless the best is the untrained step 0) must differ from a fresh initialisation.

  Raises:
    TrainingError: no best checkpoint, or it is not the one recorded.
  """
  best_path = stage1_dir(run_dir) / BEST_FILE
  if not best_path.exists():
    raise TrainingError(f"no stage-1 best record at {best_path}: run stage 1 first")
  best = json.loads(best_path.read_text())
  template = fresh_policy_state(cfg, emb)
  ckpt = checkpoint_lib.Checkpointer(stage1_dir(run_dir))
  try:
    if ckpt.best_step() != best["step"]:
      raise TrainingError(f"best stage-1 checkpoint is step {ckpt.best_step()}, but {best_path} records "
                          f"step {best['step']}")
    state = ckpt.restore_best(template)
  finally:
    ckpt.close()
  loaded = params_sha256(state.params)
  if loaded != best["params_sha256"]:
    raise TrainingError(f"restored stage-1 parameters hash {loaded[:12]}, recorded {best['params_sha256'][:12]}: "
                        "the best checkpoint is not what was saved")
  if best["step"] > 0 and loaded == params_sha256(template.params):
    raise TrainingError("restored stage-1 parameters equal a fresh initialisation: the checkpoint did not load")
  return state


def stage2_keys(cfg: HieraMASConfig) -> dict[str, jax.Array]:
  keys = jax.random.split(jax.random.fold_in(jax.random.key(cfg.seed), STAGE2_TAG), 2)
  return dict(zip(("graphs", "fit"), keys))


STAGE2_DATA_FILE = "stage2_data.npz"
# Stage 2 needs at least one training and one validation query with any contrast between graphs.
MIN_CONTRASTIVE_QUERIES = 2


async def collect_stage2(client: ChatClient, setup: Setup, emb: Embeddings, policy_state, train: Sequence[Item],
                         cfg: HieraMASConfig, *, settings: RunSettings = RunSettings(),
                         progress: bool = True, bound: asyncio.Semaphore | None = None,
                         report: StageReport | None = None) -> dict[str, np.ndarray]:
  """Runs every training query on `stage2_graphs` random DAGs with the frozen greedy policy.

  Returns arrays: query_emb [Q, D], choices [Q, R, P], adjacency [Q, G, R, R], solved [Q, G],
  cost [Q, G] (total USD), decision_cost [Q, G], reward [Q, G] (stage 1's system reward), labels [Q, G].
  Graphs of query i come from fold_in(k_graphs, i).
  """
  keys = stage2_keys(cfg)
  g = cfg.stage2_graphs
  await emb.fetch_metadata(client, train, settings, bound)
  choices = np.asarray(await off_loop(stage1_lib.greedy, policy_state, emb.item_inputs(train)))
  adjacency = np.stack([random_graphs(keys["graphs"], g, setup.num_roles, cfg.stage2_min_density,
                                      cfg.stage2_max_density, fold=i) for i in range(len(train))])
  flat_items = [it for it in train for _ in range(g)]
  flat_choices = np.repeat(choices, g, axis=0)
  sem = bound if bound is not None else asyncio.Semaphore(cfg.max_queries)
  bar = tqdm(total=len(flat_items), desc=f"stage 2 data {setup.benchmark}", disable=not progress, dynamic_ncols=True,
             leave=False)
  _report(report, "stage 2 data", 0, len(flat_items))

  async def one(i):
    (r,) = await run_rollouts(client, setup, [flat_items[i]], flat_choices[i:i + 1],
                              adjacency.reshape(-1, setup.num_roles, setup.num_roles)[i:i + 1], settings, bound=sem,
                              grade_nodes=False, consensus=consensus_rule(cfg))
    bar.update(1)
    _report(report, "stage 2 data", bar.n, len(flat_items))
    return r

  try:
    rollouts = await asyncio.gather(*(one(i) for i in range(len(flat_items))))
  finally:
    bar.close()
  solved = np.array([r.system_solved for r in rollouts]).reshape(len(train), g)
  cost = np.array([r.system_cost for r in rollouts]).reshape(len(train), g)
  decision = np.array([r.decision_cost for r in rollouts]).reshape(len(train), g)
  # The same system reward as stage 1's (reference: the decision node's cost under "decision").
  reward = rollout_system_rewards(rollouts, k=cfg.reward_k, system_cost=cfg.system_cost).reshape(len(train), g)
  labels = stage2_lib.contrastive_labels(reward, top_k=cfg.stage2_top_k)
  return {"query_emb": emb.queries(train), "choices": choices, "adjacency": adjacency, "solved": solved,
          "cost": cost, "decision_cost": decision, "reward": reward, "labels": labels}


def stage2_batch(data: dict[str, np.ndarray], role_emb: np.ndarray, drop_ties: bool = True) -> stage2_lib.Stage2Batch:
  """The classifier's training data; with `drop_ties`, queries whose graphs all tied are masked out."""
  q, g, n, _ = data["adjacency"].shape
  informative = stage2_lib.informative_queries(data["reward"]) if drop_ties else np.ones(q, bool)
  return stage2_lib.Stage2Batch(query_emb=data["query_emb"], role_emb=role_emb, adjacency=data["adjacency"],
                                node_mask=np.ones((q, g, n), bool), labels=data["labels"].astype(np.float32),
                                label_mask=np.broadcast_to(informative[:, None], (q, g)).copy(),
                                pos_weight=np.float32(1.0))


def stage2_config(cfg: HieraMASConfig) -> stage2_lib.Stage2Config:
  """learn's stage-2 config from the run's: every field from HieraMASConfig, the one home of the defaults."""
  return stage2_lib.Stage2Config(learning_rate=cfg.stage2_lr, weight_decay=cfg.stage2_weight_decay,
                                 epochs=cfg.stage2_epochs, batch_size=cfg.stage2_batch,
                                 patience=cfg.stage2_patience, val_fraction=cfg.stage2_val_fraction)


def fresh_scorer_params(cfg: HieraMASConfig, emb: Embeddings):
  n = emb.setup.num_roles
  dim = emb.role_emb.shape[1]
  return gcn_lib.init_params(stage2_keys(cfg)["fit"], np.zeros((1, dim), np.float32), emb.role_emb,
                             np.zeros((1, n, n), bool), np.ones((1, n), bool), scorer_net(cfg))


def train_stage2(data: dict[str, np.ndarray], emb: Embeddings, cfg: HieraMASConfig, run_dir: pathlib.Path, *,
                 writer=None, step_offset: int = 0, progress: bool = True, report: StageReport | None = None):
  """Fits the classifier on collected stage-2 data and saves it; returns (params, history).

  When fewer than `MIN_CONTRASTIVE_QUERIES` training queries are left (with `stage2_drop_ties`, those
  showing any reward difference between their graphs), the frozen policy's outcome does not depend on
  the topology on this data, and there is nothing to learn: the classifier stays at its seeded
  initialisation (a fixed, arbitrary but reproducible preference) and the history records why.
  """
  batch = stage2_batch(data, emb.role_emb, cfg.stage2_drop_ties)
  contrastive = int(batch.label_mask.any(axis=1).sum())
  if writer is not None:
    # Logged whether or not the classifier trains: a skipped stage 2 still shows (and says why) in the curves.
    writer.write_scalars(step_offset, {"stage2/contrastive_queries": float(contrastive),
                                       "stage2/skipped": float(contrastive < MIN_CONTRASTIVE_QUERIES)})
  if contrastive < MIN_CONTRASTIVE_QUERIES:
    params = fresh_scorer_params(cfg, emb)
    history = [{"skipped": f"{contrastive} of {batch.label_mask.shape[0]} training queries show any reward "
                           "difference between their graphs; classifier left at initialisation"}]
    log.warning("stage 2: %s", history[0]["skipped"])
    save_scorer(params, run_dir, history, {"skipped": history[0]["skipped"]})
    return params, history
  bar = tqdm(total=cfg.stage2_epochs, desc=f"stage 2 fit {emb.setup.benchmark}", disable=not progress,
             dynamic_ncols=True, leave=False)

  _report(report, "stage 2 epoch", 0, cfg.stage2_epochs)

  def on_epoch(epoch, train_loss, val_metrics):
    bar.update(1)
    _report(report, "stage 2 epoch", epoch + 1, cfg.stage2_epochs)
    if writer is not None:
      writer.write_scalars(step_offset + epoch + 1, {"stage2/train_loss": train_loss,
                                                     **{f"stage2/val_{k}": v for k, v in val_metrics.items()}})

  try:
    params, history = stage2_lib.fit(batch, stage2_keys(cfg)["fit"], stage2_config(cfg),
                                     net=scorer_net(cfg), split_seed=cfg.seed, on_epoch=on_epoch)
  finally:
    bar.close()
  evidence = classifier_evidence(params, fresh_scorer_params(cfg, emb), batch, cfg)
  if writer is not None:
    last = step_offset + len(history)
    writer.write_scalars(last, {"stage2/val_top1_hit": float(np.mean(evidence["trained"]["hit"])),
                                "stage2/val_top1_chance": float(np.mean(evidence["chance"])),
                                "stage2/val_top1_hit_fresh_init": float(np.mean(evidence["fresh"]["hit"]))})
  save_scorer(params, run_dir, history, evidence)
  return params, history


def classifier_evidence(params, fresh_params, batch: stage2_lib.Stage2Batch, cfg: HieraMASConfig) -> dict[str, Any]:
  """Stage 2's learning evidence on the classifier's own validation queries (the fit's split): per query
  the top-1 hit of the trained classifier and of a fresh initialisation, and chance; per (query, graph)
  pair both scores and the label (for AUC), pairs listed query by query."""
  _, val = stage2_lib.split_data(batch, cfg.stage2_val_fraction, cfg.seed)
  net = scorer_net(cfg)
  out: dict[str, Any] = {"queries": int(val.query_emb.shape[0])}
  mask = np.asarray(val.label_mask, bool)
  for name, p in (("trained", params), ("fresh", fresh_params)):
    scores = np.asarray(stage2_lib.pair_scores(p, val, net=net), np.float64)
    hits = evidence_lib.top1_hits(scores, val.labels, mask)
    out[name] = {"hit": hits["hit"].astype(int).tolist(), "score": [round(float(x), 5) for x in scores[mask]]}
    out["chance"] = [round(float(x), 6) for x in hits["chance"]]
  out["label"] = np.asarray(val.labels)[mask].astype(int).tolist()
  out["pair_query"] = np.nonzero(mask)[0].tolist()
  return out


def save_scorer(params, run_dir: pathlib.Path, history: list[dict], evidence: dict[str, Any] | None = None) -> None:
  path = stage2_dir(run_dir)
  path.mkdir(parents=True, exist_ok=True)
  checkpoint_lib.save_tree(path / "params", params)
  atomic_write_json(path / "done.json", {"params_sha256": params_sha256(params), "history": history,
                                         "evidence": evidence})


def load_scorer(cfg: HieraMASConfig, emb: Embeddings, run_dir: pathlib.Path):
  """The saved classifier parameters, checked against the hash recorded at save time."""
  path = stage2_dir(run_dir)
  done = path / "done.json"
  if not done.exists():
    raise TrainingError(f"no finished stage-2 classifier under {path}")
  template = fresh_scorer_params(cfg, emb)
  params = checkpoint_lib.restore_tree(path / "params", template)
  recorded = json.loads(done.read_text())["params_sha256"]
  if params_sha256(params) != recorded:
    raise TrainingError(f"stage-2 parameters under {path} do not match the hash recorded at save time")
  return params


def save_stage2_data(data: dict[str, np.ndarray], run_dir: pathlib.Path) -> None:
  path = pathlib.Path(run_dir) / STAGE2_DATA_FILE
  tmp = path.with_name(".tmp-" + path.name)
  with open(tmp, "wb") as f:
    np.savez(f, **data)
  tmp.replace(path)


def load_stage2_data(run_dir: pathlib.Path) -> dict[str, np.ndarray] | None:
  path = pathlib.Path(run_dir) / STAGE2_DATA_FILE
  if not path.exists():
    return None
  with np.load(path) as f:
    return {k: f[k] for k in f.files}

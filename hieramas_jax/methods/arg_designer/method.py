"""The ARG-Designer baseline: a generator trained by maximum likelihood on agent graphs that solved training
queries, sampling one graph (agent count, roles, edges) per test query.

fit, the public pipeline (`experiment/<benchmark>/cold_start_*.py`, then `finetune_*.py --pretrain`), on the
first `train_queries` training queries (reference: `num_iterations x batch_size` = 10 x 4 = 40), shuffled
and split 40% base / 60% finetune (`BASE_RATE`):
  1. cold start: every "complex" configuration (FullConnected and Mesh of 3..max agents, roles drawn at
     random per configuration) runs every base query; the graphs that solved it are kept;
  2. pretrain: the generator fits them (90/10 train/validation, the epoch of lowest validation loss kept);
  3. finetune data: per finetune query, a graph sampled from the pretrained generator with 25% of its edges
     removed at random (`apply_efficiency_strategy`); every "simple" configuration (Chain, Star, Layered of
     2..max agents); kept where they solved it; plus 30% of the cold-start graphs (`replay_ratio`);
  4. finetune: from the pretrained weights, on that data (validated on itself, as the public `train` does
     when it gets no validation loader).
Each stage's output is saved (graphs in `graphs.json`, weights in the checkpoint) and `ctx.commit()` marks
it; a fit killed inside a stage redoes that stage (its LLM calls then come from the client's cache).

solve (`evaluate_*.py` -> `utils.generate_graph` -> `ARGDesigner.sample`): one graph sampled for the query
with a generator keyed by (seed, item id), then its agents run once in topological order (`num_rounds` 1)
and the decision agent reads them all (`TestGraph.arun`), every agent played by the setting's strong model.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import pathlib
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from hieramas_jax.aio import gather_or_cancel
from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import Item, check_benchmark
from hieramas_jax.fileio import atomic_write_json
from hieramas_jax.learn.checkpoint import params_sha256
from hieramas_jax.learn.encoder import DEFAULT_MODEL
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.mas import roles as roles_lib
from hieramas_jax.mas.rounds import RoundAgent, RoundsConfig, run_rounds
from hieramas_jax.mas.trace import Trace
from hieramas_jax.methods.api import MethodError, RunContext
from hieramas_jax.methods.arg_designer import model
from hieramas_jax.methods.code_tools import docstring_check
from hieramas_jax.methods.common import ParamState, QueryEmbeddings, check_pool, embed_now, off_loop, role_texts
from hieramas_jax.methods.digest import item_fold

_SPLIT, _COLD_ROLES, _SIMPLE_ROLES, _PRUNED, _REPLAY, _SHUFFLE, _SOLVE, _VAL_SPLIT = range(1, 9)
STAGES = ("cold_start", "pretrain", "finetune_data", "finetune")
GRAPHS_FILE = "graphs.json"
PAD_NODES = 8  # every graph is padded to this many nodes (one compiled shape); the largest configuration has 6

# The role pools (`<benchmark>_prompt_set.ROLE_DESCRIPTION`), mapped to the suite's role sets: MMLU's 6 roles
# are 6 of MMLU-Redux's 8; gsm8k's 4 less "Programming Expert" (not in the suite's MATH set) for MATH;
# HumanEval's 5 are HumanEval+'s. "suite" seats the suite's whole role set instead.
REFERENCE_ROLES: dict[str, tuple[str, ...]] = {
    "mmlu_redux": ("Knowlegable Expert", "Critic", "Mathematician", "Psychologist", "Historian", "Doctor"),
    "math": ("Math Solver", "Mathematical Analyst", "Inspector"),
    "humaneval_plus": ("Project Manager", "Algorithm Designer", "Programming Expert", "Test Analyst", "Bug Fixer"),
}
ROLE_POOLS = ("reference", "suite")


@dataclasses.dataclass(frozen=True)
class Budget:
  """One benchmark's public settings (mmlu -> MMLU-Redux, gsm8k -> MATH, humaneval -> HumanEval+).

  Attributes:
    max_agents: the largest configuration (`get_unique_*_configs`: `range(2, 7)` MMLU, `range(2, 5)` gsm8k,
      `range(2, 6)` HumanEval).
    pretrain_lr, finetune_lr: Adam learning rates (`finetune_*.py` `--pretrain_lr`, `--finetune_lr`).
    batch_size: graphs per update (`--batch_size`: 64, 32, 16).
    pretrain_epochs, finetune_epochs: `--pretrain_epochs`, `--finetune_epochs` (gsm8k finetunes 200).
  """

  max_agents: int
  pretrain_lr: float
  finetune_lr: float
  batch_size: int
  pretrain_epochs: int = 100
  finetune_epochs: int = 100


BUDGETS: dict[str, Budget] = {
    "mmlu_redux": Budget(6, 1e-4, 5e-5, 64),
    "math": Budget(4, 1e-4, 5e-5, 32, finetune_epochs=200),
    "humaneval_plus": Budget(5, 8e-5, 1e-5, 16),
}


@dataclasses.dataclass(frozen=True)
class ARGDesignerConfig:
  """ARG-Designer's settings; None: the benchmark's public value (`BUDGETS`).

  Attributes:
    train_queries: training queries used (`cold_start_*.py`: `num_iterations x batch_size` = 40).
    base_rate: share of them for the cold start (`BASE_RATE` 0.4); the rest make the finetune data.
    max_agents, pretrain_lr, finetune_lr, batch_size, pretrain_epochs, finetune_epochs: see `Budget`.
    train_ratio: pretraining's train share of the cold-start graphs (0.9; the rest validate).
    pruning_ratio: share of a sampled graph's edges removed for the finetune data (0.25).
    replay_ratio: share of the cold-start graphs replayed in the finetune data (0.3).
    hidden: the GRUs' and MLPs' width (`args.py`: 256).
    slots: edge slots per node, `max_prev_node` (3).
    clip: gradient-norm clip (`--clip`, 1.0).
    edge_rule: "intended" (an edge with its channel's probability) or "reference" (the public sampler's
      channel-1 draw; model docstring).
    node_inputs: "intended" (training and sampling feed the node-level GRU alike) or "reference" (each as
      the public code does; model docstring).
    role_pool: "reference" (the public prompt set's roles, `REFERENCE_ROLES`) or "suite" (the suite's set).
    encoder: sentence encoder of queries and role profiles (reference all-MiniLM-L6-v2).
    code_tools: on HumanEval+, code outputs run on the docstring examples and readers see the result
      (the reference's `CodeWriting` / `FinalWriteCode`, as GDesigner's; `docstring_check`).
  """

  train_queries: int = 40
  base_rate: float = 0.4
  max_agents: int | None = None
  pretrain_lr: float | None = None
  finetune_lr: float | None = None
  batch_size: int | None = None
  pretrain_epochs: int | None = None
  finetune_epochs: int | None = None
  train_ratio: float = 0.9
  pruning_ratio: float = 0.25
  replay_ratio: float = 0.3
  hidden: int = 256
  slots: int = 3
  clip: float = 1.0
  edge_rule: str = "intended"
  node_inputs: str = "intended"
  role_pool: str = "reference"
  encoder: str = DEFAULT_MODEL
  code_tools: bool = True

  def __post_init__(self):
    if self.edge_rule not in model.EDGE_RULES:
      raise ValueError(f"arg_designer edge_rule must be one of {model.EDGE_RULES}, got {self.edge_rule!r}")
    if self.node_inputs not in model.INPUT_RULES:
      raise ValueError(f"arg_designer node_inputs must be one of {model.INPUT_RULES}, got {self.node_inputs!r}")
    if self.role_pool not in ROLE_POOLS:
      raise ValueError(f"arg_designer role_pool must be one of {ROLE_POOLS}, got {self.role_pool!r}")
    if self.train_queries < 2 or not 0.0 < self.base_rate < 1.0 or not 0.0 < self.train_ratio <= 1.0:
      raise ValueError("arg_designer needs train_queries >= 2 and base_rate, train_ratio in (0, 1)")
    if not 0.0 <= self.pruning_ratio < 1.0 or not 0.0 <= self.replay_ratio <= 1.0:
      raise ValueError("arg_designer needs pruning_ratio in [0, 1) and replay_ratio in [0, 1]")
    if self.max_agents is not None and not 3 <= self.max_agents <= PAD_NODES:
      raise ValueError(f"arg_designer max_agents must be in [3, {PAD_NODES}], got {self.max_agents}")
    for name in ("batch_size", "hidden", "slots"):
      if getattr(self, name) is not None and getattr(self, name) < 1:
        raise ValueError(f"arg_designer {name} must be >= 1, got {getattr(self, name)}")


# --- the public configurations ------------------------------------------------------------------------


def cold_configs(max_agents: int) -> list[tuple[str, int]]:
  """`get_unique_complex_configs`: FullConnected 3.., Mesh 4.. (a set there, whose order varies with
  the interpreter's hash seed; sorted here)."""
  return [(mode, n) for n in range(3, max_agents + 1) for mode in (("FullConnected",) if n == 3 else
                                                                   ("FullConnected", "Mesh"))]


def simple_configs(max_agents: int) -> list[tuple[str, int]]:
  """`get_unique_simple_configs`: Chain 2.., Star 3.., Layered 4.. (sorted, as `cold_configs`)."""
  out = []
  for n in range(2, max_agents + 1):
    out += [("Chain", n)] + ([("Star", n)] if n >= 3 else []) + ([("Layered", n)] if n >= 4 else [])
  return out


def spatial_mask(mode: str, n: int, rng: np.random.Generator) -> np.ndarray:
  """[n, n] bool mask of `utils.get_kwargs(mode, n)` (mask[i, j]: i may send to j)."""
  if mode == "FullConnected" or (mode == "Mesh" and not (n > 4 and int(np.sqrt(n)) ** 2 == n)):
    return ~np.eye(n, dtype=bool)  # `generate_mesh_graph` falls back to full below 9 agents
  mask = np.zeros((n, n), bool)
  if mode == "Mesh":
    size = int(np.sqrt(n))
    for i in range(n):
      if (i + 1) % size:
        mask[i, i + 1] = mask[i + 1, i] = True
      if i < n - size:
        mask[i, i + size] = mask[i + size, i] = True
  elif mode == "Chain":
    for i in range(n - 1):
      mask[i, i + 1] = mask[i + 1, i] = True
  elif mode == "Star":
    mask[0, 1:] = mask[1:, 0] = True
  elif mode == "Layered":  # `generate_layered_graph(n, 2)`: sizes ceil/floor n/2, layers shuffled
    layers = np.array([i for i in range(2) for _ in range(n // 2 + (1 if i < n % 2 else 0))])
    layers = layers[rng.permutation(n)]
    mask = layers[None, :] == layers[:, None] + 1
  else:
    raise ValueError(f"unknown topology {mode!r}")
  return mask


def dag_from_mask(mask: np.ndarray) -> list[tuple[int, int]]:
  """`Graph.construct_spatial_connection_all`: every allowed pair in i-major order unless it closes a cycle."""
  n = mask.shape[0]
  reach = np.eye(n, dtype=bool)  # reach[a, b]: b reachable from a
  edges = []
  for i in range(n):
    for j in range(n):
      if mask[i, j] and not reach[j, i]:
        edges.append((i, j))
        reach[reach[:, i]] |= reach[j]
  return edges


def weak_components(n: int, edges: Sequence[tuple[int, int]]) -> list[list[int]]:
  """Weakly connected components, each from its smallest node (networkx's order for nodes 0..n-1)."""
  parent = list(range(n))

  def find(a):
    while parent[a] != a:
      parent[a] = parent[parent[a]]
      a = parent[a]
    return a

  for u, v in edges:
    parent[find(u)] = find(v)
  comps: dict[int, list[int]] = {}
  for i in range(n):
    comps.setdefault(find(i), []).append(i)
  return sorted(comps.values(), key=lambda c: c[0])


def prune_graph(graph: model.Graph, ratio: float, rng: np.random.Generator) -> model.Graph:
  """`apply_efficiency_strategy(strategy='prune')`: int(E x ratio) random edges go, then every weak component
  but the largest gets one edge from a random node of it to a random node of the largest."""
  edges = list(graph.edges)
  k = int(len(edges) * ratio)
  if k > 0:
    order = rng.permutation(len(edges))
    edges = [edges[i] for i in sorted(order[k:])]
    comps = weak_components(len(graph.roles), edges)
    if len(comps) > 1:
      main = max(comps, key=len)
      for comp in comps:
        if comp is not main:
          edges.append((int(rng.choice(comp)), int(rng.choice(main))))
  return model.Graph(graph.roles, tuple(edges))


def _record(item: Item, roles: Sequence[str], edges: Sequence[tuple[int, int]], mode: str) -> dict[str, Any]:
  return {"item": item.id, "question": item.question, "roles": list(roles), "edges": [list(e) for e in edges],
          "mode": mode}


class ARGDesigner:
  """ARG-Designer on one benchmark and pool setting."""

  name = "arg_designer"
  trainable = True

  def __init__(self, benchmark: str, pool: str, seed: int = 0, config: ARGDesignerConfig = ARGDesignerConfig()):
    self.benchmark, self.pool_name, self.seed = check_benchmark(benchmark), pool, seed
    budget = BUDGETS[benchmark]
    config = dataclasses.replace(config, **{f.name: getattr(budget, f.name) for f in dataclasses.fields(Budget)
                                            if getattr(config, f.name) is None})
    self.config = config
    pool_roles = REFERENCE_ROLES[benchmark] if config.role_pool == "reference" else roles_lib.roles_for(benchmark)
    self.roles = tuple(sorted(pool_roles))  # `role_to_id`: the sorted role names
    for r in self.roles:
      roles_lib.check_role(benchmark, r)
    self.net = model.ARGNet(hidden=config.hidden, slots=config.slots, inputs=config.node_inputs)
    self.params = None
    self.node_range: tuple[int, int] | None = None
    self._table: np.ndarray | None = None
    self.queries = QueryEmbeddings(config.encoder)

  def describe(self) -> dict[str, Any]:
    return {"benchmark": self.benchmark, "pool": self.pool_name, "seed": self.seed, **dataclasses.asdict(self.config)}

  def table(self) -> np.ndarray:
    """[R + 2, D] role-profile embeddings ("Role: description", `precompute_role_embeddings`), START, END."""
    if self._table is None:
      texts = role_texts(self.roles, [roles_lib.role_description(r) for r in self.roles])
      self._table = model.role_table(embed_now(texts, self.config.encoder))
      if self._table.shape[1] != self.net.dim:
        self.net = dataclasses.replace(self.net, dim=self._table.shape[1])
    return self._table

  def _fresh_state(self) -> dict[str, Any]:
    self.table()
    return {"params": model.init_params(self.net, self.seed, len(self.roles)), "step": jnp.int32(0),
            "node_range": jnp.zeros(2, jnp.int32)}

  def _set(self, state: dict[str, Any]) -> None:
    self.params = state["params"]
    lo, hi = (int(x) for x in np.asarray(state["node_range"]))
    self.node_range = (lo, hi)

  def _code_check(self, item: Item):
    return docstring_check(item) if self.config.code_tools else None

  async def _run(self, ctx: RunContext, item: Item, roles: Sequence[str], edges: Sequence[tuple[int, int]]) -> Trace:
    """One pass of the graph's agents in topological order, then the decision agent (`TestGraph.arun`)."""
    n = len(roles)
    adj = np.zeros((n, n), bool)
    for u, v in edges:
      adj[u, v] = True
    strong = ctx.pool.strong
    config = RoundsConfig(tuple(RoundAgent(r, strong) for r in roles), (adj,), (np.zeros((n, n), bool),), strong)
    return await run_rounds(ctx.client, item, config, ctx.settings, method=self.name,
                            code_check=self._code_check(item))

  async def _solved(self, ctx: RunContext, jobs: list[tuple[Item, Sequence[str], Sequence[tuple[int, int]]]]):
    """Whether each (item, roles, edges) graph solved its query: the data is the graphs that did. One slot of
    the run's global bound per rollout, all of a stage's rollouts in flight together."""
    bound = ctx.query_bound(32)

    async def one(job):
      async with bound:
        trace = await self._run(ctx, *job)
      return (await graders.grade_async(job[0], trace.final_text)).correct

    return await gather_or_cancel([asyncio.ensure_future(one(j)) for j in jobs])

  def _config_jobs(self, configs, items, stream: int):
    """Per configuration, roles drawn uniformly with replacement (`random.choices`) and its topology."""
    jobs, modes = [], []
    for c, (mode, n) in enumerate(configs):
      rng = np.random.default_rng([self.seed, stream, c])
      roles = [self.roles[i] for i in rng.integers(0, len(self.roles), n)]
      edges = dag_from_mask(spatial_mask(mode, n, rng))
      for item in items:
        jobs.append((item, roles, edges))
        modes.append(mode)
    return jobs, modes

  def _sample(self, query_emb: np.ndarray, rng: np.random.Generator) -> model.Sample:
    lo, hi = self.node_range
    return model.sample_graph(self.net, self.params, self.table(), query_emb, rng, min_nodes=lo, max_nodes=hi,
                              edge_rule=self.config.edge_rule)

  def _train_sync(self, records, q_rows, params, *, stage: int, lr: float, epochs: int, validate_on_train: bool):
    """The public `train`: Adam, clipped gradients, shuffled batches every epoch, the weights of the epoch with
    the lowest validation loss kept. Runs in a worker thread (jitted steps)."""
    cfg = self.config
    index = {r: i for i, r in enumerate(self.roles)}
    enc = [model.encode_graph(model.Graph(tuple(index[r] for r in rec["roles"]), tuple(map(tuple, rec["edges"]))),
                              PAD_NODES, cfg.slots) for rec in records]
    order = np.random.default_rng([self.seed, _VAL_SPLIT, stage]).permutation(len(records))
    if validate_on_train:
      train_idx = val_idx = order
    else:  # finetune_*.py `run_pretraining`: correct_graphs[:int(len x 0.9)] train, the rest validate
      cut = int(len(records) * cfg.train_ratio)
      train_idx, val_idx = order[:cut], order[cut:]
    table = jnp.asarray(self.table())
    bsz = cfg.batch_size

    def batch(idx):
      pad = bsz - len(idx)
      w = np.concatenate([np.ones(len(idx)), np.zeros(pad)]).astype(np.float32)
      idx = np.concatenate([idx, np.zeros(pad, int)]).astype(int) if len(idx) else np.zeros(bsz, int)
      return (jnp.asarray(q_rows[idx]), jnp.asarray(np.stack([enc[i][0] for i in idx])),
              jnp.asarray(np.array([enc[i][1] for i in idx], np.int32)),
              jnp.asarray(np.stack([enc[i][2] for i in idx]))), jnp.asarray(w)

    state = {"params": params, "opt_state": model.make_optimizer(lr, cfg.clip).init(params)}
    best, best_params, history = float("inf"), params, []
    key = jax.random.fold_in(jax.random.key(self.seed), stage)
    for epoch in range(epochs):
      perm = train_idx[np.random.default_rng([self.seed, _SHUFFLE, stage, epoch]).permutation(len(train_idx))]
      # Pretraining drops the last partial batch (`drop_last=True`), finetuning keeps it; a training set
      # smaller than one batch is still trained on, as one batch (the reference would skip every update).
      full = len(perm) // bsz
      chunks = [perm[b * bsz:(b + 1) * bsz] for b in range(full)]
      if len(perm) % bsz and (validate_on_train or full == 0):
        chunks.append(perm[full * bsz:])
      losses = []
      for b, idx in enumerate(chunks):
        data, w = batch(idx)
        state, loss = model.train_step(state, data, table, w, jax.random.fold_in(key, epoch * 4096 + b), net=self.net,
                                       lr=lr, clip=cfg.clip)
        if not np.isfinite(float(loss)):
          raise FloatingPointError(f"arg_designer: non-finite loss in {STAGES[stage]}, epoch {epoch}, batch {b}")
        losses.append(float(loss))
      val = [float(model.eval_loss(state["params"], data, table, w, net=self.net))
             for data, w in (batch(val_idx[s:s + bsz]) for s in range(0, len(val_idx), bsz))]
      val_loss = float(np.mean(val)) if val else float("inf")
      history.append({"epoch": epoch + 1, "train_loss": float(np.mean(losses)) if losses else None,
                      "val_loss": val_loss})
      if val_loss < best:
        best, best_params = val_loss, state["params"]
    return best_params, {"graphs": len(records), "train": len(train_idx), "validate": len(val_idx),
                         "best_val_loss": best if np.isfinite(best) else None, "epochs": history}

  async def _train(self, records, params, **kwargs):
    if not records:
      return params, {"graphs": 0, "skipped": "no successful graph"}
    q_rows = await self.queries.get([r["question"] for r in records])
    return await asyncio.to_thread(self._train_sync, records, np.asarray(q_rows, np.float32), params, **kwargs)

  async def fit(self, train: Sequence[Item], val: Sequence[Item], ctx: RunContext) -> dict[str, Any]:
    """The four public stages (module docstring); validation queries are not used (the public code has none)."""
    del val
    check_pool(self.name, self.pool_name, ctx)
    cfg = self.config
    state_dir = ctx.require_state_dir(self.name)
    store = ParamState(state_dir / "checkpoints")
    graphs_path = pathlib.Path(state_dir) / GRAPHS_FILE
    template = await asyncio.to_thread(self._fresh_state)
    state = store.restore(template) or template
    records = json.loads(graphs_path.read_text()) if graphs_path.exists() else {}
    items = list(train[:cfg.train_queries])
    if len(items) < 2:
      raise MethodError("arg_designer needs at least 2 training queries")
    split = np.random.default_rng([self.seed, _SPLIT]).permutation(len(items))
    cut = int(cfg.base_rate * len(items))
    base, finetune = [items[i] for i in split[:cut]], [items[i] for i in split[cut:]]
    await self.queries.ensure([it.question for it in items])

    def save(stage: int, **extra):
      nonlocal state
      records["summary"] = {**records.get("summary", {}), **extra}
      atomic_write_json(graphs_path, records)
      state = {**state, "step": jnp.int32(stage)}
      store.save(stage, state)
      ctx.commit()
      ctx.step("stages", stage, len(STAGES))

    ctx.step("stages", int(state["step"]), len(STAGES))
    if int(state["step"]) < 1:  # cold start (`cold_start_*.py`)
      jobs, modes = self._config_jobs(cold_configs(cfg.max_agents), base, _COLD_ROLES)
      solved = await self._solved(ctx, jobs)
      records["cold"] = [_record(j[0], j[1], j[2], m) for j, m, ok in zip(jobs, modes, solved) if ok]
      ctx.log(1, {"arg_designer/cold_start_accuracy": float(np.mean(solved))})
      save(1, cold_rollouts=len(jobs), cold_solved=int(sum(solved)))
    if int(state["step"]) < 2:  # pretrain (`run_pretraining`)
      params, info = await self._train(records["cold"], state["params"], stage=1, lr=cfg.pretrain_lr,
                                       epochs=cfg.pretrain_epochs, validate_on_train=False)
      state = {**state, "params": params, "node_range": _node_range(records["cold"], cfg.max_agents)}
      save(2, pretrain=_brief(info))
    if int(state["step"]) < 3:  # finetune data (`generate_pruned_data`, `generate_simple_data`, replay)
      self._set(state)
      q_rows = await self.queries.get([it.question for it in finetune])
      pruned = []
      for item, q in zip(finetune, q_rows):
        rng = np.random.default_rng([self.seed, _PRUNED, item_fold(item.id)])
        g = prune_graph((await off_loop(self._sample, q, rng)).graph, cfg.pruning_ratio, rng)
        pruned.append((item, [self.roles[r] for r in g.roles], list(g.edges)))
      simple, simple_modes = self._config_jobs(simple_configs(cfg.max_agents), finetune, _SIMPLE_ROLES)
      solved = await self._solved(ctx, pruned + simple)
      modes = ["EfficientPruned"] * len(pruned) + simple_modes
      fresh = [_record(j[0], j[1], j[2], m) for j, m, ok in zip(pruned + simple, modes, solved) if ok]
      rng = np.random.default_rng([self.seed, _REPLAY])
      replay_n = min(int(len(records["cold"]) * cfg.replay_ratio), len(records["cold"]))
      replay = [records["cold"][i] for i in sorted(rng.choice(len(records["cold"]), replay_n, replace=False))]
      records["finetune"] = fresh + replay
      ctx.log(3, {"arg_designer/pruned_accuracy": float(np.mean(solved[:len(pruned)])) if pruned else 0.0,
                  "arg_designer/simple_accuracy": float(np.mean(solved[len(pruned):])) if simple else 0.0})
      save(3, pruned_rollouts=len(pruned), pruned_solved=int(sum(solved[:len(pruned)])),
           simple_rollouts=len(simple), simple_solved=int(sum(solved[len(pruned):])), replayed=len(replay))
    if int(state["step"]) < 4:  # finetune (`run_finetuning`), from the pretrained weights
      params, info = await self._train(records["finetune"], state["params"], stage=3, lr=cfg.finetune_lr,
                                       epochs=cfg.finetune_epochs, validate_on_train=True)
      node_range = _node_range(records["finetune"], cfg.max_agents) if records["finetune"] else state["node_range"]
      state = {**state, "params": params, "node_range": node_range}
      save(4, finetune=_brief(info))
    self._set(state)
    store.finish(state)
    return {"stages": len(STAGES), "params_sha256": params_sha256(state["params"]),
            "node_range": list(self.node_range), **records.get("summary", {})}

  def load(self, state_dir) -> None:
    state = ParamState.load_finished(state_dir, self._fresh_state(), self.name)
    if int(state["step"]) != len(STAGES):
      raise MethodError(f"{state_dir} holds an arg_designer fit of {int(state['step'])} stages, not {len(STAGES)}")
    self._set(state)

  def load_untrained(self) -> None:
    """The seeded initial generator `fit` starts from, before any stage trained (the runner's untrained check),
    sampling between 2 agents and the largest configuration (what `_node_range` gives without training graphs)."""
    self._set({**self._fresh_state(), "node_range": _node_range([], self.config.max_agents)})

  async def prepare(self, items: Sequence[Item], ctx: RunContext) -> None:
    del ctx
    await asyncio.to_thread(self.table)
    await self.queries.ensure([it.question for it in items])

  async def solve(self, ctx: RunContext, item: Item) -> Trace:
    check_pool(self.name, self.pool_name, ctx)
    if self.params is None:
      raise MethodError("arg_designer.solve before fit() or load()")
    q = (await self.queries.get([item.question]))[0]
    sample = await off_loop(self._sample, q, np.random.default_rng([self.seed, _SOLVE, item_fold(item.id)]))
    roles = [self.roles[r] for r in sample.graph.roles]
    trace = await self._run(ctx, item, roles, sample.graph.edges)
    trace.extra.update({"agents": roles, "edges": [list(e) for e in sample.graph.edges],
                        "forced_edges": list(sample.forced), "graph_log_prob": sample.log_prob})
    return trace


def _node_range(records, max_agents: int):
  """[min, max] agents of the training graphs (`data_statistics` `min_num_nodes`, `max_num_nodes`)."""
  sizes = [len(r["roles"]) for r in records] or [2, max_agents]
  return jnp.asarray([min(sizes), max(sizes)], jnp.int32)


def _brief(info: dict[str, Any]) -> dict[str, Any]:
  """A stage's training summary: its counts, the last training loss, and the per-epoch curve as two lists
  (`curve`: mean training loss and validation loss per epoch, the values `_train_sync` computes anyway), so
  a report can say whether the stage's loss moved (report/beyond_learning.py) without refitting."""
  epochs = info.get("epochs") or []
  out = {**{k: v for k, v in info.items() if k != "epochs"},
         "last_train_loss": epochs[-1]["train_loss"] if epochs else None}
  if epochs:
    finite = lambda v: v if v is not None and np.isfinite(v) else None  # no validation graphs: inf -> None
    out["curve"] = {"train_loss": [finite(e["train_loss"]) for e in epochs],
                    "val_loss": [finite(e["val_loss"]) for e in epochs]}
  return out


def make(*, benchmark: str, pool: str, seed: int = 0, **options) -> ARGDesigner:
  get_pool(pool)
  return ARGDesigner(benchmark, pool, seed, ARGDesignerConfig(**options))

"""The MASRouter baseline: a learned cascade builds each query's system (mode, agent count, roles, LLMs).

Collaboration modes, as the public code defines them (`reasoning_profile.py`, `get_kwargs`): IO and CoT
(independent agents, no edges), Chain (agent j -> j + 1), FullConnected (every forward edge), Debate (no
spatial edges, two rounds, each agent reading the others' previous answers), Reflection (independent
agents that each reflect on their own answer). Agents are played by the routed LLMs with the routed roles
(`mas.rounds.run_rounds`); the decision agent is the most frequent routed LLM (the reference's
`find_mode`).

fit: `epochs` passes over at most `max_batches` batches of `batch_size` training queries (reference:
MATH and HumanEval 5 epochs, MMLU 10 epochs of 40 batches of 16; here 2 epochs; lr 0.01), one Adam update
per batch on utility = solved - rate * cost (rate 100 for MATH, 500 for MMLU; 100 for HumanEval+). The
latest state is saved after every update. solve: one system sampled with a generator keyed by (seed, item id).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from hieramas_jax.aio import gather_or_cancel
from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import DOMAIN, Item
from hieramas_jax.learn.batching import batch_indices
from hieramas_jax.learn.checkpoint import params_sha256
from hieramas_jax.learn.encoder import DEFAULT_MODEL
from hieramas_jax.llm.registry import POOLS, get_model, get_pool
from hieramas_jax.mas import roles
from hieramas_jax.mas.rounds import InnerTest, RoundAgent, RoundsConfig, run_rounds, temporal_from_spatial
from hieramas_jax.mas.runtime import RunSettings
from hieramas_jax.mas.trace import Trace
from hieramas_jax.methods.api import MethodError, RunContext
from hieramas_jax.methods.code_tools import docstring_check
from hieramas_jax.methods.common import ParamState, QueryEmbeddings, check_pool, embed_now, off_loop, role_texts
from hieramas_jax.methods.digest import item_fold
from hieramas_jax.methods.masrouter import model

# Collaboration modes and their profiles, as the public code words them (`MAR/Agent/reasoning_profile.py`;
# embedded as "Name : Description", as `mas_router.py` does).
MODES = (
    ("IO", "In single-agent IO reasoning, a single agent directly gives an output based on the input."),
    ("CoT", "In single-agent CoT reasoning, a single agent reasons step-by-step to achieve a goal."),
    ("Chain", "In multi-agent chain reasoning, multiple agents sequentially reason and pass information in a "
              "chain-like manner."),
    ("FullConnected", "In multi-agent full-graph reasoning, multiple agents reason collectively over the entire "
                      "graph structure."),
    ("Debate", "In multi-agent debate reasoning, multiple agents engage in a structured argumentative dialogue to "
               "explore different perspectives, challenge assumptions, and reach a consensus."),
    ("Reflection", "In reflection reasoning, multiple agents reflect on their own reasoning processes and outcomes to "
                   "improve their performance."),
)
# The instruction each mode adds to an agent's system message: the public `MAR/Prompts/reasoning.py`
# (`reasoning_prompt`), word for word; "" adds nothing. Nothing else asks the agents to reason (no
# "Let's think step by step." in the question block: `cot=False`): CoT's own sentence does.
MODE_INSTRUCTIONS = {
    "IO": "", "CoT": "Please give step by step answers to the questions.", "Chain": "", "FullConnected": "",
    "Debate": "Please try your best to give answers that are different or opposite to those of other agents.",
    "Reflection": "",
}
# Task profiles: one per benchmark domain (the reference classifies among its datasets' task types).
TASKS = (("math", "Math: mathematical problems that need calculation, algebra, geometry or proof to reach an "
                  "exact final answer."),
         ("knowledge", "Commonsense and knowledge: multiple-choice questions across the sciences, humanities, "
                       "law, medicine and everyday facts."),
         ("code", "Code: writing a correct Python function from its signature, docstring and examples."))
TASK_INDEX = {name: i for i, (name, _) in enumerate(TASKS)}
# The reference's cost rates (utility = solved - rate * cost); HumanEval+: the MATH rate (docs/methods.md).
# Roles whose own code output gets the inner-test note: the public Code roles with the `PythonInnerTest`
# post-process (`MAR/Roles/Code/ProgrammingExpert.json`, `BugFixer.json`; ReflectProgrammer is not in our set).
NOTE_ROLES = frozenset({"Programming Expert", "Bug Fixer"})
COST_RATE = {"math": 100.0, "mmlu_redux": 500.0, "humaneval_plus": 100.0}
_TRAIN_STREAM, _SOLVE_STREAM = 1, 2
# Padded sizes of the role and LLM tables (the largest role set and pool of the suite).
MAX_ROLES = max(len(r) for r in roles.ROLE_SETS.values())
MAX_LLMS = max(len(p.models) for p in POOLS.values())


@dataclasses.dataclass(frozen=True)
class MASRouterConfig:
  """MASRouter's hyperparameters (reference values in parentheses).

  Attributes:
    epochs: passes over the training batches (MATH/HumanEval 5, MMLU 10; default 2 everywhere: 1,024 MMLU
      training queries, about the paper's Table 11 training cost for MASRouter on the sim's prices, and
      160 sequential updates of 16 queries would dominate the table's wall time).
    max_batches: batches per epoch (MMLU 40; 0: every batch of the training split).
    batch_size: queries per update (16; HumanEval 4); 0: the benchmark's reference value.
    lr: Adam learning rate (0.01).
    max_agents: most agents per system (6).
    cost_rate: utility's cost rate; 0: the benchmark's reference value.
    encoder: sentence encoder (all-MiniLM-L6-v2).
    temperature: sampling temperature of every routed agent's call (the public code's 1.0; the suite's
      shared RunSettings use the HieraMAS reference's 0.2).
    inner_test: the public Code agents' HumanEval tools (`MAR/Agent/agent.py`, `MAR/Prompts/`): an agent whose
      inputs hold code passing the prompt's docstring examples returns that input without a call, code in
      an input comes with "The code is (not) solved." and the feedback, and Programming Expert / Bug Fixer
      outputs get that note (`code_tools.docstring_check(detect="contains")`, `run_rounds(inner_test=...)`);
      False: the earlier variant, no code runs.
  """

  epochs: int = 2
  max_batches: int = 40
  batch_size: int = 0
  lr: float = 0.01
  max_agents: int = 6
  cost_rate: float = 0.0
  encoder: str = DEFAULT_MODEL
  temperature: float = 1.0
  inner_test: bool = True

  def __post_init__(self):
    if self.epochs < 0 or self.max_batches < 0 or self.batch_size < 0 or self.max_agents < 1 or self.lr <= 0:
      raise ValueError("masrouter needs epochs, max_batches, batch_size >= 0, max_agents >= 1, lr > 0")
    if self.temperature < 0:
      raise ValueError(f"masrouter temperature must be >= 0, got {self.temperature}")


def mode_graph(mode: str, n: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
  """(spatial per round, temporal per round) of a collaboration mode over n agents (reference `get_kwargs`)."""
  empty = np.zeros((n, n), bool)
  if mode == "Chain":
    return [np.eye(n, k=1, dtype=bool)], [empty]
  if mode == "FullConnected":
    return [np.triu(np.ones((n, n), bool), k=1)], [empty]
  if mode == "Debate":
    return [empty, empty], [empty, temporal_from_spatial(empty)]
  return [empty], [empty]


def decision_model(llms: Sequence[str]) -> str:
  """The most frequent routed LLM; ties go to the one routed first (the reference's `find_mode`)."""
  return collections.Counter(llms).most_common(1)[0][0]


class MASRouter:
  """MASRouter on one benchmark and pool setting."""

  name = "masrouter"
  trainable = True

  def __init__(self, benchmark: str, pool: str, seed: int = 0, config: MASRouterConfig = MASRouterConfig()):
    self.benchmark, self.pool_name, self.seed, self.config = benchmark, pool, seed, config
    self.roles = roles.roles_for(benchmark)
    self.models = get_pool(pool).models
    self.net = model.RouterNet(max_agents=config.max_agents)
    self.params = None
    self._static: dict[str, np.ndarray] | None = None
    self.queries = QueryEmbeddings(config.encoder)

  @property
  def batch_size(self) -> int:
    return self.config.batch_size or (4 if self.benchmark == "humaneval_plus" else 16)

  @property
  def cost_rate(self) -> float:
    return self.config.cost_rate or COST_RATE[self.benchmark]

  def describe(self) -> dict[str, Any]:
    return {"benchmark": self.benchmark, "pool": self.pool_name, "seed": self.seed, "batch_size": self.batch_size,
            "cost_rate": self.cost_rate, **{k: v for k, v in dataclasses.asdict(self.config).items()
                                            if k not in ("batch_size", "cost_rate")
                                            # inner_test only acts on HumanEval+ (no examples elsewhere)
                                            and (k != "inner_test" or self.benchmark == "humaneval_plus")}}

  def _static_embeddings(self) -> dict[str, np.ndarray]:
    """Task, mode, role and LLM profile embeddings (computed once; call off the event loop the first time)."""
    if self._static is None:
      texts = {"tasks": [t for _, t in TASKS], "modes": [f"{n} : {d}" for n, d in MODES],
               "roles": role_texts(self.roles, [roles.role_description(r) for r in self.roles]),
               "llms": [f"{m} : {get_model(m).profile}" for m in self.models]}
      embs = embed_now([t for v in texts.values() for t in v], self.config.encoder)
      out, start = {}, 0
      for key, v in texts.items():
        out[key] = embs[start:start + len(v)]
        start += len(v)
      self._static = out
    return self._static

  async def _inputs(self, items: Sequence[Item]) -> model.RouterInputs:
    """The controller's inputs, roles and LLMs padded to MAX_ROLES / MAX_LLMS rows: one compiled program per
    batch size serves every benchmark and pool."""
    s = await asyncio.to_thread(self._static_embeddings)
    q = await self.queries.get([it.question for it in items])

    def pad(rows: np.ndarray, size: int) -> tuple[jax.Array, jax.Array]:
      out = np.zeros((size, rows.shape[1]), np.float32)
      out[:len(rows)] = rows
      return jnp.asarray(out), jnp.asarray(np.arange(size) < len(rows))

    roles_, role_mask = pad(s["roles"], MAX_ROLES)
    llms_, llm_mask = pad(s["llms"], MAX_LLMS)
    return model.RouterInputs(jnp.asarray(q), jnp.asarray(s["tasks"]), jnp.asarray(s["modes"]), roles_, llms_,
                              role_mask, llm_mask)

  def _fresh_state(self) -> dict[str, Any]:
    # Parameter shapes depend on the embedding width only: one canonical input shape, so every cell's
    # init is one compile (and the same values for a given seed as any other input shape would give).
    dim = self._static_embeddings()["tasks"].shape[1]
    one = jnp.zeros((1, dim), jnp.float32)
    params = model.init_params(jax.random.key(self.seed), model.RouterInputs(one, one, one, one, one), net=self.net)
    return {"params": params, "opt_state": optax.adam(self.config.lr).init(params), "step": jnp.int32(0)}

  def _settings(self, ctx: RunContext) -> RunSettings:
    """The run's settings at MASRouter's own temperature (reference 1.0)."""
    return dataclasses.replace(ctx.settings, temperature=self.config.temperature)

  def system(self, choices: model.Choices, b: int) -> tuple[str, RoundsConfig]:
    """The b-th query's sampled system as (mode name, a runnable round graph)."""
    mode = MODES[int(choices.mode[b])][0]
    n = int(choices.agents[b])
    llms = [self.models[int(l)] for l in np.asarray(choices.llms[b])[:n]]
    agents = tuple(RoundAgent(self.roles[int(r)], llm, reflect=mode == "Reflection")
                   for r, llm in zip(np.asarray(choices.roles[b])[:n], llms))
    spatial, temporal = mode_graph(mode, n)
    return mode, RoundsConfig(agents, tuple(spatial), tuple(temporal), decision_model(llms), cot=False,
                              reasoning=MODE_INSTRUCTIONS[mode])

  def _steps(self, num_train: int) -> int:
    per_epoch = max(1, num_train // self.batch_size)
    if self.config.max_batches:
      per_epoch = min(per_epoch, self.config.max_batches)
    return self.config.epochs * per_epoch

  async def fit(self, train: Sequence[Item], val: Sequence[Item], ctx: RunContext) -> dict[str, Any]:
    """REINFORCE on utility minus cost over the training queries (no validation selection, as in the reference)."""
    del val
    check_pool(self.name, self.pool_name, ctx)
    store = ParamState(ctx.require_state_dir(self.name) / "checkpoints")
    template = await asyncio.to_thread(self._fresh_state)
    state = store.restore(template) or template
    await self.queries.ensure([it.question for it in train])  # one embedding job, not one per step
    bound = ctx.query_bound(32)
    steps = self._steps(len(train))
    labels_for = jnp.full((self.batch_size,), TASK_INDEX[DOMAIN[self.benchmark]], jnp.int32)
    history = []
    ctx.step("training", int(state["step"]), steps)  # the live display's step, rate, ETA
    for step in range(int(state["step"]), steps):
      batch = [train[i] for i in batch_indices(self.seed, step, self.batch_size, len(train))]
      inputs = await self._inputs(batch)
      rng = jax.random.fold_in(jax.random.key(self.seed), _TRAIN_STREAM * 1_000_003 + step)
      # Jitted calls in a worker thread: the first compiles for seconds while other cells keep running.
      out = await off_loop(model.sample, state["params"], inputs, rng, net=self.net)
      systems = [self.system(out.choices, b) for b in range(len(batch))]

      async def one(b):
        async with bound:
          trace = await run_rounds(ctx.client, batch[b], systems[b][1], self._settings(ctx), method=self.name,
                                   inner_test=self._inner_test(batch[b]))
        grade = await graders.grade_async(batch[b], trace.final_text)
        return float(grade.correct), trace.cost_usd

      results = await gather_or_cancel([asyncio.ensure_future(one(b)) for b in range(len(batch))])
      solved = np.array([r[0] for r in results])
      cost = np.array([r[1] for r in results])
      utility = jnp.asarray(solved - self.cost_rate * cost, jnp.float32)
      new_state, loss = await off_loop(model.train_step, state, inputs, rng, out.choices, labels_for, utility,
                                       net=self.net, lr=self.config.lr)
      if not np.isfinite(float(loss)):
        raise FloatingPointError(f"masrouter: non-finite loss at step {step}")
      state = new_state
      store.save(step + 1, state)
      ctx.commit()
      ctx.step("training", step + 1, steps)
      scalars = {"masrouter/loss": float(loss), "masrouter/batch_accuracy": float(solved.mean()),
                 "masrouter/batch_mean_cost_usd": float(cost.mean()), "masrouter/mean_utility": float(utility.mean()),
                 "masrouter/mean_agents": float(np.mean(np.asarray(out.choices.agents)))}
      ctx.log(step + 1, scalars)
      history.append({"step": step + 1, **scalars,
                      "modes": collections.Counter(name for name, _ in systems).most_common()})
    self.params = state["params"]
    store.finish(state)
    return {"steps": steps, "batch_size": self.batch_size, "cost_rate": self.cost_rate,
            "params_sha256": params_sha256(self.params), "history": history[-20:]}

  def _inner_test(self, item: Item) -> InnerTest | None:
    check = docstring_check(item, detect="contains") if self.config.inner_test else None
    return None if check is None else InnerTest(check, NOTE_ROLES)

  def load(self, state_dir) -> None:
    self.params = ParamState.load_finished(state_dir, self._fresh_state(), self.name)["params"]

  def load_untrained(self) -> None:
    """The seeded initial state `fit` starts from, before any update (the runner's untrained check)."""
    self.params = self._fresh_state()["params"]

  async def prepare(self, items: Sequence[Item], ctx: RunContext) -> None:
    del ctx
    await asyncio.to_thread(self._static_embeddings)
    await self.queries.ensure([it.question for it in items])

  async def solve(self, ctx: RunContext, item: Item) -> Trace:
    check_pool(self.name, self.pool_name, ctx)
    if self.params is None:
      raise MethodError("masrouter.solve before fit() or load()")
    inputs = await self._inputs([item])
    rng = jax.random.fold_in(jax.random.key(self.seed), _SOLVE_STREAM * 1_000_003 + item_fold(item.id))
    out = await off_loop(model.sample, self.params, inputs, rng, net=self.net)
    mode, system = self.system(out.choices, 0)
    trace = await run_rounds(ctx.client, item, system, self._settings(ctx), method=self.name,
                             inner_test=self._inner_test(item))
    trace.extra.update({"mode": mode, "agents": int(out.choices.agents[0]),
                        "roles": [a.role for a in system.agents], "llms": [a.model for a in system.agents],
                        "decision_model": system.decision_model})
    return trace


def make(*, benchmark: str, pool: str, seed: int = 0, **options) -> MASRouter:
  return MASRouter(benchmark, pool, seed, MASRouterConfig(**options))

"""Rollouts: policy choices + a DAG -> MASConfig -> one MAS run over HTTP -> graded, costed, rewarded.

One rollout is one query run through one concrete configuration. What it records is exactly what the
rewards need (paper Sec. 3.3):

- system level: the final answer graded by the real grader (with `consensus`, the answer every active
  role agrees on, as the reference does), the query's total cost (every call of its trace, the decision
  node included) and the decision node's own cost (the reference's system-reward cost);
- node level: each active supernode's own output (its synthesizer's text, or its solo agent's) graded
  by the same grader, and that node's own cost: the sum of `cost_usd` over the trace's call records
  whose `node` is that supernode. Costs never come from a global counter (the reference code's defect,
  docs/reference-differences.md), so concurrent rollouts cannot leak cost into each other.

Roles are indexed in the benchmark's role order (R of them); a skipped synthesizer removes its role
from the MASConfig (`policy.choices_to_config`), so its node cost is 0 and it is not graded.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Sequence

import jax
import numpy as np

from hieramas_jax.aio import gather_or_cancel
from hieramas_jax.benchmarks import extract, graders
from hieramas_jax.benchmarks.data import Item
from hieramas_jax.learn import policy as policy_lib
from hieramas_jax.learn import rewards as rewards_lib
from hieramas_jax.llm.registry import PoolSetting
from hieramas_jax.mas import roles as roles_lib
from hieramas_jax.mas.config import MASConfig
from hieramas_jax.mas.runtime import ChatClient, RunSettings, run_mas
from hieramas_jax.mas.trace import DECISION_NODE, Trace
from hieramas_jax.methods.hieramas.prompts import PROMPT_SETS
from hieramas_jax.methods.voting import majority_vote


# Jitted once per shape: called eagerly, each jnp op of the reward formula would compile on its own.
_role_rewards = jax.jit(rewards_lib.role_rewards, static_argnames=("alpha", "k"))
_reference_role_rewards = jax.jit(rewards_lib.reference_role_rewards, static_argnames=("alpha", "k"))
_system_reward = jax.jit(rewards_lib.system_reward, static_argnames=("k",))


def system_rewards(solved, cost, *, k: float) -> np.ndarray:
  """`rewards.system_reward` on host arrays (any shape), as numpy float32."""
  return np.asarray(_system_reward(np.asarray(solved, bool), np.asarray(cost, np.float32), k=float(k)), np.float32)


class RolloutError(RuntimeError):
  """A rollout produced something the rewards cannot use (non-finite reward, wrong benchmark)."""


# Roles the reference code treats as giving no checkable answer (alpha = 0, never dropped at inference):
# `NON_ANSWER_ROLES` of graph/learnable_multi_node_graph.py (its MMLU roles all answer A-D).
NON_ANSWER_ROLES = frozenset({"Project Manager", "Algorithm Designer", "Test Analyst"})


def checkable_roles(benchmark: str) -> tuple[bool, ...]:
  """Which roles' own output the node level grades (alpha applies), per role in `roles_for` order.

  The reference's HumanEval Project Manager, Algorithm Designer and Test Analyst plan, design or list
  tests rather than write the function, so their node reward is not used (alpha = 0); every other
  role answers in the benchmark's format.
  """
  return tuple(r not in NON_ANSWER_ROLES for r in roles_lib.roles_for(benchmark))


async def consensus_index(item: Item, texts: Sequence[str], match: str = "text") -> int | None:
  """The consensus override: if all active roles agree, that is the answer. Returns the index of the text
  that is final (0 when they agree; None: they differ, or nothing to compare).

  match="text" (the reference's `forward`): every role's extracted output is identical, where the
  extractor is the identity on MMLU-Redux and MATH (the whole text, whitespace at the ends aside) and the
  code extraction on HumanEval+; different models almost never write identical texts, so it rarely fires.
  match="answer" (the suite's earlier rule): every text with an extractable answer shares it, answers
  compared as `methods.voting` compares them (MMLU letter, MATH equivalence, normalised code).
  """
  if not texts:
    return None
  if match == "text":
    if item.benchmark == "humaneval_plus":
      keys = [extract.extract_code(t, item.meta["entry_point"]) for t in texts]
    else:
      keys = [t.strip() for t in texts]
    return 0 if keys[0] is not None and all(k == keys[0] for k in keys) else None
  vote = await majority_vote(item, list(texts))
  return vote.winner if len(vote.counts) == 1 else None


@dataclasses.dataclass(frozen=True)
class Setup:
  """What a benchmark x pool setting fixes for the policy, the classifier and the runtime.

  Attributes:
    benchmark: benchmark name.
    roles: the R roles (supernodes), in order.
    descriptions: their descriptions (paper Table 13 style).
    models: the pool's M LLMs (choice M = skip).
    decision_model: the final decision node's LLM (the setting's strong backbone).
    strong_model: the model used everywhere by the "w/o LLM Selection" ablation.
    num_proposers: W.
    checkable: [R] bool, roles whose own output is graded (node level).
    prompts: the message builders of every MAS run (config `prompt_set`: the suite's or the reference's).
  """

  benchmark: str
  roles: tuple[str, ...]
  descriptions: tuple[str, ...]
  models: tuple[str, ...]
  decision_model: str
  strong_model: str
  num_proposers: int
  checkable: tuple[bool, ...]
  prompts: roles_lib.PromptSet = roles_lib.SUITE_PROMPTS

  @classmethod
  def make(cls, benchmark: str, pool: PoolSetting, num_proposers: int, prompt_set: str = "suite") -> "Setup":
    role_names = roles_lib.roles_for(benchmark)
    return cls(benchmark=benchmark, roles=role_names,
               descriptions=tuple(roles_lib.role_description(r) for r in role_names), models=tuple(pool.models),
               decision_model=pool.strong, strong_model=pool.strong, num_proposers=num_proposers,
               checkable=checkable_roles(benchmark), prompts=PROMPT_SETS[prompt_set])

  @property
  def num_roles(self) -> int:
    return len(self.roles)

  @property
  def skip_index(self) -> int:
    return len(self.models)

  def choice_names(self, choices) -> list[list[str]]:
    """[R, P] indices -> model names ("skip" for the skip token)."""
    names = list(self.models) + ["skip"]
    return [[names[int(c)] for c in row] for row in np.asarray(choices)]

  def strong_choices(self) -> np.ndarray:
    """[R, P] choices with the strong model at every position (w/o LLM Selection)."""
    return np.full((self.num_roles, self.num_proposers + 1), self.models.index(self.strong_model), np.int32)

  def to_config(self, choices, adjacency) -> tuple[MASConfig, list[int]]:
    """`policy.choices_to_config` with this setting's roles, pool and decision model."""
    return policy_lib.choices_to_config(choices, self.roles, self.models, adjacency, self.decision_model)


@dataclasses.dataclass(frozen=True)
class Rollout:
  """One graded MAS run.

  Attributes:
    item_id: the query.
    choices: [R, P] the policy's choices (indices; M = skip).
    adjacency: [R, R] the DAG over all roles before skipped roles were removed.
    active_roles: role indices that ran, in node order (node i of the trace is role active_roles[i]).
    trace: the full trace (every call with its node, position, model and cost).
    system_solved: final answer graded correct (the consensus answer where the roles agreed).
    system_cost: USD of every call of the query.
    decision_cost: USD of the decision node's call.
    consensus: the roles agreed and their answer was graded instead of the decision node's.
    node_solved: [R] each role's own output graded correct (False for inactive roles).
    node_cost: [R] USD of each role's own calls (0 for inactive roles).
    node_checkable: [R] active and checkable (where alpha applies under the "total" charging).
  """

  item_id: str
  choices: np.ndarray
  adjacency: np.ndarray
  active_roles: tuple[int, ...]
  trace: Trace
  system_solved: bool
  system_cost: float
  node_solved: np.ndarray
  node_cost: np.ndarray
  node_checkable: np.ndarray
  decision_cost: float = 0.0
  consensus: bool = False

  @property
  def node_active(self) -> np.ndarray:
    active = np.zeros(len(self.node_cost), bool)
    active[list(self.active_roles)] = True
    return active

  def system_reward(self, k: float) -> float:
    return float(system_rewards(self.system_solved, self.system_cost, k=k))


def node_costs(trace: Trace, active_roles: Sequence[int], num_roles: int) -> np.ndarray:
  """[R] USD per role: sum of the trace's call records of that role's node (decision call excluded)."""
  cost = np.zeros(num_roles, np.float64)
  for call in trace.calls:
    if 0 <= call.node < len(active_roles):
      cost[active_roles[call.node]] += call.cost_usd
  return cost


def decision_cost(trace: Trace) -> float:
  """USD of the trace's decision-node calls (the reference's system-reward cost)."""
  return float(sum(c.cost_usd for c in trace.calls if c.node == DECISION_NODE))


async def run_rollout(client: ChatClient, setup: Setup, item: Item, choices, adjacency,
                      settings: RunSettings = RunSettings(), *, method: str = "hieramas",
                      grade_nodes: bool = True, consensus: str | None = None) -> Rollout:
  """Runs one query through the configuration the choices and DAG describe, and grades it.

  Args:
    client: the run's LLM client.
    setup: roles, pool, decision model.
    item: the query (must be from `setup.benchmark`).
    choices: [R, P] ints.
    adjacency: [R, R] bool DAG over all roles.
    settings: sampling settings.
    method: name written into the trace.
    grade_nodes: grade every active node's own output (stage 1 needs it; stage 2 and inference only
      need the system grade).
    consensus: grade the roles' common answer instead of the decision node's when they all agree, by
      `consensus_index`'s rule of that name ("text" or "answer"); None: no override.
  """
  if item.benchmark != setup.benchmark:
    raise RolloutError(f"item {item.id} is from {item.benchmark}, the setup is for {setup.benchmark}")
  choices = np.asarray(choices, np.int32)
  adjacency = np.asarray(adjacency, bool)
  config, active = setup.to_config(choices, adjacency)
  trace = await run_mas(client, item, config, settings, method=method, prompts=setup.prompts)
  r = setup.num_roles
  node_solved = np.zeros(r, bool)
  checkable = np.zeros(r, bool)
  final_text, agreed = trace.final_text, None
  if consensus:
    agreed = await consensus_index(item, [trace.node_texts[i] for i in range(len(active))], consensus)
    if agreed is not None:
      final_text = trace.node_texts[agreed]
      trace.extra["consensus"] = {"node": int(agreed)}
  graded = [graders.grade_async(item, final_text)]
  if grade_nodes:
    graded += [graders.grade_async(item, trace.node_texts[i]) for i in range(len(active))]
  grades = await asyncio.gather(*graded)
  if grade_nodes:
    for i, role_index in enumerate(active):
      node_solved[role_index] = bool(grades[1 + i].correct)
      checkable[role_index] = setup.checkable[role_index]
  return Rollout(item_id=item.id, choices=choices, adjacency=adjacency, active_roles=tuple(active), trace=trace,
                 system_solved=bool(grades[0].correct), system_cost=float(trace.cost_usd),
                 node_solved=node_solved, node_cost=node_costs(trace, active, r), node_checkable=checkable,
                 decision_cost=decision_cost(trace), consensus=agreed is not None)


async def run_rollouts(client: ChatClient, setup: Setup, items: Sequence[Item], choices, adjacency,
                       settings: RunSettings = RunSettings(), *, bound: int | asyncio.Semaphore = 32,
                       grade_nodes: bool = True, consensus: str | None = None) -> list[Rollout]:
  """All rollouts of a batch concurrently (`choices` [B, R, P], `adjacency` [B, R, R]), in input order.

  `bound` caps the MAS runs in flight (the client's semaphore separately caps calls per endpoint).
  """
  choices = np.asarray(choices)
  adjacency = np.asarray(adjacency)
  if choices.shape[0] != len(items) or adjacency.shape[0] != len(items):
    raise RolloutError(f"{len(items)} items but choices {choices.shape} and adjacency {adjacency.shape}")
  sem = asyncio.Semaphore(bound) if isinstance(bound, int) else bound

  async def one(i):
    async with sem:
      return await run_rollout(client, setup, items[i], choices[i], adjacency[i], settings, grade_nodes=grade_nodes,
                               consensus=consensus)

  return await gather_or_cancel([asyncio.ensure_future(one(i)) for i in range(len(items))])


def system_costs(rollouts: Sequence[Rollout], system_cost: str) -> np.ndarray:
  """[B] USD the system reward charges: each rollout's decision-node cost or its total cost."""
  if system_cost not in rewards_lib.SYSTEM_COST:
    raise RolloutError(f"system_cost must be one of {rewards_lib.SYSTEM_COST}, got {system_cost!r}")
  return np.array([r.decision_cost if system_cost == "decision" else r.system_cost for r in rollouts], np.float32)


def rollout_system_rewards(rollouts: Sequence[Rollout], *, k: float, system_cost: str) -> np.ndarray:
  """[B] system rewards of a batch (stage-1 credit, validation, stage-2 labels: one definition)."""
  return system_rewards([r.system_solved for r in rollouts], system_costs(rollouts, system_cost), k=k)


def batch_rewards(rollouts: Sequence[Rollout], *, alpha: float, k: float, system_cost: str = "total",
                  role_checkable: Sequence[bool] | None = None) -> np.ndarray:
  """[B, R] role rewards of a batch; raises naming the query if not finite.

  system_cost "decision": `rewards.reference_role_rewards` (the reference), which needs `role_checkable`
  ([R], `Setup.checkable`: alpha applies to a role whether it ran or not); "total": `rewards.role_rewards`
  (the suite's earlier recipe: alpha only where an active role's output was graded).
  """
  node_solved = np.stack([r.node_solved for r in rollouts])
  node_cost = np.stack([r.node_cost for r in rollouts]).astype(np.float32)
  checkable = np.stack([r.node_checkable for r in rollouts])
  system_solved = np.array([r.system_solved for r in rollouts])
  cost = system_costs(rollouts, system_cost)
  if system_cost == "decision":
    if role_checkable is None or len(role_checkable) != node_cost.shape[1]:
      raise RolloutError(f"the decision-cost reward needs role_checkable for all {node_cost.shape[1]} roles")
    active = np.stack([r.node_active for r in rollouts])
    per_role = np.broadcast_to(np.asarray(role_checkable, bool), active.shape)
    rewards = np.asarray(_reference_role_rewards(node_solved, node_cost, active, per_role, system_solved, cost,
                                                 alpha=float(alpha), k=float(k)))
  else:
    rewards = np.asarray(_role_rewards(node_solved, node_cost, checkable, system_solved, cost, alpha=float(alpha),
                                       k=float(k)))
  bad = ~np.isfinite(rewards)
  if bad.any():
    b, r = np.argwhere(bad)[0]
    raise RolloutError(f"non-finite reward {rewards[b, r]} for query {rollouts[b].item_id}, role {r} "
                       f"(node cost {node_cost[b, r]}, system cost {cost[b]})")
  return rewards.astype(np.float32)

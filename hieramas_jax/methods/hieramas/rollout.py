"""Rollouts: policy choices + a DAG -> MASConfig -> one MAS run over HTTP -> graded, costed, rewarded.

One rollout is one query run through one concrete configuration. What it records is exactly what the
rewards need (paper Sec. 3.3):

- system level: the final answer graded by the real grader, and the query's total cost (every call of
  its trace, the decision node included);
- node level: each active supernode's own output (its synthesizer's text, or its solo agent's) graded
  by the same grader, and that node's own cost: the sum of `cost_usd` over the trace's call records
  whose `node` is that supernode. Costs never come from a global counter (REFERENCE.md defect 1), so
  concurrent rollouts cannot leak cost into each other.

Roles are indexed in the benchmark's role order (R of them); a skipped synthesizer removes its role
from the MASConfig (`policy.choices_to_config`), so its node cost is 0, it is not graded and it is
not checkable (alpha = 0: it emitted nothing).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Sequence

import jax
import numpy as np

from hieramas_jax.aio import gather_or_cancel
from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import Item
from hieramas_jax.learn import policy as policy_lib
from hieramas_jax.learn import rewards as rewards_lib
from hieramas_jax.llm.registry import PoolSetting
from hieramas_jax.mas import roles as roles_lib
from hieramas_jax.mas.config import MASConfig
from hieramas_jax.mas.runtime import ChatClient, RunSettings, run_mas
from hieramas_jax.mas.trace import Trace


# Jitted once per shape: called eagerly, each jnp op of the reward formula would compile on its own.
_role_rewards = jax.jit(rewards_lib.role_rewards, static_argnames=("alpha", "k"))
_system_reward = jax.jit(rewards_lib.system_reward, static_argnames=("k",))


def system_rewards(solved, cost, *, k: float) -> np.ndarray:
  """`rewards.system_reward` on host arrays (any shape), as numpy float32."""
  return np.asarray(_system_reward(np.asarray(solved, bool), np.asarray(cost, np.float32), k=float(k)), np.float32)


class RolloutError(RuntimeError):
  """A rollout produced something the rewards cannot use (non-finite reward, wrong benchmark)."""


def checkable_roles(benchmark: str) -> tuple[bool, ...]:
  """Which roles emit a gradable answer, per role in `roles_for(benchmark)` order.

  Every role prompt of this suite (`roles.agent_messages`) asks for the answer in the benchmark's
  format (MMLU letter, MATH \\boxed{}, HumanEval+ a complete function), and a synthesizer's prompt
  does too, so every active supernode's output is checkable. The reference code sets alpha = 0 for
  roles without a checkable answer; with these prompts there are none, so alpha applies to all
  active roles. Kept as a function so a role set with critique-only roles can say so in one place.
  """
  return tuple(True for _ in roles_lib.roles_for(benchmark))


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
  """

  benchmark: str
  roles: tuple[str, ...]
  descriptions: tuple[str, ...]
  models: tuple[str, ...]
  decision_model: str
  strong_model: str
  num_proposers: int
  checkable: tuple[bool, ...]

  @classmethod
  def make(cls, benchmark: str, pool: PoolSetting, num_proposers: int) -> "Setup":
    role_names = roles_lib.roles_for(benchmark)
    return cls(benchmark=benchmark, roles=role_names,
               descriptions=tuple(roles_lib.role_description(r) for r in role_names), models=tuple(pool.models),
               decision_model=pool.strong, strong_model=pool.strong, num_proposers=num_proposers,
               checkable=checkable_roles(benchmark))

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
    system_solved: final answer graded correct.
    system_cost: USD of every call of the query.
    node_solved: [R] each role's own output graded correct (False for inactive roles).
    node_cost: [R] USD of each role's own calls (0 for inactive roles).
    node_checkable: [R] active and checkable (where alpha applies).
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

  def system_reward(self, k: float) -> float:
    return float(system_rewards(self.system_solved, self.system_cost, k=k))


def node_costs(trace: Trace, active_roles: Sequence[int], num_roles: int) -> np.ndarray:
  """[R] USD per role: sum of the trace's call records of that role's node (decision call excluded)."""
  cost = np.zeros(num_roles, np.float64)
  for call in trace.calls:
    if 0 <= call.node < len(active_roles):
      cost[active_roles[call.node]] += call.cost_usd
  return cost


async def run_rollout(client: ChatClient, setup: Setup, item: Item, choices, adjacency,
                      settings: RunSettings = RunSettings(), *, method: str = "hieramas",
                      grade_nodes: bool = True) -> Rollout:
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
  """
  if item.benchmark != setup.benchmark:
    raise RolloutError(f"item {item.id} is from {item.benchmark}, the setup is for {setup.benchmark}")
  choices = np.asarray(choices, np.int32)
  adjacency = np.asarray(adjacency, bool)
  config, active = setup.to_config(choices, adjacency)
  trace = await run_mas(client, item, config, settings, method=method)
  r = setup.num_roles
  node_solved = np.zeros(r, bool)
  checkable = np.zeros(r, bool)
  graded = [graders.grade_async(item, trace.final_text)]
  if grade_nodes:
    graded += [graders.grade_async(item, trace.node_texts[i]) for i in range(len(active))]
  grades = await asyncio.gather(*graded)
  if grade_nodes:
    for i, role_index in enumerate(active):
      node_solved[role_index] = bool(grades[1 + i].correct)
      checkable[role_index] = setup.checkable[role_index]
  return Rollout(item_id=item.id, choices=choices, adjacency=adjacency, active_roles=tuple(active), trace=trace,
                 system_solved=bool(grades[0].correct), system_cost=float(trace.cost_usd),
                 node_solved=node_solved, node_cost=node_costs(trace, active, r), node_checkable=checkable)


async def run_rollouts(client: ChatClient, setup: Setup, items: Sequence[Item], choices, adjacency,
                       settings: RunSettings = RunSettings(), *, bound: int | asyncio.Semaphore = 32,
                       grade_nodes: bool = True) -> list[Rollout]:
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
      return await run_rollout(client, setup, items[i], choices[i], adjacency[i], settings, grade_nodes=grade_nodes)

  return await gather_or_cancel([asyncio.ensure_future(one(i)) for i in range(len(items))])


def batch_rewards(rollouts: Sequence[Rollout], *, alpha: float, k: float) -> np.ndarray:
  """[B, R] role rewards (rewards.role_rewards) of a batch; raises naming the query if not finite."""
  node_solved = np.stack([r.node_solved for r in rollouts])
  node_cost = np.stack([r.node_cost for r in rollouts])
  checkable = np.stack([r.node_checkable for r in rollouts])
  system_solved = np.array([r.system_solved for r in rollouts])
  system_cost = np.array([r.system_cost for r in rollouts])
  rewards = np.asarray(_role_rewards(node_solved, node_cost.astype(np.float32), checkable, system_solved,
                                     system_cost.astype(np.float32), alpha=float(alpha), k=float(k)))
  bad = ~np.isfinite(rewards)
  if bad.any():
    b, r = np.argwhere(bad)[0]
    raise RolloutError(f"non-finite reward {rewards[b, r]} for query {rollouts[b].item_id}, role {r} "
                       f"(node cost {node_cost[b, r]}, system cost {system_cost[b]})")
  return rewards.astype(np.float32)

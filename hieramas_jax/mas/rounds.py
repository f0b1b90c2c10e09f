"""Multi-round agent graphs (GDesigner, MASRouter): one LLM per agent, a DAG per round, memory across rounds.

The supernode runtime (`runtime.run_mas`) runs one round of proposer/synthesizer supernodes. The
GDesigner-family baselines instead run single-LLM agents for several rounds: in round r every agent
reads the current-round outputs of its spatial predecessors (a DAG, drawn anew each round) and the
previous-round outputs of its temporal predecessors; after the last round a decision agent reads every
agent's final output. A node starts the moment its spatial predecessors of the round have finished, as
in `run_mas`.

Prompts follow the GDesigner / MASRouter agent code (`AnalyzeAgent`, `FinalRefer`): other agents' text
comes after "At the same time, the outputs of other agents are as follows:", the previous round's after
"In the last round of dialogue, the outputs of other agents were:", each block "Agent k, role is R,
output is: ...". Ordinary wording a real model reads the same way; the role line and the answer format
are the suite's (`roles.role_system_line`, `roles.question_block`).

With a `code_check` (GDesigner's HumanEval tools, `CodeWriting` / `FinalWriteCode`): an input that is a
Python code block is run by the check (the prompt's docstring examples in the sandbox) and its block gets
"Whether it passes internal testing? {passed}." and "The feedback is: ..."; an agent whose inputs hold
code that passed returns that code without a call (the reference's `is_solved` shortcut), and the decision
agent's prompt says that code may have passed internal testing (`roles.decision_system(tested=True)`).

With an `inner_test` instead (MASRouter's HumanEval tools, `MAR/Agent/agent.py`,
`MAR/Prompts/message_aggregation.py`, `MAR/Prompts/post_process.py`): before an agent calls, its spatial
inputs, then its temporal ones, are checked in order; the first that holds code passing the check is the
agent's output, with no call and no reflection (`inner_test`). Otherwise every input holding code reaches
the agent with "The code is solved." / "The code is not solved." and the feedback after it (the Code roles'
`PythonInnerTest` message aggregation), and an agent of a `note_roles` role gets the same note after its own
output holding code before it reflects or is read (the `PythonInnerTest` post-process). The decision agent
reads the outputs as they are (`FinalRefer` runs nothing).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Awaitable, Callable, Optional, Sequence

import numpy as np

from hieramas_jax.aio import gather_or_cancel
from hieramas_jax.benchmarks.data import Item
from hieramas_jax.mas import roles
from hieramas_jax.mas.config import ConfigError
from hieramas_jax.mas.runtime import ChatClient, Clock, RunSettings, call_llm
from hieramas_jax.mas.trace import DECISION_NODE, CallRecord, Trace

# text -> (passed, feedback) when `text` is code the check could run, else None.
CodeCheck = Callable[[str], Awaitable[Optional[tuple[bool, str]]]]

# MASRouter's Reflection post-description (`MAR/Agent/agent.py`), word for word.
REFLECT_SYSTEM = ("Reflect on possible errors in the answer above and answer again using the same format. If "
                  "you think there are no errors in your previous answers that will affect the results, there is "
                  "no need to correct them.")


@dataclasses.dataclass(frozen=True)
class InnerTest:
  """MASRouter's HumanEval tools (module docstring).

  Attributes:
    check: runs an output's code on the docstring examples (`methods.code_tools.docstring_check`).
    note_roles: roles whose own output holding code gets the test note (the public Code roles with the
      `PythonInnerTest` post-process: Programming Expert, Bug Fixer, Reflect Programmer).
  """

  check: CodeCheck
  note_roles: frozenset = frozenset()


@dataclasses.dataclass(frozen=True)
class RoundAgent:
  """One agent: a role (from the benchmark's role set) and the LLM that plays it.

  Attributes:
    role: the agent's role.
    model: its LLM.
    reflect: after answering, a second call reflects on its own answer (MASRouter's Reflection mode).
  """

  role: str
  model: str
  reflect: bool = False


@dataclasses.dataclass(frozen=True, eq=False)
class RoundsConfig:
  """Agents, per-round spatial DAGs and temporal connections, and the decision agent.

  Attributes:
    agents: N agents.
    spatial: one [N, N] bool DAG per round (spatial[r][i, j]: i's round-r output is an input of j in round r).
    temporal: one [N, N] bool per round (temporal[r][i, j]: i's round r-1 output is an input of j in round r);
      round 0's must be empty.
    decision_model: the LLM of the decision agent, which reads every agent's final output.
    cot: agents are asked to think step by step.
    reasoning: an extra instruction appended to every agent's system message ("" for none).
  """

  agents: tuple[RoundAgent, ...]
  spatial: tuple[np.ndarray, ...]
  temporal: tuple[np.ndarray, ...]
  decision_model: str
  cot: bool = True
  reasoning: str = ""

  def __post_init__(self):
    n = len(self.agents)
    if n < 1:
      raise ConfigError("a round graph needs at least one agent")
    if not self.spatial or len(self.spatial) != len(self.temporal):
      raise ConfigError(f"{len(self.spatial)} spatial and {len(self.temporal)} temporal layers: need one of each "
                        "per round (at least one round)")
    spatial = tuple(np.asarray(a, bool) for a in self.spatial)
    temporal = tuple(np.asarray(a, bool) for a in self.temporal)
    for r, (s, t) in enumerate(zip(spatial, temporal)):
      if s.shape != (n, n) or t.shape != (n, n):
        raise ConfigError(f"round {r}: adjacency shapes {s.shape}, {t.shape} do not match {n} agents")
      if np.any(np.diag(s)):
        raise ConfigError(f"round {r}: spatial self-loops are not allowed")
      if _topological_order(s) is None:
        raise ConfigError(f"round {r}: the spatial graph has a cycle")
    if temporal[0].any():
      raise ConfigError("round 0 has no previous round: its temporal connections must be empty")
    object.__setattr__(self, "spatial", spatial)
    object.__setattr__(self, "temporal", temporal)

  @property
  def num_rounds(self) -> int:
    return len(self.spatial)

  def calls_per_query(self) -> int:
    return self.num_rounds * sum(2 if a.reflect else 1 for a in self.agents) + 1

  def to_json(self) -> dict:
    return {"agents": [dataclasses.asdict(a) for a in self.agents],
            "spatial": [[[int(i), int(j)] for i, j in zip(*np.nonzero(s))] for s in self.spatial],
            "temporal_edges": [int(t.sum()) for t in self.temporal], "decision_model": self.decision_model,
            "cot": self.cot, "reasoning": self.reasoning}


def _topological_order(adj: np.ndarray) -> list[int] | None:
  indeg = adj.sum(axis=0).astype(int)
  ready = [i for i in range(adj.shape[0]) if indeg[i] == 0]
  order = []
  while ready:
    i = ready.pop(0)
    order.append(i)
    for j in np.flatnonzero(adj[i]):
      indeg[j] -= 1
      if indeg[j] == 0:
        ready.append(int(j))
  return order if len(order) == adj.shape[0] else None


def reachable(adj: np.ndarray, start: int) -> np.ndarray:
  """[N] bool: nodes reachable from `start` along the directed edges (start itself included)."""
  seen = np.zeros(adj.shape[0], bool)
  stack = [start]
  while stack:
    i = stack.pop()
    if seen[i]:
      continue
    seen[i] = True
    stack.extend(int(j) for j in np.flatnonzero(adj[i]) if not seen[j])
  return seen


def temporal_from_spatial(spatial: np.ndarray, allowed: np.ndarray | None = None) -> np.ndarray:
  """The reference code's temporal connections for one round, given that round's spatial DAG.

  GDesigner and MASRouter add a temporal edge i -> j (i's previous output shown to j) for every allowed
  pair unless their cycle check, which follows the round's *spatial* successors, fires: i == j, or i is
  spatially reachable from j. `allowed` defaults to every pair (fixed temporal masks of all ones).
  """
  n = spatial.shape[0]
  allowed = np.ones((n, n), bool) if allowed is None else np.asarray(allowed, bool)
  out = np.zeros((n, n), bool)
  for j in range(n):
    from_j = reachable(spatial, j)
    for i in range(n):
      out[i, j] = allowed[i, j] and not from_j[i]
  return out


def agent_block(index: int, role: str, text: str) -> str:
  return f"Agent {index}, role is {role}, output is:\n\n{text.strip()}\n\n"


def agent_messages(item: Item, agent: RoundAgent, spatial: Sequence[tuple[int, str, str]],
                   temporal: Sequence[tuple[int, str, str]], *, cot: bool, reasoning: str = "") -> list[dict]:
  """One agent's request: its role line (+ the reasoning instruction), the question, other agents' text."""
  roles.check_role(item.benchmark, agent.role)
  system = roles.role_system_line(agent.role) + (f"\n{reasoning}" if reasoning else "")
  user = roles.question_block(item, cot=cot)
  if spatial:
    user += "\n\nAt the same time, the outputs of other agents are as follows:\n\n" + "".join(
        agent_block(k, r, t) for k, r, t in spatial)
  if temporal:
    user += "\n\nIn the last round of dialogue, the outputs of other agents were:\n\n" + "".join(
        agent_block(k, r, t) for k, r, t in temporal)
  return [{"role": "system", "content": system}, {"role": "user", "content": user.rstrip()}]


def reflection_messages(item: Item, agent: RoundAgent, answer: str) -> list[dict]:
  user = f"{roles.question_block(item, cot=False)}\n\nThe initial thinking information is:\n\n{answer.strip()}"
  return [{"role": "system", "content": roles.role_system_line(agent.role) + "\n" + REFLECT_SYSTEM},
          {"role": "user", "content": user}]


def decision_messages(item: Item, outputs: Sequence[tuple[int, str, str]], *, tested: bool = False) -> list[dict]:
  user = ("The task is:\n\n" + roles.question_block(item, cot=False)
          + "\n\nAt the same time, the output of other agents is as follows:\n\n"
          + "".join(agent_block(k, r, t) for k, r, t in outputs)).rstrip()
  # The reference's FinalRefer: the prompt set's decision role and constraint (`roles.decision_system`).
  return [{"role": "system", "content": roles.decision_system(item.benchmark, tested=tested)},
          {"role": "user", "content": user}]


def with_test_result(text: str, passed: bool, feedback: str) -> str:
  """An agent's code output followed by its internal-test result (GDesigner's `CodeWriting` wording)."""
  return (f"{text.strip()}\n\nWhether it passes internal testing? {passed}.\n\n"
          f"The feedback is:\n\n{feedback or 'every docstring example passed'}.")


def with_inner_test_note(text: str, passed: bool, feedback: str) -> str:
  """An output holding code followed by MASRouter's `PythonInnerTest` note (`message_aggregation.py`)."""
  return (f"{text.strip()}\n\nThe code is {'solved' if passed else 'not solved'}.\n"
          f"{feedback or 'every docstring example passed'}")


def seat_indices(agents: Sequence[RoundAgent]) -> list[int]:
  """Sample index per agent: 0 for the first agent with a (role, model), 1 for the second, ...

  Two agents with the same role and model send the same first-round request; distinct sample indices
  make them two draws instead of one cached answer read twice.
  """
  seen: dict[tuple[str, str], int] = {}
  out = []
  for a in agents:
    key = (a.role, a.model)
    out.append(seen.get(key, 0))
    seen[key] = out[-1] + 1
  return out


async def run_rounds(client: ChatClient, item: Item, config: RoundsConfig, settings: RunSettings = RunSettings(),
                     *, method: str = "rounds", code_check: CodeCheck | None = None,
                     inner_test: InnerTest | None = None) -> Trace:
  """Runs every round, then the decision agent; returns the query's trace (final text = the decision).

  `code_check` (module docstring): runs code inputs and reports the result to the reading agent; each
  distinct text is checked once per query (`trace.extra["code_tests"]`: one record per check).
  `inner_test` (module docstring; not with `code_check`): MASRouter's tools, same records.

  Raises:
    UnknownRoleError: an agent's role is not in the item's benchmark role set.
    LLMError: from the client; the query's other calls are cancelled.
  """
  for agent in config.agents:
    roles.check_role(item.benchmark, agent.role)
  if code_check is not None and inner_test is not None:
    raise ValueError("code_check and inner_test are two references' tools: pass one of them")
  clock = Clock()
  trace = Trace(item_id=item.id, method=method, extra={"rounds": config.to_json()})
  seats = seat_indices(config.agents)
  common = dict(temperature=settings.temperature, max_tokens=settings.max_tokens)
  previous: dict[int, str] = {}
  checked: dict[str, asyncio.Future] = {}

  def record(rec: CallRecord) -> CallRecord:
    trace.calls.append(rec)
    return rec

  async def run_check(check: CodeCheck, text: str) -> Optional[tuple[bool, str]]:
    """`check(text)`, run once per distinct text of the query and recorded in `code_tests`."""
    if text not in checked:
      checked[text] = asyncio.ensure_future(check(text))
      result = await checked[text]
      trace.extra.setdefault("code_tests", []).append(None if result is None else {"passed": bool(result[0])})
    return await checked[text]

  async def noted(text: str) -> str:
    """`text` with MASRouter's test note when it holds code (`inner_test`)."""
    result = await run_check(inner_test.check, text)
    return text if result is None else with_inner_test_note(text, *result)

  async def tested(text: str) -> tuple[str, bool]:
    """(the text as the reader sees it, whether it is code that passed)."""
    if code_check is None:
      return text, False
    result = await run_check(code_check, text)
    if result is None:
      return text, False
    return with_test_result(text, *result), bool(result[0])

  for r in range(config.num_rounds):
    spatial, temporal = config.spatial[r], config.temporal[r]
    tasks: dict[int, asyncio.Task] = {}

    async def run_agent(j: int, r=r, spatial=spatial, temporal=temporal, tasks=tasks) -> str:
      preds = [int(i) for i in np.flatnonzero(spatial[:, j])]
      if preds:
        await asyncio.gather(*(tasks[p] for p in preds))
      agent = config.agents[j]
      spatial_in = [(p + 1, config.agents[p].role, tasks[p].result()) for p in preds]
      temporal_in = [(int(i) + 1, config.agents[int(i)].role, previous[int(i)])
                     for i in np.flatnonzero(temporal[:, j]) if int(i) in previous]
      if code_check is not None:
        spatial_seen = [await tested(t) for _, _, t in spatial_in]
        temporal_seen = [await tested(t) for _, _, t in temporal_in]
        # The reference's shortcut: code that passed the examples is this agent's output, no call made.
        for (_, _, raw), (_, passed) in zip(spatial_in + temporal_in, spatial_seen + temporal_seen):
          if passed:
            trace.extra.setdefault("code_shortcuts", []).append({"round": r, "node": j})
            return raw
        spatial_in = [(k, role, seen) for (k, role, _), (seen, _) in zip(spatial_in, spatial_seen)]
        temporal_in = [(k, role, seen) for (k, role, _), (seen, _) in zip(temporal_in, temporal_seen)]
      elif inner_test is not None:
        # MASRouter's inner_test: spatial inputs, then temporal ones, in order; the first passing code is
        # this agent's output (no call, no reflection); later inputs are not run.
        for _, _, raw in spatial_in + temporal_in:
          result = await run_check(inner_test.check, raw)
          if result is not None and result[0]:
            trace.extra.setdefault("code_shortcuts", []).append({"round": r, "node": j})
            return raw
        spatial_in = [(k, role, await noted(t)) for k, role, t in spatial_in]
        temporal_in = [(k, role, await noted(t)) for k, role, t in temporal_in]
      rec = record(await call_llm(
          client, clock, node=j, role=agent.role, position=f"round{r}", model=agent.model,
          messages=agent_messages(item, agent, spatial_in, temporal_in, cot=config.cot, reasoning=config.reasoning),
          sample_index=seats[j], **common))
      text = rec.text
      if inner_test is not None and agent.role in inner_test.note_roles:
        text = await noted(text)  # the PythonInnerTest post-process, before the reflection
      if agent.reflect:
        text = record(await call_llm(
            client, clock, node=j, role=agent.role, position=f"round{r}:reflect", model=agent.model,
            messages=reflection_messages(item, agent, text), sample_index=seats[j], **common)).text
      return text

    order = _topological_order(spatial)
    for j in order:
      tasks[j] = asyncio.ensure_future(run_agent(j))
    await gather_or_cancel(tasks.values())
    previous = {j: t.result() for j, t in tasks.items()}

  trace.node_texts = dict(previous)
  outputs = [(j + 1, config.agents[j].role, (await tested(previous[j]))[0]) for j in range(len(config.agents))]
  # Canonical order (agents of a round finish in any order): round, agent, its reflection; the decision,
  # recorded below, comes last.
  trace.order_calls(lambda c: (int(c.position[len("round"):].partition(":")[0]), c.node,
                               c.position.endswith(":reflect")))
  trace.extra.get("code_shortcuts", []).sort(key=lambda s: (s["round"], s["node"]))
  trace.extra.get("code_tests", []).sort(key=lambda t: (t is not None, t and t["passed"]))
  decision = record(await call_llm(client, clock, node=DECISION_NODE, role=None, position="decision",
                                   model=config.decision_model,
                                   messages=decision_messages(item, outputs, tested=code_check is not None),
                                   **common))
  trace.final_text = decision.text
  return trace

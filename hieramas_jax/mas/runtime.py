"""Executes one MASConfig on one query with maximal parallelism.

A supernode calls its W proposers concurrently, then its synthesizer with the Mixture-of-Agents
synthesis prompt over their proposals. A node starts the moment all its predecessors have finished
(one asyncio task per node awaiting its predecessors' tasks), so independent nodes run concurrently
and a query's wall time is about depth x (proposer + synthesizer latency), not the node count. The
reference code runs roles one after another (docs/reference-differences.md).

The runtime never limits concurrency itself: the client's per-endpoint semaphore and the experiment's
global query bound do.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from hieramas_jax.aio import gather_or_cancel
from hieramas_jax.benchmarks.data import Item
from hieramas_jax.mas import roles
from hieramas_jax.mas.config import MASConfig, Supernode
from hieramas_jax.mas.trace import DECISION_NODE, CallRecord, Trace

DECISION_READS = ("all", "sinks")


class ChatClient(Protocol):
  """What the runtime needs of hieramas_jax.llm.client.LLMClient."""

  async def chat(self, model: str, messages: list[dict], *, temperature: float, max_tokens: int,
                 sample_index: int = 0) -> Any:
    ...


@dataclasses.dataclass(frozen=True)
class RunSettings:
  """Sampling and wiring settings shared by every call of a run.

  Attributes:
    temperature: the reference code's 0.2 for every MAS call.
    max_tokens: the reference code's 2048.
    decision_reads: "all" (default; the reference GDesigner fork wires every agent node into the
      decision node) or "sinks" (only nodes without successors).
    agent_cot: role agents are asked to think step by step.
  """

  temperature: float = 0.2
  max_tokens: int = 2048
  decision_reads: str = "all"
  agent_cot: bool = True

  def __post_init__(self):
    if self.decision_reads not in DECISION_READS:
      raise ValueError(f"decision_reads must be one of {DECISION_READS}, got {self.decision_reads!r}")
    if not 0.0 <= self.temperature <= 2.0:
      raise ValueError(f"temperature must be in [0, 2], got {self.temperature}")
    if self.max_tokens < 1:
      raise ValueError(f"max_tokens must be positive, got {self.max_tokens}")


class Clock:
  """Seconds since a query started, so call records of one trace share a time origin."""

  def __init__(self):
    self.t0 = time.monotonic()

  def now(self) -> float:
    return time.monotonic() - self.t0


async def call_llm(client: ChatClient, clock: Clock, *, node: int, role: str | None, position: str,
                   model: str, messages: list[dict], temperature: float, max_tokens: int,
                   sample_index: int = 0) -> CallRecord:
  """One chat call, turned into a CallRecord with its own tokens, cost and timing."""
  started = clock.now()
  result = await client.chat(model, messages, temperature=temperature, max_tokens=max_tokens,
                             sample_index=sample_index)
  return CallRecord(node=node, role=role, position=position, model=model, text=result.text,
                    prompt_tokens=int(result.prompt_tokens),
                    completion_tokens=int(result.completion_tokens),
                    cost_usd=float(result.cost_usd), latency_s=float(result.latency_s),
                    cached=bool(result.cached), sample_index=sample_index, started_s=started,
                    finished_s=clock.now(), finish_reason=str(getattr(result, "finish_reason", "")),
                    reasoning_tokens=int(getattr(result, "reasoning_tokens", 0)),
                    raw_text=str(getattr(result, "raw_text", "")),
                    messages=tuple({"role": str(m["role"]), "content": str(m["content"])} for m in messages))


def proposer_draws(proposers: Sequence[str]) -> list[int]:
  """Sample index per proposer: 0 for a model's first seat in the node, 1 for its second, ...

  Two seats with the same model get the same prompt; without distinct sample indices they would be
  one request (the same cached or seeded answer twice) instead of two independent draws. A model
  seated once keeps index 0, so its call is shared with every other config that asks the same.
  """
  seen: dict[str, int] = {}
  draws = []
  for m in proposers:
    draws.append(seen.get(m, 0))
    seen[m] = draws[-1] + 1
  return draws


def call_rank(call: CallRecord, topo: Mapping[int, int]) -> tuple[int, int, int]:
  """A call's place in the canonical order of a MAS trace: node (topological rank; the decision last),
  then proposers by seat, then the node's synthesizer or solo call."""
  if call.node == DECISION_NODE:
    return (len(topo), 0, 0)
  head, _, seat = call.position.partition(":")
  return (topo[call.node], 0, int(seat)) if head == "proposer" else (topo[call.node], 1, 0)


async def run_mas(client: ChatClient, item: Item, config: MASConfig,
                  settings: RunSettings = RunSettings(), *, method: str = "mas",
                  prompts: roles.PromptSet = roles.SUITE_PROMPTS) -> Trace:
  """Runs the MAS on one item and returns its trace.

  The final text is the decision node's answer, or the single sink's output when the config has no
  decision model (`MASConfig.decision_model is None`).

  Args:
    client: an LLMClient (or anything with the same `chat`).
    item: the query.
    config: supernodes, DAG and decision model.
    settings: sampling parameters and decision wiring.
    method: the name written into the trace.
    prompts: the message builders (default: the suite's, which every method but HieraMAS's reference
      prompt set sends).

  Raises:
    UnknownRoleError: a node's role is not in the item's benchmark role set.
    LLMError: from the client, when a call finally fails; the other calls of the query are cancelled.
  """
  for node in config.nodes:
    roles.check_role(item.benchmark, node.role)
  clock = Clock()
  trace = Trace(item_id=item.id, method=method, extra={"config": config.to_json(),
                                                       "decision_reads": settings.decision_reads})
  tasks: dict[int, asyncio.Task] = {}

  def record(rec: CallRecord) -> CallRecord:
    trace.calls.append(rec)
    return rec

  async def run_node(j: int, preds: list[int]) -> str:
    if preds:
      await asyncio.gather(*(tasks[p] for p in preds))
    node = config.nodes[j]
    inputs = [roles.AgentOutput(p + 1, config.nodes[p].role, tasks[p].result()) for p in preds]
    common = dict(temperature=settings.temperature, max_tokens=settings.max_tokens)
    if not node.proposers:
      rec = record(await call_llm(
          client, clock, node=j, role=node.role, position="solo", model=node.synthesizer,
          messages=prompts.agent(item, node.role, inputs, cot=settings.agent_cot), **common))
    else:
      proposer_messages = prompts.agent(item, node.role, inputs, cot=settings.agent_cot)
      proposals = await asyncio.gather(*(
          call_llm(client, clock, node=j, role=node.role, position=f"proposer:{k}", model=m,
                   messages=proposer_messages, sample_index=draw, **common)
          for k, (m, draw) in enumerate(zip(node.proposers, proposer_draws(node.proposers)))))
      for p in proposals:
        record(p)
      rec = record(await call_llm(
          client, clock, node=j, role=node.role, position="synthesizer", model=node.synthesizer,
          messages=prompts.synthesizer(item, node.role, [p.text for p in proposals], inputs), **common))
    trace.node_texts[j] = rec.text
    return rec.text

  # Tasks are created in topological order, so every predecessor's task exists when a node's
  # coroutine first looks it up.
  for j in config.topological_order():
    tasks[j] = asyncio.ensure_future(run_node(j, config.predecessors(j)))
  await gather_or_cancel(tasks.values())
  topo = {j: i for i, j in enumerate(config.topological_order())}
  trace.order_calls(lambda c: call_rank(c, topo))

  if config.decision_model is None:
    trace.final_text = trace.node_texts[config.sinks()[0]]
    return trace
  readers = range(len(config.nodes)) if settings.decision_reads == "all" else config.sinks()
  outputs = [roles.AgentOutput(j + 1, config.nodes[j].role, trace.node_texts[j]) for j in readers]
  decision = record(await call_llm(
      client, clock, node=DECISION_NODE, role=None, position="decision", model=config.decision_model,
      messages=prompts.decision(item, outputs), temperature=settings.temperature,
      max_tokens=settings.max_tokens))
  trace.final_text = decision.text
  return trace


def build_config(node_specs: Sequence[tuple[str, Sequence[str], str]], decision_model: str | None,
                 edges: Sequence[tuple[int, int]] = ()) -> MASConfig:
  """Convenience builder for hand-written systems: [(role, proposers, synthesizer)] + edge list."""
  nodes = tuple(Supernode(r, tuple(p), s) for r, p, s in node_specs)
  adj = np.zeros((len(nodes), len(nodes)), dtype=bool)
  for i, j in edges:
    adj[i, j] = True
  return MASConfig(nodes, adj, decision_model)

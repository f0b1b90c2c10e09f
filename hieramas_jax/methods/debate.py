"""LLM-Debate (Du et al. 2023, "Improving Factuality and Reasoning in Language Models through
Multiagent Debate"), with the reference code's settings: 3 agents, 2 rounds, temperature 0.7,
the strong model for every agent.

Round 1: every agent answers the question and is asked to explain its reasoning. Round r > 1:
every agent keeps its own conversation (its earlier answers are assistant turns) and is shown
the other agents' latest answers, then asked for an updated answer, examining its own solution
and theirs step by step (Du et al.'s wording). The final answer is the majority vote of the last
round (`voting.majority_vote`; ties go to the lowest agent index).

Deviation (docs/methods.md): Du et al. wrap each other agent's answer in triple backticks; we
write "One agent solution:" followed by the answer on its own lines, because HumanEval+ answers
are themselves fenced code blocks and nested fences would break them.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Sequence

from hieramas_jax.benchmarks.data import Item
from hieramas_jax.mas import roles
from hieramas_jax.mas.runtime import Clock, call_llm
from hieramas_jax.mas.trace import NO_NODE, Trace
from hieramas_jax.methods.api import RunContext, Untrained
from hieramas_jax.methods.voting import majority_vote

EXPLAIN = "Explain your reasoning."
UPDATE = ("Using the reasoning from other agents as additional advice, can you give an updated answer? "
          "Examine your solution and that of other agents step by step.")


def first_round_messages(item: Item) -> list[dict]:
  """An agent's opening request: the question, its answer format, a request to explain."""
  question = roles.single_model_messages(item, cot=False)[1]["content"]
  return [{"role": "user", "content": f"{question}\n{EXPLAIN}"}]


def next_round_messages(item: Item, history: Sequence[dict], others: Sequence[str]) -> list[dict]:
  """An agent's conversation so far plus the other agents' latest answers and the update request."""
  shown = "\n\n".join(f"One agent solution:\n{text.strip()}" for text in others)
  user = (f"These are the solutions to the problem from other agents:\n\n{shown}\n\n{UPDATE}\n"
          f"{roles.ANSWER_FORMAT[item.benchmark]}")
  return [*history, {"role": "user", "content": user}]


@dataclasses.dataclass(frozen=True)
class Debate(Untrained):
  """Multi-agent debate among `n_agents` copies of the strong model for `n_rounds` rounds.

  Attributes:
    n_agents / n_rounds / temperature: the reference code's 3 / 2 / 0.7.
    max_tokens: the reference code's 2048.
  """

  n_agents: int = 3
  n_rounds: int = 2
  temperature: float = 0.7
  max_tokens: int = 2048

  def __post_init__(self):
    if self.n_agents < 1 or self.n_rounds < 1:
      raise ValueError(f"need n_agents >= 1 and n_rounds >= 1, got {self.n_agents}, {self.n_rounds}")

  name = "debate"

  async def solve(self, ctx: RunContext, item: Item) -> Trace:
    model = ctx.pool.strong
    clock = Clock()
    histories = [first_round_messages(item) for _ in range(self.n_agents)]
    records = []
    texts: list[str] = []
    for rnd in range(self.n_rounds):
      if rnd:
        histories = [next_round_messages(item, histories[a], texts[:a] + texts[a + 1:])
                     for a in range(self.n_agents)]
      # Agent a's requests carry sample index a: copies of one model are independent draws.
      round_records = await asyncio.gather(*(
          call_llm(ctx.client, clock, node=NO_NODE, role=None, position=f"agent:{a}:round:{rnd}",
                   model=model, messages=histories[a], temperature=self.temperature,
                   max_tokens=self.max_tokens, sample_index=a)
          for a in range(self.n_agents)))
      records += round_records
      texts = [r.text for r in round_records]
      histories = [[*histories[a], {"role": "assistant", "content": texts[a]}] for a in range(self.n_agents)]
    vote = await majority_vote(item, texts)
    return Trace(item_id=item.id, method=self.name, final_text=texts[vote.winner], calls=records,
                 extra={"vote": {"winner": vote.winner, "answer": vote.answer,
                                 "counts": [[str(a)[:200], n, i] for a, n, i in vote.counts]}})


def make_debate(**kwargs) -> Debate:
  return Debate(**kwargs)

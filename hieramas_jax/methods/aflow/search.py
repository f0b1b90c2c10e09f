"""AFlow's search loop (FoundationAgents/AFlow `optimizer.py`, `data_utils.py`), over operator compositions.

Each round of the search:
  1. the candidate parents are the best `sample` evaluated workflows by validation score
     (`get_top_rounds`);
  2. one parent is drawn from a mixture of uniform and score-softmax probabilities (`select_round`,
     `_compute_probabilities`): p = lambda / n + (1 - lambda) softmax(alpha * 100 * score), alpha 0.2,
     lambda 0.3 (scores in [0, 1]);
  3. a modification of the parent is proposed: in AFlow an optimizer LLM rewrites the workflow's code;
     here one of the parent's one-step operator edits (`workflow.edits`) is drawn uniformly among those
     not yet tried from that parent (AFlow's experience check rejects a repeated modification) and
     not leading to a workflow already evaluated; up to 20 redraws of the parent, as AFlow retries;
  4. the child is evaluated on the validation split (its score = mean accuracy over `validation_runs`
     runs) and becomes a new round.
The workflow with the best validation score (earliest round on ties) is the result. Every draw comes
from a generator seeded by (seed, round), so a resumed search draws what an uninterrupted one would.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Awaitable, Callable, Sequence

import numpy as np

from hieramas_jax.methods.aflow.workflow import Workflow, edits

ALPHA = 0.2
LAMBDA = 0.3
SAMPLE = 4
MAX_RETRIES = 20
_STREAM = 7


@dataclasses.dataclass(frozen=True)
class Round:
  """One evaluated workflow of the search.

  Attributes:
    round: 1 for the initial workflow, then 2, 3, ...
    workflow: what ran.
    parent: the round it was derived from (None for round 1).
    modification: the edit's label (None for round 1).
    score: mean validation accuracy in [0, 1].
    cost_usd: USD its validation runs cost.
  """

  round: int
  workflow: Workflow
  parent: int | None
  modification: str | None
  score: float
  cost_usd: float = 0.0

  def to_json(self) -> dict[str, Any]:
    return {**dataclasses.asdict(self), "workflow": self.workflow.to_json(), "text": self.workflow.describe()}

  @classmethod
  def from_json(cls, data: dict[str, Any]) -> "Round":
    return cls(int(data["round"]), Workflow(**data["workflow"]), data["parent"], data["modification"],
               float(data["score"]), float(data.get("cost_usd", 0.0)))


def mixed_probabilities(scores: Sequence[float], alpha: float = ALPHA, lambda_: float = LAMBDA) -> np.ndarray:
  """AFlow's `_compute_probabilities` on scores in [0, 1] (multiplied by 100 first, as `select_round` does)."""
  s = 100.0 * np.asarray(scores, np.float64)
  if s.size == 0:
    raise ValueError("no rounds to select from")
  weights = np.exp(alpha * (s - s.max()))
  mixed = lambda_ / s.size + (1 - lambda_) * weights / weights.sum()
  return mixed / mixed.sum()


def top_rounds(rounds: Sequence[Round], sample: int = SAMPLE) -> list[Round]:
  """The `sample` best rounds by score, earlier round first on ties (`get_top_rounds`)."""
  return sorted(rounds, key=lambda r: (-r.score, r.round))[:sample]


def select_parent(rounds: Sequence[Round], rng: np.random.Generator, sample: int = SAMPLE) -> Round:
  """Draws the parent among the top rounds, sorted by score, with the mixed probabilities."""
  candidates = top_rounds(rounds, sample)
  return candidates[int(rng.choice(len(candidates), p=mixed_probabilities([r.score for r in candidates])))]


def propose(parent: Round, rounds: Sequence[Round], benchmark: str, rng: np.random.Generator, *,
            review_revise: bool = False) -> tuple[str, Workflow] | None:
  """A modification of `parent` not yet tried from it and leading to an unevaluated workflow (None: none left)."""
  tried = {r.modification for r in rounds if r.parent == parent.round}
  evaluated = {r.workflow.key for r in rounds}
  options = [(label, w) for label, w in edits(parent.workflow, benchmark, review_revise=review_revise)
             if label not in tried and w.key not in evaluated]
  if not options:
    return None
  return options[int(rng.integers(len(options)))]


Evaluate = Callable[[Workflow], Awaitable[tuple[float, float]]]


async def search_step(rounds: Sequence[Round], evaluate: Evaluate, benchmark: str, *, seed: int,
                      sample: int = SAMPLE, review_revise: bool = False) -> Round | None:
  """One round: select a parent, propose a modification, evaluate it. None when nothing is left to try."""
  number = max(r.round for r in rounds) + 1
  rng = np.random.default_rng([seed, _STREAM, number])
  for _ in range(MAX_RETRIES):
    parent = select_parent(rounds, rng, sample)
    proposal = propose(parent, rounds, benchmark, rng, review_revise=review_revise)
    if proposal is not None:
      label, child = proposal
      score, cost = await evaluate(child)
      return Round(number, child, parent.round, label, score, cost)
  return None


def best_round(rounds: Sequence[Round]) -> Round:
  return sorted(rounds, key=lambda r: (-r.score, r.round))[0]

"""Majority vote over sampled answers, with each benchmark's notion of "the same answer".

MMLU: the extracted letter. MATH: extracted answers grouped by equivalence (the grader's
`math_equivalent`, so "1/2" and "0.5" vote together). HumanEval+: the extracted code, normalised
(parsed and unparsed, docstrings dropped, so comments and formatting do not split votes).
Samples with no extractable answer do not vote. Ties go to the answer whose first sample has the
lowest sample index, and the returned text is that answer's lowest-index sample: deterministic.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import re
from typing import Sequence

from hieramas_jax.benchmarks import extract, graders
from hieramas_jax.benchmarks.data import Item


@dataclasses.dataclass(frozen=True)
class Vote:
  """The outcome: which sample's text wins and how the votes fell.

  Attributes:
    winner: index into the sample list of the text to return.
    answer: the winning extracted answer (None when no sample had one).
    counts: one entry per distinct answer, [answer, votes, first sample index], by votes.
  """

  winner: int
  answer: str | None
  counts: list[list]


def normalise_code(code: str) -> str:
  """Code with formatting, comments and docstrings removed; raw whitespace-collapsed text if unparsable."""
  try:
    tree = ast.parse(code)
  except (SyntaxError, ValueError):
    return re.sub(r"\s+", " ", code).strip()
  for node in ast.walk(tree):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
      body = node.body
      if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
          and isinstance(body[0].value.value, str):
        node.body = body[1:] or [ast.Pass()]
  return ast.unparse(tree)


def extract_answer(item: Item, text: str) -> str | None:
  """The vote key of one sample (before MATH equivalence grouping)."""
  if item.benchmark == "mmlu_redux":
    return extract.extract_mmlu_letter(text, options=item.meta.get("choices"))
  if item.benchmark == "math":
    return extract.extract_math_answer(text)
  if item.benchmark == "humaneval_plus":
    code = extract.extract_code(text, item.meta["entry_point"])
    return None if code is None else normalise_code(code)
  raise ValueError(f"no vote rule for benchmark {item.benchmark!r}")


async def majority_vote(item: Item, texts: Sequence[str]) -> Vote:
  """Majority answer over `texts` (in sample-index order); see the module docstring for the rules."""
  if not texts:
    raise ValueError("majority_vote needs at least one sample")
  answers = [extract_answer(item, t) for t in texts]
  groups: list[list] = []  # [representative answer, votes, first index]
  for i, a in enumerate(answers):
    if a is None:
      continue
    for g in groups:
      if await _same(item, g[0], a):
        g[1] += 1
        break
    else:
      groups.append([a, 1, i])
  if not groups:
    return Vote(winner=0, answer=None, counts=[])
  groups.sort(key=lambda g: (-g[1], g[2]))
  return Vote(winner=groups[0][2], answer=groups[0][0], counts=groups)


async def _same(item: Item, a: str, b: str) -> bool:
  if a == b:
    return True
  if item.benchmark == "math":
    # math_equivalent may wait on math-verify's worker process: keep the event loop free.
    ok, _ = await asyncio.to_thread(graders.math_equivalent, a, b)
    return ok
  return False

"""Reply texts in each benchmark's real format.

The graders (never the sim) decide right or wrong, so the texts only need to carry the chosen
answer in the format real models use: MMLU "The answer is (X)", MATH \\boxed{...}, HumanEval+ one
```python block with the complete function. The prose around it is filler of a plausible length,
so that completion-token counts (and therefore costs) scale with verbosity like real replies.
"""

from __future__ import annotations

import re

from hieramas_jax.benchmarks.data import Item

_KNOWLEDGE = (
    "The question is about {topic}, so the relevant facts come from that field.",
    "Recalling the standard account of {topic} narrows the options quickly.",
    "Several options contradict well-established results and can be ruled out.",
    "Comparing the remaining options with the details of the question, one fits every detail.",
    "The wording of the question points to a specific definition rather than a general claim.",
    "Checking the chosen option once more against the stem confirms it is consistent.",
    "Common misconceptions in {topic} explain why the other options look attractive.",
)
_MATH = (
    "We start by writing down exactly what the problem gives us.",
    "Setting up the relevant equation captures the condition in the statement.",
    "Simplifying carefully, term by term, keeps the algebra manageable.",
    "It helps to check a small case to make sure the pattern is right.",
    "Substituting the value back confirms it satisfies every condition.",
    "The remaining computation is routine arithmetic.",
    "We should also make sure no case has been missed or counted twice.",
    "Putting these steps together gives the value asked for.",
)
_CODE = (
    "The function has to follow the docstring exactly, including the edge cases it mentions.",
    "A single pass over the input is enough here, so the solution runs in linear time.",
    "Empty inputs and boundary values are handled by the same logic as the general case.",
    "The examples in the docstring serve as a quick check of the implementation.",
)
_GENERIC = (
    "Here is a concise answer to your request.",
    "The main point is that {topic} depends on the context in which it is used.",
    "In practice, it helps to start from the simplest case and build up from there.",
    "There are a few trade-offs to keep in mind, mainly clarity, cost and reliability.",
    "If you share more details, I can give a more specific recommendation.",
)
_ADOPT = {
    "mmlu_redux": "Most of the other responses converge on the same option, and on reflection I agree.",
    "math": "The other solutions reach the same value, and re-checking the computation agrees.",
    "humaneval_plus": "Building on the implementation proposed by the other agents:",
}

_WORD = re.compile(r"[A-Za-z][A-Za-z\-]{3,}")


def _pick_sentences(bank: tuple[str, ...], n: int, u: float, **fmt: str) -> list[str]:
  if n <= 0:
    return []
  start = int(u * len(bank)) % len(bank)
  return [bank[(start + i) % len(bank)].format(**fmt) for i in range(n)]


def answer_text(item: Item, answer: str, n_sentences: int, adopted: bool, u: float) -> str:
  """The full reply for a recognised item whose chosen answer is `answer`."""
  parts: list[str] = []
  if adopted:
    parts.append(_ADOPT[item.benchmark])
  if item.benchmark == "mmlu_redux":
    topic = item.meta.get("subject", "this subject").replace("_", " ")
    parts += _pick_sentences(_KNOWLEDGE, max(n_sentences, 1), u, topic=topic)
    parts.append(f"The answer is ({answer}).")
    return " ".join(parts)
  if item.benchmark == "math":
    parts += _pick_sentences(_MATH, max(n_sentences, 1), u)
    parts.append(f"Therefore, the final answer is $\\boxed{{{answer}}}$.")
    return "\n\n".join(parts)
  parts += _pick_sentences(_CODE, n_sentences, u)
  parts.append(f"```python\n{answer.rstrip()}\n```")
  return "\n\n".join(parts)


def generic_answer(prompt: str, verbosity: float) -> str:
  """A fluent, content-free reply for prompts that are not a known benchmark item."""
  words = _WORD.findall(prompt)
  topic = " ".join(words[:3]).lower() if words else "the topic"
  n = max(2, int(round(3 * verbosity)))
  return " ".join(_pick_sentences(_GENERIC, n, 0.0, topic=topic))

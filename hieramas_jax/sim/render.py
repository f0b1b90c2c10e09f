"""Reply texts in each benchmark's real format.

The graders (never the sim) decide right or wrong, so the texts only need to carry the chosen
answer in the format real models use: MMLU "The answer is (X)", MATH \\boxed{...}, HumanEval+ one
```python block with the complete function. The prose around it is filler of a planned length
(`prose_tokens`, from `params.VISIBLE_TOKENS`), so completion-token counts and costs scale with
the kind of prompt and the model's verbosity like real replies do.

No filler sentence reads as a request to reason (`intent.asks_to_reason`, tested): a reply quoted in a
later prompt must not read as an instruction to reason.
"""

from __future__ import annotations

import re

from hieramas_jax.benchmarks.data import Item
from hieramas_jax.sim import params as P

_KNOWLEDGE = (
    "The question is about {topic}, so the relevant facts come from that field.",
    "Recalling the standard account of {topic} narrows the options quickly.",
    "Several options contradict well-established results and can be ruled out.",
    "Comparing the remaining options with the details of the question, one fits every detail.",
    "The wording of the question points to a specific definition rather than a general claim.",
    "Reading the chosen option once more against the stem shows it is consistent.",
    "Common misconceptions in {topic} explain why the other options look attractive.",
    "A distractor here repeats a true statement that does not answer what is asked.",
    "The key term in the stem has a precise meaning in {topic} that settles the matter.",
    "One option is too broad and another too narrow for the situation described.",
)
_MATH = (
    "We start by writing down exactly what the problem gives us.",
    "Setting up the relevant equation captures the condition in the statement.",
    "Simplifying carefully, term by term, keeps the algebra manageable.",
    "It helps to try a small case to make sure the pattern is right.",
    "Substituting the value back shows it satisfies every condition.",
    "The remaining computation is routine arithmetic.",
    "We should also make sure no case has been missed or counted twice.",
    "Putting these pieces together gives the value asked for.",
    "Collecting like terms and cancelling common factors shortens the expression.",
    "The constraint rules out the negative root, so only one value remains.",
    "Writing the quantity in terms of a single variable makes the structure clear.",
    "A quick estimate confirms that the size of the result is plausible.",
)
_CODE = (
    "The function has to follow the docstring exactly, including the edge cases it mentions.",
    "A single pass over the input is enough here, so the solution runs in linear time.",
    "Empty inputs and boundary values are handled by the same logic as the general case.",
    "The examples in the docstring serve as a quick sanity test of the implementation.",
    "Only the standard library is needed, and the signature stays as given.",
    "Intermediate values are kept in local variables so the logic stays readable.",
)
_GENERIC = (
    "Here is a concise answer to your request.",
    "The main point is that {topic} depends on the context in which it is used.",
    "In practice, it helps to start from the simplest case and build up from there.",
    "There are a few trade-offs to keep in mind, mainly clarity, cost and reliability.",
    "If you share more details, I can give a more specific recommendation.",
    "Most of the difficulty lies in stating the goal precisely before choosing a method.",
)
# Said when the final answer is taken from the other responses rather than the own attempt.
_ADOPTED = {
    "mmlu_redux": "Looking at the other responses, their choice holds up best against the question.",
    "math": "Among the solutions given, this value is the one that survives a recomputation.",
    "humaneval_plus": "Building on the implementation proposed in the other responses:",
}

_WORD = re.compile(r"[A-Za-z][A-Za-z\-]{3,}")


def _prose(bank: tuple[str, ...], tokens: int, u: float, **fmt: str) -> list[str]:
  """Sentences from `bank`, starting at a u-dependent place, until about `tokens` tokens."""
  out: list[str] = []
  budget = tokens * P.CHARS_PER_TOKEN
  start = int(u * len(bank)) % len(bank)
  used = 0.0
  k = 0
  while used < budget - 20:
    sentence = bank[(start + k) % len(bank)].format(**fmt)
    out.append(sentence)
    used += len(sentence) + 1
    k += 1
  return out


def answer_text(item: Item, answer: str, prose_tokens: int, adopted: bool, u: float) -> str:
  """The full reply for a recognised item whose chosen answer (as written) is `answer`."""
  parts: list[str] = [_ADOPTED[item.benchmark]] if adopted else []
  if item.benchmark == "mmlu_redux":
    topic = item.meta.get("subject", "this subject").replace("_", " ")
    parts += _prose(_KNOWLEDGE, prose_tokens, u, topic=topic) or [_KNOWLEDGE[0].format(topic=topic)]
    parts.append(f"The answer is ({answer}).")
    return " ".join(parts)
  if item.benchmark == "math":
    parts += _prose(_MATH, prose_tokens, u) or [_MATH[0]]
    parts.append(f"Therefore, the final answer is $\\boxed{{{answer}}}$.")
    return "\n\n".join(parts)
  parts += _prose(_CODE, prose_tokens, u)
  parts.append(f"```python\n{answer.rstrip()}\n```")
  return "\n\n".join(parts)


def format_answer(answer_format: str, answer: str, prose_tokens: int, u: float) -> str:
  """A reply in a benchmark's format for a question the sim does not know."""
  if answer_format == "mcq":
    return " ".join(_prose(_KNOWLEDGE, prose_tokens, u, topic="this question") + [f"The answer is ({answer})."])
  if answer_format == "math":
    return "\n\n".join((_prose(_MATH, prose_tokens, u) or [_MATH[0]])
                       + [f"Therefore, the final answer is $\\boxed{{{answer}}}$."])
  return "\n\n".join(_prose(_CODE, prose_tokens, u) + [f"```python\n{answer.rstrip()}\n```"])


def generic_answer(prompt: str, prose_tokens: int, u: float = 0.0) -> str:
  """A fluent, content-free reply for prompts that are not a known benchmark question."""
  words = _WORD.findall(prompt)
  topic = " ".join(words[:3]).lower() if words else "the topic"
  return " ".join(_prose(_GENERIC, max(prose_tokens, 30), u, topic=topic))


FILLER_BANKS = (_KNOWLEDGE, _MATH, _CODE, _GENERIC, tuple(_ADOPTED.values()))

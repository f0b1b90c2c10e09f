"""AFlow's operators and the workflows built from them (an operator composition instead of workflow code).

Operators (after FoundationAgents/AFlow `scripts/operators.py`; prompts in its style, our wording):
  Custom       one call: an instruction + the problem -> a solution
  ScEnsemble   k Custom samples, then one call that picks the most consistent solution by letter
  Programmer   (MATH) the model writes `solve()`, the sandbox runs it (3 attempts with the error as
               feedback); its output is handed to the Custom calls as analysis
  Review       one call judging the solution (`<review_result>` True/False + `<feedback>`), then
  Revise       one call rewriting the solution from the feedback when the review says False
  Test         (HumanEval+) the solution runs on the prompt's public examples in the sandbox; on failure
               one reflection call proposes a fixed solution (at most 3 loops)

A `Workflow` fixes which operators run and how often; `run_workflow` executes it for one query with the
setting's strong model (AFlow's executor LLM) and returns the trace.

As AFlow runs it: the initial workflow is one Custom call with an empty instruction (its
`round_1/graph.py`: `custom(input=problem, instruction="")`), and the operators offered per benchmark are
its run script's (`run.py` EXPERIMENT_CONFIGS): MATH Custom, ScEnsemble, Programmer; HumanEval Custom,
ScEnsemble, Test (CustomCodeGenerate is our Custom with the code answer format); MMLU-Redux, which AFlow
does not run, the QA set's Custom and ScEnsemble (AnswerGenerate left out). Review/Revise are offered only
with `review_revise=True` (this suite's earlier search).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from typing import Any

from hieramas_jax.benchmarks import extract
from hieramas_jax.benchmarks.data import Item
from hieramas_jax.mas import roles
from hieramas_jax.mas.runtime import ChatClient, Clock, RunSettings, call_llm
from hieramas_jax.mas.trace import NO_NODE, Trace
from hieramas_jax.methods.aflow import execute
from hieramas_jax.methods.voting import extract_answer, majority_vote

INSTRUCTIONS = {
    "empty": "",
    "step_by_step": "Solve the following problem. Think step by step, then give the final answer.\n\n",
    "direct": "Answer the following problem concisely.\n\n",
    "plan_then_solve": ("First make a short plan for the following problem, then carry the plan out step by step "
                        "and give the final answer.\n\n"),
}
MAX_SAMPLES = 5
MAX_REVIEWS = 2

SC_ENSEMBLE_PROMPT = """Given the question described as follows: {question}
Several solutions have been generated to address the given question. They are as follows:
{solutions}
Carefully evaluate these solutions and identify the answer that appears most frequently across them. This \
consistency in answers is crucial for determining the most reliable solution.

In the "thought" field, provide a detailed explanation of your thought process. In the "solution_letter" field, \
output only the single letter ID (A, B, C, etc.) corresponding to the most consistent solution. Format:
<thought>...</thought>
<solution_letter>X</solution_letter>"""

REVIEW_PROMPT = """Given a problem and a thoughtful solution, your task is to use critical thinking (questioning) \
to review the solution's correctness and provide a review result in boolean format.

problem: {problem}
solution: {solution}

If you are more than 95 percent confident that the final answer is incorrect, return False and give feedback on \
the error. Otherwise return True and explain why it is correct. Format:
<review_result>True or False</review_result>
<feedback>...</feedback>"""

REVISE_PROMPT = """Given a problem, a solution and feedback on it, revise the solution so that it addresses the \
feedback, and give the complete revised solution in the required format.

problem: {problem}
solution: {solution}
feedback: {feedback}"""

PROGRAMMER_PROMPT = """You are a professional Python programmer. Your task is to write complete, self-contained \
code that computes the answer to the mathematical problem below. The code must include every import it needs and \
run without any setup.

Problem description: {problem}
Other analysis: {analysis}
{feedback}
Your code should:
1. Implement the calculation steps the problem describes.
2. Define a function named `solve` that takes no arguments and returns the final result.
Return the code in a single ```python code block."""

REFLECTION_PROMPT = """Given a code problem and a Python code solution which failed to pass a test or to execute, \
analyse the reason for the failure and propose a better code solution.

### problem
{problem}

### Code Solution
{solution}

### Execution Result
{result}

Give a short reflection on the failure, then the complete corrected function in a single ```python code block."""


class WorkflowError(ValueError):
  """A workflow that cannot run on a benchmark (an operator it does not support, counts out of range)."""


@dataclasses.dataclass(frozen=True)
class Workflow:
  """An operator composition.

  Attributes:
    instruction: the Custom operator's instruction (a key of INSTRUCTIONS; AFlow's initial one is empty).
    samples: Custom calls; more than one adds ScEnsemble over them.
    programmer: run the Programmer first (MATH only).
    reviews: Review (+ Revise on a False verdict) loops after the solution.
    test: run the Test operator last (HumanEval+ only).
  """

  instruction: str = "empty"
  samples: int = 1
  programmer: bool = False
  reviews: int = 0
  test: bool = False

  def __post_init__(self):
    if self.instruction not in INSTRUCTIONS:
      raise WorkflowError(f"unknown instruction {self.instruction!r}; known: {', '.join(INSTRUCTIONS)}")
    if not 1 <= self.samples <= MAX_SAMPLES or not 0 <= self.reviews <= MAX_REVIEWS:
      raise WorkflowError(f"need 1 <= samples <= {MAX_SAMPLES} and 0 <= reviews <= {MAX_REVIEWS}")

  def check(self, benchmark: str) -> "Workflow":
    if self.programmer and benchmark != "math":
      raise WorkflowError("the Programmer operator is for MATH")
    if self.test and benchmark != "humaneval_plus":
      raise WorkflowError("the Test operator is for HumanEval+")
    return self

  @property
  def key(self) -> str:
    return (f"{self.instruction}|k{self.samples}|prog{int(self.programmer)}|rev{self.reviews}|test{int(self.test)}")

  def describe(self) -> str:
    ops = (["Programmer"] if self.programmer else []) + [f"Custom({self.instruction})"
                                                          + (f" x{self.samples} -> ScEnsemble" if self.samples > 1
                                                             else "")]
    ops += ["Review -> Revise"] * self.reviews + (["Test"] if self.test else [])
    return " -> ".join(ops)

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


def edits(workflow: Workflow, benchmark: str, *, review_revise: bool = False) -> list[tuple[str, Workflow]]:
  """Every one-step modification of a workflow: (a short label, the modified workflow).

  These stand in for the code edits AFlow's optimizer LLM writes: add or drop an operator of the
  benchmark's set (module docstring), change a count, change the instruction. Review/Revise only with
  `review_revise`.
  """
  out = []

  def add(label, **changes):
    out.append((label, dataclasses.replace(workflow, **changes)))

  if workflow.samples < MAX_SAMPLES:
    add("+ ScEnsemble" if workflow.samples == 1 else "~ more samples", samples=min(MAX_SAMPLES, workflow.samples + 2))
  if workflow.samples > 1:
    add("- ScEnsemble" if workflow.samples <= 3 else "~ fewer samples", samples=max(1, workflow.samples - 2))
  if workflow.reviews < MAX_REVIEWS and review_revise:
    add("+ Review/Revise", reviews=workflow.reviews + 1)
  if workflow.reviews > 0:
    add("- Review/Revise", reviews=workflow.reviews - 1)
  if benchmark == "math":
    add("- Programmer" if workflow.programmer else "+ Programmer", programmer=not workflow.programmer)
  if benchmark == "humaneval_plus":
    add("- Test" if workflow.test else "+ Test", test=not workflow.test)
  for name in INSTRUCTIONS:
    if name != workflow.instruction:
      add(f"~ instruction: {name}", instruction=name)
  return out


def _xml_field(text: str, name: str) -> str | None:
  m = re.search(rf"<{name}>\s*(.*?)\s*</{name}>", text, re.S | re.I)
  return m.group(1) if m else None


class _Calls:
  """The calls of one query's workflow: one clock, one trace, distinct sample indices for repeats."""

  def __init__(self, client: ChatClient, item: Item, model: str, settings: RunSettings, trace: Trace):
    self.client, self.item, self.model, self.settings, self.trace = client, item, model, settings, trace
    self.clock = Clock()

  async def __call__(self, position: str, user: str, sample_index: int = 0) -> str:
    rec = await call_llm(self.client, self.clock, node=NO_NODE, role=None, position=position, model=self.model,
                         messages=[{"role": "system", "content": roles.HELPFUL_ASSISTANT},
                                   {"role": "user", "content": user}],
                         temperature=self.settings.temperature, max_tokens=self.settings.max_tokens,
                         sample_index=sample_index)
    self.trace.calls.append(rec)
    return rec.text


async def write_and_run(calls: _Calls, item: Item, analysis: str = "None", attempts: int = 3
                        ) -> tuple[str | None, str, bool]:
  """The Programmer's loop: (the last code or None when none was written, its output or error, whether it ran).

  MaAS reads the code and the raw output (its `Programmer` returns both); AFlow's `programmer` below turns
  them into analysis text.
  """
  feedback = ""
  code, output = None, ""
  for attempt in range(attempts):
    text = await calls("programmer", PROGRAMMER_PROMPT.format(problem=item.question, analysis=analysis,
                                                              feedback=feedback), attempt)
    code = extract.extract_code(text, "solve")
    if code is None:
      return None, "No code generated", False
    ok, output = await execute.run_solve(code)
    if ok:
      return code, output, True
    feedback = f"\nThe code you wrote in the previous attempt failed:\n{code}\n\nError: {output}\n"
  return code, output, False


async def programmer(calls: _Calls, item: Item, attempts: int = 3) -> str:
  """Writes and runs `solve()`; returns the program's output (or why there is none) as analysis text."""
  code, output, ok = await write_and_run(calls, item, attempts=attempts)
  if code is None:
    return "The program could not be written."
  return f"A Python program computed: {output}" if ok else "The program failed to run."


async def sc_ensemble(calls: _Calls, item: Item, solutions: list[str]) -> str:
  """The most consistent solution by the model's letter; an unreadable letter: the model's own answer if it
  gave one, else the majority answer among the solutions."""
  letters = "".join(chr(65 + i) for i in range(len(solutions)))
  listed = "".join(f"{letters[i]}: \n{s.strip()}\n\n\n" for i, s in enumerate(solutions))
  text = await calls("sc_ensemble", SC_ENSEMBLE_PROMPT.format(question=item.question, solutions=listed))
  letter = (_xml_field(text, "solution_letter") or "").strip().upper()[:1]
  if letter and letter in letters:
    return solutions[letters.index(letter)]
  if extract_answer(item, text) is not None:
    return text
  vote = await majority_vote(item, solutions)
  return solutions[vote.winner]


async def review_revise(calls: _Calls, item: Item, solution: str, loop: int) -> str:
  review = await calls(f"review:{loop}", REVIEW_PROMPT.format(problem=item.question, solution=solution))
  verdict = (_xml_field(review, "review_result") or "").strip().lower()
  if not verdict.startswith("false"):
    return solution
  feedback = _xml_field(review, "feedback") or review
  revised = await calls(f"revise:{loop}", REVISE_PROMPT.format(problem=roles.question_block(item, cot=False),
                                                               solution=solution, feedback=feedback))
  return _xml_field(revised, "solution") or revised


async def passes_examples(item: Item, solution: str) -> tuple[bool, str]:
  """Whether a solution's function passes the prompt's public examples in the sandbox: (passed, what failed).
  A prompt without literal examples passes (there is nothing to run)."""
  from hieramas_jax.benchmarks.humaneval import assemble_program  # pylint: disable=import-outside-toplevel
  if not execute.public_examples(item):
    return True, ""
  code = extract.extract_code(solution, item.meta["entry_point"])
  program = assemble_program(item, code) if code is not None else None
  if program is None:
    return False, "the solution holds no runnable code for the function"
  return await execute.run_examples(item, program)


async def test(calls: _Calls, item: Item, solution: str, loops: int = 3) -> str:
  """The Test operator: public examples in the sandbox, a reflection call per failure (at most `loops`)."""
  if not execute.public_examples(item):
    return solution
  for loop in range(loops):
    ok, error = await passes_examples(item, solution)
    if ok:
      return solution
    solution = await calls(f"test_reflection:{loop}", REFLECTION_PROMPT.format(problem=item.question,
                                                                              solution=solution, result=error))
  return solution


async def run_workflow(client: ChatClient, item: Item, workflow: Workflow, model: str,
                       settings: RunSettings = RunSettings(), *, method: str = "aflow",
                       sample_offset: int = 0) -> Trace:
  """Executes the workflow on one query; the final text is the last operator's solution.

  `sample_offset` shifts every call's sample index (another legitimate run of the same workflow:
  AFlow evaluates each workflow several times on the validation set).
  """
  workflow.check(item.benchmark)
  trace = Trace(item_id=item.id, method=method, extra={"workflow": workflow.to_json(),
                                                       "workflow_text": workflow.describe()})
  calls = _Calls(_Offset(client, sample_offset), item, model, settings, trace)
  analysis = await programmer(calls, item) if workflow.programmer else ""
  prompt = INSTRUCTIONS[workflow.instruction] + roles.question_block(item, cot=False)
  if analysis:
    prompt += f"\n\nOther analysis: {analysis}"
  solutions = list(await asyncio.gather(*(calls(f"custom:{k}", prompt, k) for k in range(workflow.samples))))
  solution = solutions[0] if len(solutions) == 1 else await sc_ensemble(calls, item, solutions)
  for loop in range(workflow.reviews):
    solution = await review_revise(calls, item, solution, loop)
  if workflow.test:
    solution = await test(calls, item, solution)
  trace.final_text = solution
  return trace


class _Offset:
  """Shifts sample indices by a fixed offset (repeated evaluations of one workflow)."""

  STRIDE = 1000

  def __init__(self, client: ChatClient, offset: int):
    self.client, self.offset = client, offset * self.STRIDE

  async def chat(self, model, messages, *, temperature, max_tokens, sample_index=0):
    return await self.client.chat(model, messages, temperature=temperature, max_tokens=max_tokens,
                                  sample_index=self.offset + sample_index)


# Public names for methods built on these operators (MaAS: `methods/maas/supernet.py`).
Calls = _Calls
Offset = _Offset

"""The baselines' HumanEval tool: candidate code run on the prompt's docstring examples.

One runner for every method that has it (GDesigner's `CodeWriting` / `FinalWriteCode`, MASRouter's
`inner_test`): `docstring_check(item)` gives a `mas.rounds.CodeCheck` that runs an agent's code in the
suite's sandbox on the prompt's literal examples (`aflow.execute.run_examples`: the examples every solver
sees, never the hidden tests; results cached and sealed under `.cache/humaneval_examples` like the grades).
The references differ only in what counts as code:

- "block" (GDesigner): the whole output is one Python code block (starts with ```python, ends with ```);
- "contains" (MASRouter, `MAR/Prompts/message_aggregation.py`): the output holds a ```python ... ``` span
  anywhere (`re.search(r'```python.*```', DOTALL)`), and that span is the code.

HieraMAS has no such tool in use: its `CodeWriting` workers and `FinalWriteCode` decision never receive
another agent's output as an input to test (docs/reference-differences.md), so nothing here runs for it.
"""

from __future__ import annotations

import re

from hieramas_jax.benchmarks import extract
from hieramas_jax.benchmarks.data import Item
from hieramas_jax.mas.rounds import CodeCheck
from hieramas_jax.methods.aflow import execute

DETECTIONS = ("block", "contains")
_CONTAINED = re.compile(r"```python.*```", re.DOTALL)


def docstring_check(item: Item, *, detect: str = "block") -> CodeCheck | None:
  """The docstring-example check for `item`, or None when it is not HumanEval+ or its prompt has no
  literal examples (the references then run nothing: GDesigner reports a pass with no test, MASRouter's
  `inner_test` returns "not passed"; here nothing is claimed).

  The check returns None for text that is not code (see the module docstring for `detect`), (False, why)
  for code with no runnable definition of the function, else the examples' (passed, feedback).
  """
  if detect not in DETECTIONS:
    raise ValueError(f"detect must be one of {DETECTIONS}, got {detect!r}")
  if item.benchmark != "humaneval_plus" or not execute.public_examples(item):
    return None
  from hieramas_jax.benchmarks.humaneval import assemble_program  # pylint: disable=import-outside-toplevel

  async def check(text: str) -> tuple[bool, str] | None:
    body = text.strip()
    if detect == "block":
      if not (body.startswith("```python") and body.endswith("```")):
        return None
    else:
      match = _CONTAINED.search(body)
      if match is None:
        return None
      body = match.group(0)
    code = extract.extract_code(body, item.meta["entry_point"])
    program = assemble_program(item, code) if code is not None else None
    if program is None:
      return False, "the code holds no runnable definition of the function"
    return await execute.run_examples(item, program)
  return check

"""MaAS's agentic supernet per benchmark: its operators, their descriptions (what the controller embeds), its
prompts, and the execution of a sampled architecture (bingreeky/MaAS `maas/ext/maas/scripts/optimized/
{MATH,HumanEval}/{train,test}/graph.py` and `template/{operator.py,op_prompt.py,prompt.py,operator.json}`).

Operators per benchmark (`benchmark/experiment_configs.py`):
  math            Generate, GenerateCoT, MultiGenerateCoT, ScEnsemble, Programmer, SelfRefine, EarlyStop
  humaneval_plus  Generate, GenerateCoT, MultiGenerateCoT, ScEnsemble, Test, SelfRefine, EarlyStop
  mmlu_redux      (MaAS runs no multiple-choice set) the MATH set without Programmer
Shared with AFlow's operators in this suite (`methods/aflow/workflow.py`, same origin: MaAS's templates
are AFlow's): ScEnsemble (`sc_ensemble`), Programmer (`write_and_run`, the sandbox), Test (`test`, the
prompt's public examples in the sandbox, reflection on failure, 3 loops; `passes_examples` for the final
verdict). Generate, GenerateCoT, MultiGenerateCoT and SelfRefine are MaAS's own prompts, verbatim below.

Execution (`Workflow.__call__` of the graphs), one operator after another, layer by layer:
  MATH first runs a fixed prefix: Programmer(problem), then Generate(problem + "\\nCode output: <output>",
  REFINE_ANSWER_PROMPT), its response the first entry of `solutions`. Each operator then reads and writes
  `current_solution` / `solutions` as the graph does (ScEnsemble replaces `solutions` by its pick;
  MultiGenerateCoT appends three; EarlyStop passes the current solution on). At the end: MATH (and
  MMLU-Redux) ScEnsemble over `solutions` when there are two or more, else the current solution;
  HumanEval Test on the current solution, its solution if it passes, else a fresh generation with
  IMPROVE_CODE_PROMPT (the graph discards the previous solutions there).
  The MATH training graph's Programmer operator yields the program's raw output; the test graph's yields
  Generate(problem + "\\nCode output: <code>", REFINE_ANSWER_PROMPT) (`phase`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from hieramas_jax.benchmarks.data import Item
from hieramas_jax.mas import roles
from hieramas_jax.mas.runtime import ChatClient, RunSettings
from hieramas_jax.mas.trace import Trace
from hieramas_jax.methods.aflow import workflow as aflow

OPERATORS: dict[str, tuple[str, ...]] = {
    "math": ("Generate", "GenerateCoT", "MultiGenerateCoT", "ScEnsemble", "Programmer", "SelfRefine", "EarlyStop"),
    "humaneval_plus": ("Generate", "GenerateCoT", "MultiGenerateCoT", "ScEnsemble", "Test", "SelfRefine",
                       "EarlyStop"),
    "mmlu_redux": ("Generate", "GenerateCoT", "MultiGenerateCoT", "ScEnsemble", "SelfRefine", "EarlyStop"),
}

# template/operator.json, (description, interface), verbatim. MATH's file serves MMLU-Redux too.
_MATH_JSON = {
    "Generate": ("Generates anything based on customized input and instruction.",
                 "generate(input: str, instruction: str) -> dict with key 'response' of type str"),
    "GenerateCoT": ("Generates anything using a chain-of-thought approach, providing step-by-step reasoning before "
                    "producing the final solution.If you need to solve mathematical or difficult reasoning problems, "
                    "you can use this operator.",
                    "generate_cot(input: str, instruction: str) -> dict with key 'response' of type str"),
    "MultiGenerateCoT": ("Generates multiple solutions using diverse chain-of-thought reasoning processes to increase "
                         "solution variety and robustness.",
                         "multi_generate_cot(input: str, instruction: str) -> dict with key 'response' of type "
                         "List[str]"),
    "ScEnsemble": ("Uses self-consistency to select the solution that appears most frequently in the solution list, "
                   "improve the selection to enhance the choice of the best solution.",
                   "sc_ensemble(solutions: List[str], problem: str) -> dict with key 'response' of type str"),
    "Programmer": ("Automatically writes, executes Python code, and returns the solution based on the provided "
                   "problem description and analysis. The `output` only contains the final answer. If you want to "
                   "see the detailed solution process, it's recommended to retrieve the `code`.",
                   "programmer(problem: str, analysis: str = 'None') -> dict with keys 'code' and 'output' of type "
                   "str"),
    "SelfRefine": ("Refines the generated solution by analyzing errors or suboptimal aspects and making iterative "
                   "improvements to enhance correctness and efficiency.",
                   "self_refine(problem: str, solution: str) -> dict with key 'response' of type str"),
    "EarlyStop": ("This issue has been correctly and effectively resolved. In order to prevent further activation of "
                  "operators from wasting resources, we will immediately stop answering this question.Immediately "
                  "terminates the workflow when selected, preventing any further operators from being invoked.",
                  "early_stop() -> dict with key 'terminate' of type bool"),
}
_HUMANEVAL_JSON = {
    "Generate": ("Generates code based on customized input and instruction.",
                 "generate(problem: str, entry_point: str, instruction: str) -> dict with key 'response' of type "
                 "str"),
    "GenerateCoT": ("Generates code using a chain-of-thought approach, providing step-by-step reasoning before "
                    "producing the final solution.",
                    "generate_cot(problem: str, entry_point: str, instruction: str) -> dict with key 'response' of "
                    "type str"),
    "MultiGenerateCoT": ("Generates multiple code solutions using diverse chain-of-thought reasoning processes to "
                         "increase solution variety and robustness.",
                         "multi_generate_cot(problem: str, entry_point: str, instruction: str) -> dict with key "
                         "'response' of type List[str]"),
    "ScEnsemble": _MATH_JSON["ScEnsemble"],
    "Test": ("Tests the solution using public test cases. If the solution fails, it reflects on the errors and "
             "attempts to modify the solution. Returns True and the solution if all tests pass after modifications. "
             "Returns False and the current solution if it still fails after modifications.",
             "test(problem: str, solution: str, entry_point: str) -> dict with key 'result' of type bool and key "
             "'solution' of type str"),
    "SelfRefine": (_MATH_JSON["SelfRefine"][0],
                   "self_refine(problem: str, solution: str, instruction: str) -> dict with key 'response' of type "
                   "str"),
    "EarlyStop": ("Immediately terminates the workflow when selected, preventing any further operators from being "
                  "invoked.", "early_stop() -> dict with key 'terminate' of type bool"),
}


def operator_descriptions(benchmark: str) -> list[str]:
  """The texts the controller embeds (`GraphUtils.load_operators_description_maas`):
  "{id}. {name}: {description}, with interface {interface}."."""
  table = _HUMANEVAL_JSON if benchmark == "humaneval_plus" else _MATH_JSON
  return [f"{i}. {name}: {table[name][0]}, with interface {table[name][1]}."
          for i, name in enumerate(OPERATORS[benchmark])]


# MATH template/prompt.py, verbatim.
DETAILED_SOLUTION_PROMPT = """
Provide a comprehensive, step-by-step solution to the given mathematical problem. Your response should include:

1. A clear restatement of the problem.
2. An explanation of the mathematical concepts and theorems involved.
3. A detailed, logical progression of steps leading to the solution.
4. Clear explanations for each step, including the reasoning behind it.
5. All mathematical expressions and equations in LaTeX format.
6. Visual aids or diagrams if applicable (described in text).
7. A final answer clearly marked and enclosed in \\boxed{} LaTeX notation.
8. A brief explanation of the significance of the result, if relevant.

Ensure your solution is rigorous, easy to follow, and educational for someone learning the concept.
"""

GENERATE_SOLUTION_PROMPT = """
Please solve the given mathematical problem step by step. Follow these guidelines:

1. State the problem clearly.
2. Outline the approach and any relevant formulas or concepts.
3. Provide detailed calculations, using LaTeX notation for mathematical expressions.
4. Explain each step of your reasoning.
5. Present the final answer enclosed in \\boxed{} LaTeX notation.
6. Ensure all mathematical notation is in LaTeX format.

Your solution should be thorough, mathematically sound, and easy to understand.
"""

REFINE_ANSWER_PROMPT = """
Given the mathematical problem and the output from the code execution, please provide a well-formatted and detailed solution. Follow these guidelines:

1. Begin with a clear statement of the problem.
2. Explain the approach and any formulas or concepts used.
3. Show step-by-step calculations, using LaTeX notation for mathematical expressions.
4. Interpret the code output and incorporate it into your explanation.
5. Provide a final answer, enclosed in \\boxed{} LaTeX notation.
6. Ensure all mathematical notation is in LaTeX format.

Your response should be comprehensive, mathematically rigorous, and easy to follow.
"""

# MATH template/op_prompt.py GENERATE_COT_PROMPT, verbatim.
GENERATE_COT_PROMPT = '''
Mathematical Reasoning Instruction
{instruction}

Current Problem: {input}

Demonstration Examples (GSM8K/MATH style):

1. Problem: Find all real solutions to $x^4 - 3x^2 - 4 = 0$
   Analysis: 
   Let $y = x^2$, transforming to quadratic equation:  
   $y^2 - 3y - 4 = 0$  
   Factorization: $(y-4)(y+1)=0$ → $y=4$ or $y=-1$  
   Since $y=x^2 \\geq 0$, discard $y=-1$  
   Solve $x^2=4$ → $x=\\pm 2$  
   \\boxed{{-2}}, \\boxed{{2}}

2. Problem: Cone with height 12cm, radius 6cm. Find volume.
   Analysis:
   Volume formula: $V = \\frac{{1}}{{3}}\\pi r^2 h$  
   Substitute values: $V = \\frac{{1}}{{3}}\\pi(6)^2(12)$  
   Calculate: $6^2=36$ → $36\\times12=432$  
   Final volume: $\\frac{{432}}{{3}}\\pi = 144\\pi$  
   \\boxed{{144\\pi}}

Solution Protocol:
1. Parse problem statement carefully
2. Identify relevant mathematical concepts
3. Perform stepwise symbolic derivation
4. Verify intermediate results
5. Present final answer in boxed notation

Step-by-Step Analysis:
'''

# template/op_prompt.py SELFREFINE_PROMPT (MATH and HumanEval alike), verbatim.
SELFREFINE_PROMPT = """
You are an assistant specialized in refining solutions to problems.

Problem:
{problem}

Solution:
{solution}

Instruction:
Analyze the above solution for any errors or suboptimal aspects. Make iterative improvements to enhance its correctness and efficiency. Provide the refined solution below.
"""

# HumanEval template/prompt.py IMPROVE_CODE_PROMPT, verbatim.
IMPROVE_CODE_PROMPT = """
The previous solution failed some test cases in the HumanEval benchmark. Please conduct a thorough analysis of the problem statement, identifying all edge cases and potential pitfalls. Then, provide an improved solution that not only fixes the issues but also optimizes performance and adheres to industry-standard coding practices. Ensure your revised code includes clear, concise comments that explain your logic and design choices, and that it robustly handles all specified requirements.
"""

PHASES = ("train", "test")
FORMAT_BROKEN = ("GenerateCoT", "MultiGenerateCoT")


class ReferenceFormatError(RuntimeError):
  """The public MATH/GSM8K code's GenerateCoT and MultiGenerateCoT raise before their first call:
  `GENERATE_COT_PROMPT.format(...)` meets the template's literal braces (`\\boxed{-2}` -> KeyError '-2').
  The benchmark then reruns the whole query (a fresh architecture) up to 20 times (`_generate_output`'s
  tenacity retry). Raised here only with `format_error=True`; carries the calls made before the crash."""

  def __init__(self, trace: Trace):
    super().__init__("GENERATE_COT_PROMPT.format raised KeyError '-2' (the public code's template)")
    self.trace = trace


class _Numbered(aflow.Calls):
  """AFlow's per-query caller, every call with its own sample index (0, 1, 2, ... in execution order).

  MaAS runs the same prompt several times in one query (MultiGenerateCoT's three calls, Generate in two
  layers, the final Test after a Test layer); distinct indices keep them independent draws rather than
  one request answered again from the cache.
  """

  def __init__(self, *args):
    super().__init__(*args)
    self.count = 0

  async def __call__(self, position: str, user: str, sample_index: int = 0) -> str:
    del sample_index
    self.count += 1
    return await super().__call__(position, user, self.count - 1)


@dataclasses.dataclass
class _State:
  current: str = ""
  solutions: list[str] = dataclasses.field(default_factory=list)


def _generate_prompt(item: Item, op: str, problem: str) -> str:
  """Generate / GenerateCoT / one MultiGenerateCoT call, as the benchmark's graph instructs them."""
  if item.benchmark == "math":
    if op == "Generate":  # operator.Generate: instruction + input
      return DETAILED_SOLUTION_PROMPT + problem
    instruction = DETAILED_SOLUTION_PROMPT if op == "GenerateCoT" else GENERATE_SOLUTION_PROMPT
    return GENERATE_COT_PROMPT.format(instruction=instruction, input=problem)
  # HumanEval's graph passes instruction="" to all three (its GenerateCoT is Generate); MMLU-Redux does the same.
  return problem


async def _refine_with(calls: _Numbered, problem: str, text: str, position: str) -> str:
  return await calls(position, REFINE_ANSWER_PROMPT + problem + f"\nCode output: {text}")


class _FormatCrash(Exception):
  pass


async def _apply(calls: _Numbered, item: Item, op: str, state: _State, problem: str, phase: str, tag: str,
                 format_error: bool) -> None:
  if format_error and item.benchmark == "math" and op in FORMAT_BROKEN:
    raise _FormatCrash()
  if op in ("Generate", "GenerateCoT"):
    new = await calls(f"{tag}{op}", _generate_prompt(item, op, problem))
    state.solutions.append(new)
  elif op == "MultiGenerateCoT":
    for k in range(3):
      new = await calls(f"{tag}{op}:{k}", _generate_prompt(item, op, problem))
      state.solutions.append(new)
  elif op == "SelfRefine":
    new = await calls(f"{tag}{op}", SELFREFINE_PROMPT.format(problem=problem, solution=state.current))
    state.solutions.append(new)
  elif op == "ScEnsemble":
    new = await aflow.sc_ensemble(calls, item, state.solutions)
    state.solutions = [new]
  elif op == "Programmer":
    code, output, _ = await aflow.write_and_run(calls, item, analysis=state.current)
    new = output if phase == "train" else await _refine_with(calls, problem, code or "None", f"{tag}refine")
    state.solutions.append(new)
  elif op == "Test":
    new = await aflow.test(calls, item, state.current)
    state.solutions.append(new)
  else:  # EarlyStop: the graph's `else` branch
    new = state.current
  state.current = new


async def run_architecture(client: ChatClient, item: Item, layers: Sequence[Sequence[str]], model: str,
                           settings: RunSettings, *, phase: str = "test", method: str = "maas",
                           sample_offset: int = 0, extra: dict[str, Any] | None = None,
                           format_error: bool = False) -> Trace:
  """Executes one sampled architecture (operator names per layer) on one query; returns its trace.

  `sample_offset` shifts every call's sample index (the training repetitions are further runs of the
  same query). `format_error`: MATH's GenerateCoT / MultiGenerateCoT raise `ReferenceFormatError` as the
  public code's do (class docstring).
  """
  if phase not in PHASES:
    raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
  allowed = set(OPERATORS[item.benchmark])
  for layer in layers:
    for op in layer:
      if op not in allowed:
        raise ValueError(f"operator {op!r} is not in MaAS's {item.benchmark} supernet")
  trace = Trace(item_id=item.id, method=method, extra={"layers": [list(l) for l in layers], **(extra or {})})
  calls = _Numbered(aflow.Offset(client, sample_offset), item, model, settings, trace)
  problem = roles.question_block(item, cot=False)
  state = _State()
  if item.benchmark == "math":
    _, output, _ = await aflow.write_and_run(calls, item)
    state.solutions.append(await _refine_with(calls, problem, output, "prefix:refine"))
  try:
    for l, layer in enumerate(layers):
      for op in layer:
        await _apply(calls, item, op, state, problem, phase, f"L{l}:", format_error)
  except _FormatCrash:
    raise ReferenceFormatError(trace) from None
  if item.benchmark == "humaneval_plus":
    solution = await aflow.test(calls, item, state.current)
    passed, _ = await aflow.passes_examples(item, solution)
    if not passed:
      solution = await calls("improve", IMPROVE_CODE_PROMPT + problem)
    trace.extra["final_test_passed"] = passed
  elif len(state.solutions) > 1:
    solution = await aflow.sc_ensemble(calls, item, state.solutions)
  else:
    solution = state.current
  trace.final_text = solution
  return trace

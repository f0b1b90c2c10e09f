"""Role sets, role descriptions and the prompts every agent of the suite sends.

The role sets are the reference code's (tianyao-aka/HieraMAS; docs/reference-differences.md). Descriptions: the paper's
Table 13 text where we have it (the three MATH roles and Project Manager); for the other roles our
own text in the style of the GDesigner / AgentPrune prompt sets, which the reference code uses.
"Knowlegable Expert" keeps the reference spelling on purpose: the name is embedded by the policy and
matched by the simulator's role-fit model, so changing it would change both.

The prompts follow the conventions shared with the simulated pool (docs/methods.md): role agents'
system messages start "You are a {Role}.", single-model baselines use "You are a helpful assistant.",
chain-of-thought prompts contain "Let's think step by step.", other agents' outputs come as
"### Response from Agent k (Role):" blocks, a synthesizer's as "### Proposal k:" blocks. These are
ordinary phrasings a real model reads the same way; nothing in them is a side channel.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping, Sequence

from hieramas_jax.benchmarks.data import Item, check_benchmark
from hieramas_jax.errors import UserError

ROLE_SETS: Mapping[str, tuple[str, ...]] = {
    "math": ("Mathematical Analyst", "Math Solver", "Inspector"),
    # "Knowlegable" [sic]: the reference spelling, kept (see the module docstring).
    "mmlu_redux": ("Knowlegable Expert", "Critic", "Mathematician", "Psychologist", "Historian",
                   "Doctor", "Lawyer", "Economist"),
    "humaneval_plus": ("Project Manager", "Algorithm Designer", "Programming Expert", "Test Analyst",
                       "Bug Fixer"),
}

# Paper Table 13 where it has the role ("[T13]"), otherwise our own text ("[ours]").
ROLE_DESCRIPTIONS: Mapping[str, str] = {
    # [T13]
    "Mathematical Analyst": (
        "Specialized in breaking down complex math problems. Identifies mathematical structure, defines "
        "variables, and sets up equations. Best for initial problem understanding and mathematical "
        "modeling."),
    # [T13]
    "Math Solver": (
        "Specialized in executing mathematical computations. Solves equations, performs calculations, "
        "and verifies numerical results. Best for carrying out calculations and deriving numerical "
        "answers."),
    # [T13]
    "Inspector": (
        "Specialized in reviewing and validating solutions. Checks solution correctness, identifies "
        "errors, and verifies final answers. Best for final verification and error catching."),
    # [ours]
    "Knowlegable Expert": (
        "You have broad and deep general knowledge across science, humanities and everyday facts. "
        "Identify the key concepts and facts the question depends on, recall them precisely, and use "
        "them to decide between the options."),
    "Critic": (
        "You examine reasoning with a skeptical eye. Point out, one by one, the weak steps, unstated "
        "assumptions and factual mistakes in the analyses you are given, then say which option survives "
        "the scrutiny."),
    "Mathematician": (
        "You are strong at arithmetic, algebra, logic puzzles and quantitative reasoning. Work through "
        "any calculation or formal argument the question needs carefully and exactly."),
    "Psychologist": (
        "You know psychology, sociology and philosophy well: human behaviour, cognition, development, "
        "ethics and social structures. Apply that knowledge to the question."),
    "Historian": (
        "You study cultural, economic, political and social events of the past, reasoning from primary "
        "sources and historical context to explain what happened and why."),
    "Doctor": (
        "You have clinical and biomedical knowledge: anatomy, physiology, pathology, pharmacology and "
        "public health. Reason about the question as a careful physician would."),
    "Lawyer": (
        "You know law and legal reasoning: statutes, case law, constitutional principles, contracts, "
        "torts and professional ethics. Analyse the question by applying the relevant rules to the facts."),
    "Economist": (
        "You understand micro- and macroeconomics, finance, accounting and business. Reason about "
        "incentives, markets and quantities to answer the question."),
    # [T13]
    "Project Manager": (
        "Specialized in design patterns and code structure. Coordinates solution strategy and organizes "
        "workflow. Best for complex problems requiring structured multi-step approaches."),
    # [ours]
    "Algorithm Designer": (
        "You design algorithms: choose the data structures, work out the steps and their complexity, and "
        "handle every edge case the specification implies before any code is written."),
    "Programming Expert": (
        "You write correct, clean and efficient Python. Implement the requested function exactly as "
        "specified by its signature and docstring, using only the standard library."),
    "Test Analyst": (
        "You think in test cases: derive normal, boundary and corner-case inputs from the specification, "
        "predict the expected outputs, and check the candidate implementation against them."),
    "Bug Fixer": (
        "You find and fix defects. Read the candidate implementations critically, locate the bugs or "
        "unhandled cases, and produce a corrected version of the function."),
}

HELPFUL_ASSISTANT = "You are a helpful assistant."
STEP_BY_STEP = "Let's think step by step."

# The answer format each benchmark's grader extracts (benchmarks/graders.py).
ANSWER_FORMAT: Mapping[str, str] = {
    "mmlu_redux": "End your response with 'The answer is (X)' where X is the letter of the correct option.",
    "math": "Please put your final answer within \\boxed{}.",
    "humaneval_plus": ("Complete the following Python function. Return the complete function in a single "
                       "```python code block."),
}

# Mixture-of-Agents aggregate-and-synthesize prompt (Wang et al., 2024, "Mixture-of-Agents Enhances
# Large Language Model Capabilities", Table 1 wording).
MOA_SYNTHESIS_PROMPT = (
    "You have been provided with a set of responses from various models to the latest user query. Your "
    "task is to synthesize these responses into a single, high-quality response. It is crucial to "
    "critically evaluate the information provided in these responses, recognizing that some of it may be "
    "biased or incorrect. Your response should not simply replicate the given answers but should offer a "
    "refined, accurate, and comprehensive reply to the instruction. Ensure your response is "
    "well-structured, coherent, and adheres to the highest standards of accuracy and reliability.")

# The final decision node's system prompt: the reference prompt sets' decision role and constraint
# (GDesigner / MASRouter / HieraMAS share them: `get_decision_role`, `get_decision_constraint` of the
# mmlu, math and humaneval prompt sets), without their answer-format sentences ("The last line ... The
# answer is 140", "Your reply must only contain one letter", "Do not include anything other than Python
# code blocks"): the question block's ANSWER_FORMAT says how to answer, the same for every method. So MATH
# asks for reasons ("Give reasons for making decisions"), MMLU-Redux and HumanEval+ do not, as there.
DECISION_ROLE: Mapping[str, str] = {
    "math": ("You are the top decision-maker. Good at analyzing and summarizing mathematical problems, judging "
             "and summarizing other people's solutions, and giving final answers to math problems."),
    "mmlu_redux": ("You are the top decision-maker and are good at analyzing and summarizing other people's "
                   "opinions, finding errors and giving final answers."),
    "humaneval_plus": ("You are the top decision-maker and are good at analyzing and summarizing other people's "
                       "opinions, finding errors and giving final answers. And you are an AI that only responds "
                       "with only python code."),
}
DECISION_CONSTRAINT: Mapping[str, str] = {
    "math": ("You will be given a math problem, analysis and code from other agents. Please find the most "
             "reliable answer based on the analysis and results of other agents. Give reasons for making "
             "decisions."),
    "mmlu_redux": ("I will ask you a question. I will also give you the answer options. Only one answer out of the "
                   "offered options is correct. You must choose the correct answer to the question. I will give "
                   "you some other people's answers and analysis."),
    "humaneval_plus": ("You will be given a function signature and its docstring by the user. You may be given the "
                       "overall code design, algorithm framework, code implementation or test problems. Write your "
                       "full implementation (restate the function signature). If the prompt given to you contains "
                       "code that passed internal testing, you can choose the most reliable reply. If there is no "
                       "code that has passed internal testing in the prompt, you can change it yourself according "
                       "to the prompt."),
}


# The HumanEval+ constraint's two sentences about internal testing (GDesigner's FinalWriteCode runs the
# agents' code on the docstring examples and shows the result). Where no test result is shown, they
# would describe something the prompt does not hold, so this sentence replaces them.
UNTESTED_CODE_SENTENCES = ("If the prompt given to you contains code that passed internal testing, you can choose "
                           "the most reliable reply. If there is no code that has passed internal testing in the "
                           "prompt, you can change it yourself according to the prompt.",
                           "If the prompt given to you contains code, you can choose the most reliable reply or "
                           "change it yourself according to the prompt.")


def decision_system(benchmark: str, *, tested: bool = False) -> str:
  """The decision node's system prompt of `benchmark` (reference wording, see DECISION_ROLE).

  Args:
    benchmark: the benchmark.
    tested: the agents' code comes with its internal-test results (GDesigner's HumanEval tools); without,
      the HumanEval+ constraint's internal-testing sentences are replaced (`UNTESTED_CODE_SENTENCES`).
  """
  check_benchmark(benchmark)
  constraint = DECISION_CONSTRAINT[benchmark]
  if not tested:
    constraint = constraint.replace(*UNTESTED_CODE_SENTENCES)
  return f"{DECISION_ROLE[benchmark]}\n{constraint}"


class UnknownRoleError(UserError, KeyError):
  """A role name that is not in the benchmark's role set."""

  def __init__(self, role: str, benchmark: str | None = None):
    super().__init__(role, benchmark)
    self.role, self.benchmark = role, benchmark

  def __str__(self) -> str:
    if self.benchmark is None:
      return f"unknown role {self.role!r}; known: {', '.join(ROLE_DESCRIPTIONS)}"
    return (f"role {self.role!r} is not in the {self.benchmark} role set; known: "
            f"{', '.join(ROLE_SETS[self.benchmark])}")


def roles_for(benchmark: str) -> tuple[str, ...]:
  """The reference role set of a benchmark (raises UnknownBenchmarkError)."""
  return ROLE_SETS[check_benchmark(benchmark)]


def role_description(role: str) -> str:
  try:
    return ROLE_DESCRIPTIONS[role]
  except KeyError:
    raise UnknownRoleError(role) from None


def check_role(benchmark: str, role: str) -> str:
  if role not in roles_for(benchmark):
    raise UnknownRoleError(role, benchmark)
  return role


def role_system_line(role: str) -> str:
  """"You are a Math Solver. <description>" (the article follows the role's first letter)."""
  article = "an" if role[0].lower() in "aeiou" else "a"
  return f"You are {article} {role}. {role_description(role)}"


@dataclasses.dataclass(frozen=True)
class AgentOutput:
  """Another agent's text as shown to a later agent."""

  index: int  # 1-based number shown in the prompt
  role: str | None
  text: str


def question_block(item: Item, *, cot: bool) -> str:
  """The question, the benchmark's answer format and (cot) the step-by-step request: every prompt's core."""
  parts = [item.question.rstrip(), "", ANSWER_FORMAT[item.benchmark]]
  if cot:
    parts.append(STEP_BY_STEP)
  return "\n".join(parts)


def agent_blocks(outputs: Sequence[AgentOutput]) -> str:
  """Other agents' outputs as "### Response from Agent k (Role):" blocks (the suite's own wording)."""
  blocks = []
  for out in outputs:
    label = f"Agent {out.index} ({out.role})" if out.role else f"Agent {out.index}"
    blocks.append(f"### Response from {label}:\n{out.text.strip()}")
  return "\n\n".join(blocks)


def single_model_messages(item: Item, *, cot: bool) -> list[dict]:
  """Base (cot=False: answer directly) and CoT (cot=True) prompts of the single-model baselines."""
  check_benchmark(item.benchmark)
  return [{"role": "system", "content": HELPFUL_ASSISTANT},
          {"role": "user", "content": question_block(item, cot=cot)}]


def agent_messages(item: Item, role: str, inputs: Sequence[AgentOutput] = (), *, cot: bool = True
                   ) -> list[dict]:
  """A role agent (proposer, or a synthesizer alone) reading the question and its predecessors.

  Role agents reason step by step by default: they are the MAS's workers and their text is what
  later agents read.
  """
  check_role(item.benchmark, role)
  user = question_block(item, cot=cot)
  if inputs:
    user += ("\n\nHere are the responses of other agents to this question. Use them critically:\n\n"
             + agent_blocks(inputs))
  return [{"role": "system", "content": role_system_line(role)},
          {"role": "user", "content": user}]


def synthesizer_messages(item: Item, role: str | None, proposals: Sequence[str]) -> list[dict]:
  """The Mixture-of-Agents synthesis call over a supernode's proposals."""
  if not proposals:
    raise ValueError("a synthesizer needs at least one proposal; with none the node answers alone")
  system = MOA_SYNTHESIS_PROMPT
  if role is not None:
    check_role(item.benchmark, role)
    system += "\n\n" + role_system_line(role)
  blocks = "\n\n".join(f"### Proposal {k}:\n{p.strip()}" for k, p in enumerate(proposals, 1))
  user = f"{question_block(item, cot=False)}\n\nResponses from models:\n\n{blocks}"
  return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def decision_messages(item: Item, outputs: Sequence[AgentOutput]) -> list[dict]:
  """The final decision node: the question plus the agents' outputs, the answer in the benchmark format."""
  check_benchmark(item.benchmark)
  user = question_block(item, cot=False)
  if outputs:
    user += "\n\nHere are the responses of the agents:\n\n" + agent_blocks(outputs)
  user += "\n\nGive the final answer in the required format."
  return [{"role": "system", "content": decision_system(item.benchmark)}, {"role": "user", "content": user}]



@dataclasses.dataclass(frozen=True)
class PromptSet:
  """The three message builders a MAS run sends with: role agents, synthesizers and the decision node.

  Every method uses the suite's (`SUITE_PROMPTS`, the functions above). HieraMAS may run the reference
  code's own prompts instead (`methods/hieramas/prompts.py`, config `prompt_set`); the runtime takes the set
  as an argument, so no other method's requests change.

  Attributes:
    name: "suite" or the set's own name (written into traces).
    agent: (item, role, inputs, *, cot) -> messages, for a proposer or a node without proposers.
    synthesizer: (item, role, proposals, inputs) -> messages; inputs are the node's predecessors' outputs
      (the suite shows them to the proposers only; the reference's aggregator reads them too).
    decision: (item, outputs) -> messages.
  """

  name: str
  agent: Callable[..., list[dict]]
  synthesizer: Callable[..., list[dict]]
  decision: Callable[..., list[dict]]


def _suite_synthesizer(item: Item, role: str | None, proposals: Sequence[str],
                       inputs: Sequence[AgentOutput] = ()) -> list[dict]:
  del inputs  # the suite's synthesizer reads the proposals only
  return synthesizer_messages(item, role, proposals)


SUITE_PROMPTS = PromptSet("suite", agent_messages, _suite_synthesizer, decision_messages)

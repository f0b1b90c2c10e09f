"""The reference code's own prompts for HieraMAS (config `prompt_set="reference"`), quoted as data.

The suite's prompts (`mas/roles.py`) are shared by every method; the reference HieraMAS sends its own,
per benchmark (tianyao-aka/HieraMAS at cacb988, cited per string below). What a run sends with them:

- a worker (proposer; `agents/analyze_agent.py` AnalyzeAgent on MMLU, `agents/math_solver.py` MathSolver on
  MATH): system = the role's text of the benchmark's prompt set (on MMLU only the role description:
  `get_analyze_constraint` returns the description alone for a known role, its instructions sit in the
  other branch of a conditional expression); user = "The task is: {task}\\n" (MMLU) or "Q:{task}" (MATH),
  where task is the query followed by the predecessor nodes' outputs
  (`graph/learnable_multi_node.py` `_build_enhanced_task`);
- a synthesizer (`agents/final_decision.py` FinalMultiAgentAggregator): system = the benchmark's decision
  constraint; user = `get_multi_agent_aggregation_prompt`: the same task, the workers' outputs as
  numbered analyses / solutions, then the role's MULTI_AGENT_AGGREGATION_PROMPTS entry;
- the decision node (FinalRefer): system = "{decision role}.\\n {decision constraint}"; user = the few-shot
  example (MATH), the query, every active role's output as "Agent {role} output:" and the answer-format line
  (`graph/learnable_multi_node_graph.py` `forward`). Its spatial inputs are empty there (the dict built for
  them is never passed), so the outputs reach it only inside the task text, as here.

The task text is the suite's item.question (on MMLU-Redux the reference's own format, the question then
"A. ..." lines; on MATH the problem; on HumanEval+ the signature and docstring). Node ids: the reference names a role node "mn_{Role_Name}_{id}" with a
4-character id drawn at random per graph instance; here the id is fixed (`GRAPH_ID`), so a request's text
depends only on the item and the configuration (and the response cache holds across runs).

On HumanEval the reference's CodeWriting and FinalWriteCode agents would run the docstring examples on code
that reaches them as spatial inputs; in HieraMAS's runtime none does (the predecessors' outputs are in the
task text, workers have no predecessors, the decision node none either: docs/reference-differences.md,
"HumanEval+ agents' tools"), so no code runs and every call is made, as here.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from hieramas_jax.benchmarks.data import Item
from hieramas_jax.errors import UserError
from hieramas_jax.mas import roles as roles_lib

# The random 4-character graph id of the reference's node ids, fixed (module docstring).
GRAPH_ID = "0000"

# prompt/gsm8k_prompt_set.py (MATH runs with --domain gsm8k: experiments_v2/math/run_math_learnable_graph.py).
NO_DRAWING_INSTRUCTION = (
    "\n\nIMPORTANT: Do NOT include any drawing code such as Asymptote [asy], "
    "TikZ, PSTricks, or similar diagram code in your response. "
    "Focus only on mathematical reasoning and calculations.")
_ANSWER_140 = ("The last line of your output contains only the final result without any units, for example: "
               "The answer is 140\n")

# Worker system prompts: gsm8k ROLE_DESCRIPTION (`get_constraint`), mmlu ROLE_DESCRIPTION
# (`get_analyze_constraint` of a known role).
WORKER_SYSTEM: Mapping[str, Mapping[str, str]] = {
    "math": {
        "Math Solver": (
            "You are a math expert. You will be given a math problem and hints from other agents. "
            "Give your own solving process step by step based on hints. " + _ANSWER_140 + NO_DRAWING_INSTRUCTION),
        "Mathematical Analyst": (
            "You are a mathematical analyst. You will be given a math problem, analysis and outputs from other "
            "agents. You need to first analyze the problem-solving process step by step, where the variables are "
            "represented by letters. Then you substitute the values into the analysis process to perform "
            "calculations and get the results." + _ANSWER_140 + NO_DRAWING_INSTRUCTION),
        "Inspector": (
            "You are an Inspector. You will be given a math problem, analysis and outputs from other agents. "
            "Check whether the logic/calculation of the problem solving and analysis process is correct(if "
            "present). Check whether the code corresponds to the solution analysis(if present). Give your own "
            "solving process step by step based on hints. " + _ANSWER_140 + NO_DRAWING_INSTRUCTION),
    },
    "mmlu_redux": {
        "Knowlegable Expert": (
            "\nYou are a knowlegable expert in question answering.\nPlease give several key entities that need to "
            "be searched in wikipedia to solve the problem, for example: catfish effect, broken window effect, "
            "Shakespeare.\nIf there is no entity in the question that needs to be searched in Wikipedia, you "
            "don't have to provide it\n"),
        "Critic": "\nYou are an excellent critic.\nPlease point out potential issues in other agent's analysis point "
                  "by point.\n",
        "Mathematician": "\nYou are a mathematician who is good at math games, arithmetic calculation, and "
                         "long-term planning.\n",
        "Psychologist": "\nYou are a psychologist.\nYou are good at psychology, sociology, and philosophy.\nYou give "
                        "people scientific suggestions that will make them feel better.\n",
        "Historian": "\nYou research and analyze cultural, economic, political, and social events in the past, "
                     "collect data from primary sources and use it to develop theories about what happened during "
                     "various periods of history.\n",
        "Doctor": "\nYou are a doctor and come up with creative treatments for illnesses or diseases.\nYou are able "
                  "to recommend conventional medicines, herbal remedies and other natural alternatives. \nYou also "
                  "consider the patient's age, lifestyle and medical history when providing your recommendations.\n",
        "Lawyer": "\nYou are good at law, politics, and history.\n",
        "Economist": "\nYou are good at economics, finance, and business.\nYou have experience on understanding "
                     "charts while interpreting the macroeconomic environment prevailing across world economies.\n",
    },
    # prompt/humaneval_prompt_set.py ROLE_DESCRIPTION (`get_constraint`); "Don\u2019t" with the typographic
    # apostrophe, and the missing spaces between some sentences, as there.
    "humaneval_plus": {
        "Project Manager": (
            "You are a project manager. You will be given a function signature and its docstring by the user. "
            "You are responsible for overseeing the overall structure of the code, ensuring that the code is "
            "structured to complete the task Implement code concisely and correctly without pursuing "
            "over-engineering.You need to suggest optimal design patterns to ensure that the code follows best "
            "practices for maintainability and flexibility. You can specify the overall design of the code, "
            "including the classes that need to be defined(maybe none) and the functions used (maybe only one "
            "function) .I hope your reply will be more concise. Preferably within fifty words. Don\u2019t list too "
            "many points."),
        "Algorithm Designer": (
            "You are an algorithm designer. You will be given a function signature and its docstring by the user. "
            "You need to specify the specific design of the algorithm, including the classes that may be defined and "
            "the functions used. You need to generate the detailed documentation, including explanations of the "
            "algorithm, usage instructions, and API references. When the implementation logic is complex, you can "
            "give the pseudocode logic of the main algorithm.I hope your reply will be more concise. Preferably "
            "within fifty words. Don\u2019t list too many points."),
        "Programming Expert": (
            "You are a programming expert. You will be given a function signature and its docstring by the user. "
            "You may be able to get the output results of other agents. They may have passed internal tests, but "
            "they may not be completely correct. Write your full implementation (restate the function signature). "
            "Use a Python code block to write your response. For example:\n```python\nprint('Hello world!')\n```"
            "Do not include anything other than Python code blocks in your response. Do not change function names "
            "and input variable types in tasks."),
        "Test Analyst": (
            "You are a test analyst. You will be given a function signature and its docstring by the user. You need "
            "to provide problems in the current code or solution based on the test data and possible test feedback "
            "in the question. You need to provide additional special use cases, boundary conditions, etc. that "
            "should be paid attention to when writing code. You can point out any potential errors in the code.I "
            "hope your reply will be more concise. Preferably within fifty words. Don\u2019t list too many points."),
        "Bug Fixer": (
            "You are a bug fixer.You will be given a function signature and its docstring by the user. You need to "
            "provide modified and improved python code based on the current overall code design, algorithm "
            "framework, code implementation or test problems. Write your full implementation (restate the function "
            "signature). Use a Python code block to write your response. For example:\n```python\nprint('Hello "
            "world!')\n```Do not include anything other than Python code blocks in your response Do not change "
            "function names and input variable types in tasks"),
    },
}

# `get_decision_constraint` (the synthesizer's system prompt, and the decision node's after its role).
DECISION_CONSTRAINT: Mapping[str, str] = {
    "math": ("You will be given a math problem, analysis and code from other agents. "
             "Let's analyze step by step and synthesize the best answer. "
             "Please find the most reliable answer based on the analysis and results of other agents. "
             "Give reasons for making decisions. "
             "The last line of your output contains only the final result without any units, for example: "
             "The answer is 140" + NO_DRAWING_INSTRUCTION),
    "mmlu_redux": ("\n        I will ask you a question.\n"
                   "        I will also give you 4 answers enumerated as A, B, C and D.\n"
                   "        Only one answer out of the offered 4 is correct.\n"
                   "        You must choose the correct answer to the question.\n"
                   "        Your response must be one of the 4 letters: A, B, C or D,\n"
                   "        corresponding to the correct answer.\n"
                   "        I will give you some other people's answers and analysis.\n"
                   "        Let's analyze step by step and synthesize the best answer.\n"
                   "        Your reply must only contain one letter and cannot have any other characters.\n"
                   "        For example, your reply can be A.\n        "),
    "humaneval_plus": ("You will be given a function signature and its docstring by the user."
                       "You may be given the overall code design, algorithm framework, code implementation or test "
                       "problems.Let's analyze step by step and synthesize the best answer. "
                       "Write your full implementation (restate the function signature). "
                       "If the prompt given to you contains code that passed internal testing, you can choose the most "
                       "reliable reply.If there is no code that has passed internal testing in the prompt, you can "
                       "change it yourself according to the prompt.Use a Python code block to write your response. "
                       "For example:\n```python\nprint('Hello world!')\n```"
                       "Do not include anything other than Python code blocks in your response"),
}
# FinalMultiAgentAggregator `_get_constraint`: HumanEval's Programming Expert aggregator has its own system prompt.
AGGREGATOR_SYSTEM_OVERRIDE: Mapping[tuple[str, str], str] = {
    ("humaneval_plus", "Programming Expert"): "You are a programming expert. Output only Python code in a code block.",
}
# `get_decision_role`. gsm8k's returns its first sentence only (the second string is a separate statement
# after the return), so the decision system prompt there reads "You are the top decision-maker..\n ...".
DECISION_ROLE: Mapping[str, str] = {
    "math": "You are the top decision-maker.",
    "mmlu_redux": ("You are the top decision-maker and are good at analyzing and summarizing other people's "
                   "opinions, finding errors and giving final answers."),
    "humaneval_plus": ("You are the top decision-maker and are good at analyzing and summarizing other people's "
                       "opinions, finding errors and giving final answers. And you are an AI that only responds with "
                       "only python code."),
}
# `get_decision_few_shot` (mmlu: "").
DECISION_FEW_SHOT: Mapping[str, str] = {
    "math": (
        "\nQ:Josh decides to try flipping a house.  He buys a house for $80,000 and then puts in $50,000 in repairs.  "
        "This increased the value of the house by 150%.  How much profit did he make?\n\n"
        "A:After reviewing the analysis and results provided by the other agents, it appears that there is a "
        "discrepancy in the interpretation of the problem. The key point of contention is the base value on which "
        "the 150% increase is calculated.\n\n"
        "Agents 623T, 8GTW, and 7R9w have calculated the 150% increase based on the total investment (purchase "
        "price + repair costs), which is $130,000. They have then added this increase to the total investment to "
        "find the new value of the house, and subsequently calculated the profit by subtracting the total "
        "investment from the new value of the house. This approach leads to a profit calculation of $195,000.\n\n"
        "Agent 3qfQ, however, has interpreted the problem differently. This agent suggests that the 150% increase "
        "should be calculated based on the initial purchase price only, not the total investment. Following this "
        "method, the increased value is calculated as $80,000 (initial purchase price) + ($80,000 * 1.5), which "
        "equals $200,000. The profit is then calculated by subtracting the total investment ($130,000) from this "
        "increased value, resulting in a profit of $70,000.\n\n"
        "The problem statement is ambiguous because it does not explicitly state whether the 150% increase is "
        "based on the initial purchase price alone or the total investment. However, the most common "
        "interpretation in real estate when referring to an increase in value due to repairs would be based on "
        "the initial purchase price, as the value increase is typically a reflection of the property's market "
        "value appreciation, not the sum of costs incurred.\n\n"
        "Therefore, based on the typical real estate valuation practice and the more common interpretation of such "
        "scenarios, Agent 3qfQ's approach seems to be the most reliable. The profit should be calculated based on "
        "the increased value from the initial purchase price, not the total investment.\n\n"
        "The final result, based on the most reliable interpretation, is a profit of $70,000.\n\n"
        "The answer is 70000\n"),
    "mmlu_redux": "",
}

_MMLU_ONE_LETTER = ("\nBased on your synthesis, provide your final answer.\n"
                    "The first line of your reply must contain only one letter (A, B, C, or D).\n")
_MATH_END = "\nYour final answer must end with: The answer is [number]\n"
# MULTI_AGENT_AGGREGATION_PROMPTS of prompt/mmlu_prompt_set.py and prompt/gsm8k_prompt_set.py.
AGGREGATION_PROMPTS: Mapping[str, Mapping[str, str]] = {
    "math": {
        "Math Solver": ("--- Your Task ---\nAnalyze all step-by-step solutions above and provide the best final answer:\n"
                        "1. Check mathematical correctness of each step in each solution\n"
                        "2. Identify the most reliable reasoning process\n"
                        "3. If solutions disagree, determine which one is correct and explain why\n" + _MATH_END),
        "Mathematical Analyst": ("--- Your Task ---\nAnalyze all abstract mathematical analyses above and provide the "
                                 "best final answer:\n"
                                 "1. Check if the variable representations correctly model the problem\n"
                                 "2. Verify the substitution and calculation steps\n"
                                 "3. If analyses disagree, determine the correct approach\n" + _MATH_END),
        "Inspector": ("--- Your Task ---\nAnalyze all verification results above and provide the best final answer:\n"
                      "1. Consider each inspector's findings about correctness\n"
                      "2. Synthesize the verification insights\n"
                      "3. Determine the most reliable final answer\n" + _MATH_END),
    },
    "mmlu_redux": {
        "Knowlegable Expert": ("--- Your Task ---\nSynthesize all expert analyses above and provide the best combined "
                               "analysis:\n1. Identify key concepts and entities mentioned across analyses\n"
                               "2. Check factual accuracy of each analysis\n"
                               "3. Combine the strongest reasoning points into a coherent analysis\n" + _MMLU_ONE_LETTER),
        "Critic": ("--- Your Task ---\nSynthesize all critiques above:\n"
                   "1. Evaluate the validity of each critique's points\n"
                   "2. Identify the strongest counter-arguments\n"
                   "3. Determine which answer best survives critical scrutiny\n" + _MMLU_ONE_LETTER),
        "Mathematician": ("--- Your Task ---\nSynthesize all mathematical analyses above:\n"
                          "1. Check mathematical correctness of each reasoning\n"
                          "2. Verify calculations and logical steps\n"
                          "3. Combine the strongest mathematical arguments\n" + _MMLU_ONE_LETTER),
        "Psychologist": ("--- Your Task ---\nSynthesize all psychological perspectives above:\n"
                         "1. Consider cognitive and behavioral factors mentioned\n"
                         "2. Evaluate the scientific validity of each analysis\n"
                         "3. Combine insights into a coherent psychological perspective\n" + _MMLU_ONE_LETTER),
        "Historian": ("--- Your Task ---\nSynthesize all historical analyses above:\n"
                      "1. Check historical accuracy and context\n"
                      "2. Evaluate the evidence and reasoning\n"
                      "3. Combine the strongest historical insights\n" + _MMLU_ONE_LETTER),
        "Doctor": ("--- Your Task ---\nSynthesize all medical/health perspectives above:\n"
                   "1. Check medical accuracy of each analysis\n"
                   "2. Consider relevant biological and health factors\n"
                   "3. Combine the strongest medical insights\n" + _MMLU_ONE_LETTER),
        "Lawyer": ("--- Your Task ---\nSynthesize all legal analyses above:\n"
                   "1. Check legal accuracy and reasoning\n"
                   "2. Consider relevant laws, precedents, and principles\n"
                   "3. Combine the strongest legal arguments\n" + _MMLU_ONE_LETTER),
        "Economist": ("--- Your Task ---\nSynthesize all economic analyses above:\n"
                      "1. Check economic reasoning and principles\n"
                      "2. Consider market dynamics and financial factors\n"
                      "3. Combine the strongest economic insights\n" + _MMLU_ONE_LETTER),
    },
    "humaneval_plus": {
        "Project Manager": ("--- Your Task ---\nSynthesize all design recommendations above:\n"
                            "1. Evaluate each design suggestion for clarity and maintainability\n"
                            "2. Identify the best practices mentioned\n"
                            "3. Provide consolidated design guidance\n\n"
                            "Summarize the optimal code structure in 50 words or less.\n"),
        "Algorithm Designer": ("--- Your Task ---\nSynthesize all algorithm designs above:\n"
                               "1. Compare the algorithmic approaches\n"
                               "2. Identify the most efficient and correct algorithm\n"
                               "3. Provide the best algorithm description\n\n"
                               "Summarize the recommended algorithm design in 50 words or less. Include pseudocode if "
                               "helpful.\n"),
        "Programming Expert": ("--- Your Task ---\nAnalyze all Python code solutions above and provide the best final "
                               "code:\n1. Check if each code correctly implements the required function\n"
                               "2. Verify edge cases and error handling\n"
                               "3. If codes differ, determine the correct implementation\n\n"
                               "Output only the final correct Python code block:\n```python\n# Your synthesized "
                               "solution here\n```\n"),
        "Test Analyst": ("--- Your Task ---\nSynthesize all test analyses above:\n"
                         "1. Compile all identified edge cases and boundary conditions\n"
                         "2. Identify any missed test scenarios\n"
                         "3. Provide comprehensive testing guidance\n\n"
                         "Summarize the key test considerations in 50 words or less.\n"),
        "Bug Fixer": ("--- Your Task ---\nAnalyze all bug fixes above and provide the best corrected code:\n"
                      "1. Evaluate each proposed fix\n"
                      "2. Identify the root cause of bugs\n"
                      "3. Provide the most robust fix\n\n"
                      "Output only the final corrected Python code block:\n```python\n# Your fixed solution "
                      "here\n```\n"),
    },
}

# The benchmarks with a reference prompt set.
BENCHMARKS = tuple(WORKER_SYSTEM)


class PromptSetError(UserError, ValueError):
  """A reference prompt asked for a benchmark or role it does not have."""


def _check(benchmark: str, role: str | None = None) -> None:
  if benchmark not in WORKER_SYSTEM:
    raise PromptSetError(f"the reference prompt set covers {', '.join(BENCHMARKS)}, not {benchmark}")
  if role is not None and role not in WORKER_SYSTEM[benchmark]:
    raise PromptSetError(f"role {role!r} has no reference prompt on {benchmark}")


def node_id(role: str) -> str:
  """The reference's id of a role node: "mn_{Role_Name}_{graph id}"."""
  return f"mn_{role.replace(' ', '_')}_{GRAPH_ID}"


def enhanced_task(question: str, inputs: Sequence[roles_lib.AgentOutput]) -> str:
  """The task a role node's agents read: the query, then each predecessor's non-empty output
  (`_build_enhanced_task`; the reference joins its two parts with a newline, the second starts with one)."""
  blocks = [f"Agent {node_id(o.role)}, role is {o.role}, output is:\n{o.text}" for o in inputs if o.text]
  if not blocks:
    return question
  return question + "\n" + ("\nAt the same time, the outputs of other agents are as follows:\n\n"
                            + "\n\n".join(blocks))


def agent_messages(item: Item, role: str, inputs: Sequence[roles_lib.AgentOutput] = (), *, cot: bool = True
                   ) -> list[dict]:
  """A worker (or a node without workers). `cot` is the suite's setting; the reference's text has its own."""
  del cot
  _check(item.benchmark, role)
  task = enhanced_task(item.question, inputs)
  user = {"math": f"Q:{task}", "mmlu_redux": f"The task is: {task}\n",
          "humaneval_plus": f"The task is:\n\n{task}\n"}[item.benchmark]
  return [{"role": "system", "content": WORKER_SYSTEM[item.benchmark][role]}, {"role": "user", "content": user}]


def synthesizer_messages(item: Item, role: str, proposals: Sequence[str],
                         inputs: Sequence[roles_lib.AgentOutput] = ()) -> list[dict]:
  """The role's aggregator over its workers' outputs (`get_multi_agent_aggregation_prompt`)."""
  if not proposals:
    raise ValueError("a synthesizer needs at least one proposal; with none the node answers alone")
  _check(item.benchmark, role)
  task = enhanced_task(item.question, inputs)
  # (task header, what the workers provided, label of each output) per benchmark's prompt set.
  header, provided, label = {
      "math": ("Math Problem", "provided solutions", "Solution"),
      "mmlu_redux": ("Question", "provided analyses", "Analysis"),
      "humaneval_plus": ("Task", "written code solutions" if role in ("Programming Expert", "Bug Fixer")
                         else "provided analyses", "Solution"),
  }[item.benchmark]
  user = f"{header}:\n{task}\n\nMultiple {role}s have independently {provided}:\n\n"
  user += "".join(f"--- {label} {i} ---\n{p}\n\n" for i, p in enumerate(proposals, 1))
  user += AGGREGATION_PROMPTS[item.benchmark][role]
  system = AGGREGATOR_SYSTEM_OVERRIDE.get((item.benchmark, role), DECISION_CONSTRAINT[item.benchmark])
  return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def decision_messages(item: Item, outputs: Sequence[roles_lib.AgentOutput]) -> list[dict]:
  """The decision node (FinalRefer; FinalWriteCode on HumanEval) over every active role's output."""
  _check(item.benchmark)
  task = (item.question + "\n\nBased on the following agent outputs, provide the final answer:\n\n"
          + "\n\n".join(f"Agent {o.role} output:\n{o.text}" for o in outputs)
          + "\n\nIMPORTANT: End your response with 'The answer is [your_answer]'")
  system = f"{DECISION_ROLE[item.benchmark]}.\n {DECISION_CONSTRAINT[item.benchmark]}"
  if item.benchmark == "humaneval_plus":  # FinalWriteCode, with no spatial inputs
    user = (f"The task is:\n\n{task}.\n At the same time, the outputs and feedbacks of other agents are as "
            "follows:\n\n\n\n")
  else:  # FinalRefer
    user = (f"{DECISION_FEW_SHOT[item.benchmark]} The task is:\n\n {task}.\n At the same time, the output of other "
            "agents is as follows:\n\n")
  return [{"role": "system", "content": system}, {"role": "user", "content": user}]


REFERENCE_PROMPTS = roles_lib.PromptSet("reference", agent_messages, synthesizer_messages, decision_messages)
# `HieraMASConfig.prompt_set` -> the builders its runs send with.
PROMPT_SETS: Mapping[str, roles_lib.PromptSet] = {"suite": roles_lib.SUITE_PROMPTS, "reference": REFERENCE_PROMPTS}

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
"A. ..." lines; on MATH the problem). Node ids: the reference names a role node "mn_{Role_Name}_{id}" with a
4-character id drawn at random per graph instance; here the id is fixed (`GRAPH_ID`), so a request's text
depends only on the item and the configuration (and the response cache holds across runs).

HumanEval+ has no reference prompt set here: its reference agents (`agents/code_writing.py` CodeWriting,
FinalWriteCode) run the docstring examples on predecessors' code and may return a predecessor's code
without any call, which is behaviour, not a prompt (docs/reference-differences.md).
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
}
# `get_decision_role`. gsm8k's returns its first sentence only (the second string is a separate statement
# after the return), so the decision system prompt there reads "You are the top decision-maker..\n ...".
DECISION_ROLE: Mapping[str, str] = {
    "math": "You are the top decision-maker.",
    "mmlu_redux": ("You are the top decision-maker and are good at analyzing and summarizing other people's "
                   "opinions, finding errors and giving final answers."),
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
}

# The benchmarks with a reference prompt set (module docstring: not HumanEval+).
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
  user = f"Q:{task}" if item.benchmark == "math" else f"The task is: {task}\n"
  return [{"role": "system", "content": WORKER_SYSTEM[item.benchmark][role]}, {"role": "user", "content": user}]


def synthesizer_messages(item: Item, role: str, proposals: Sequence[str],
                         inputs: Sequence[roles_lib.AgentOutput] = ()) -> list[dict]:
  """The role's aggregator over its workers' outputs (`get_multi_agent_aggregation_prompt`)."""
  if not proposals:
    raise ValueError("a synthesizer needs at least one proposal; with none the node answers alone")
  _check(item.benchmark, role)
  task = enhanced_task(item.question, inputs)
  if item.benchmark == "math":
    user = f"Math Problem:\n{task}\n\nMultiple {role}s have independently provided solutions:\n\n"
    user += "".join(f"--- Solution {i} ---\n{p}\n\n" for i, p in enumerate(proposals, 1))
  else:
    user = f"Question:\n{task}\n\nMultiple {role}s have independently provided analyses:\n\n"
    user += "".join(f"--- Analysis {i} ---\n{p}\n\n" for i, p in enumerate(proposals, 1))
  user += AGGREGATION_PROMPTS[item.benchmark][role]
  return [{"role": "system", "content": DECISION_CONSTRAINT[item.benchmark]}, {"role": "user", "content": user}]


def decision_messages(item: Item, outputs: Sequence[roles_lib.AgentOutput]) -> list[dict]:
  """The decision node (FinalRefer) over every active role's output."""
  _check(item.benchmark)
  task = (item.question + "\n\nBased on the following agent outputs, provide the final answer:\n\n"
          + "\n\n".join(f"Agent {o.role} output:\n{o.text}" for o in outputs)
          + "\n\nIMPORTANT: End your response with 'The answer is [your_answer]'")
  system = f"{DECISION_ROLE[item.benchmark]}.\n {DECISION_CONSTRAINT[item.benchmark]}"
  user = (f"{DECISION_FEW_SHOT[item.benchmark]} The task is:\n\n {task}.\n At the same time, the output of other "
          "agents is as follows:\n\n")
  return [{"role": "system", "content": system}, {"role": "user", "content": user}]


REFERENCE_PROMPTS = roles_lib.PromptSet("reference", agent_messages, synthesizer_messages, decision_messages)
# `HieraMASConfig.prompt_set` -> the builders its runs send with.
PROMPT_SETS: Mapping[str, roles_lib.PromptSet] = {"suite": roles_lib.SUITE_PROMPTS, "reference": REFERENCE_PROMPTS}

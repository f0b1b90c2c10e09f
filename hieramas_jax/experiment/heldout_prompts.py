"""A held-out prompt suite for the simulated pool: prompts written from other public codebases, sent through the
official `openai` client to the served sim, each judged against what published evidence predicts (issue 28,
item 4).

Why: the sim is calibrated through the suite's own prompts; a researcher brings their own. Each prompt below
is quoted from a public repository's code (repository and file named; `{question}`, `{options}` filled from
the item), none is this suite's template (`mas/roles.py`), and none was used to choose the sim's reading
(`sim/intent.py` exemplars are single sentences; these are whole templates, and the CoT ones use wordings
the exemplars do not). Kinds and their stated bounds (points; SE = the binomial standard error of the
prompt's accuracy on its items):

- `cot` (asks to reason, no candidates): the model's published CoT row (HieraMAS Table 1) +- (4 + 2 SE);
- `direct` (asks for the answer only, or nothing): the published Base row +- (4 + 2 SE);
- `aggregate`, `decision` (a reader over three CoT proposals of the same model): the best proposer on the
  same items, from -4 - 2 SE (a reader as strong as its proposers: MoA T8 and Self-MoA land between -2 and
  +4 of the best member, COLLABORATION.md families 1-2) to +4 + 2 SE;
- `debate` (Du et al.'s round 2: its own answer in an assistant turn and two others'): no more than 2 SE
  below a single CoT call (Du et al. 2023: +7 to +15 over a single pass on older models);
- `critique` (intrinsic self-revision of its own answer, no external feedback): from -8 - 2 SE (Huang et
  al. 2024: GPT-4 -6.5, GPT-4-Turbo -1.5) to +2 + 2 SE of its own first answer.

Tokens: every reasoning kind must bill at least 1.3x the mean completion tokens of the same items' `direct`
prompts of that benchmark (reasoning is paid for), and every `direct` prompt at most 1.3x the plain Base
prompt's.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import statistics
from typing import Any, Callable, Sequence

from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import LETTERS, Item, load_items
from hieramas_jax.sim.calibration_targets import PAPER_BASE, PAPER_COT

Messages = list[dict]

SE_MULTIPLIER = 2.0
COT_TOLERANCE = 4.0  # points: the five-wordings criterion of issue 28
SYNTHESIS_RANGE = (-4.0, 4.0)  # vs the best proposer: MoA T8 / Self-MoA, readers as strong as the members
REVISION_RANGE = (-8.0, 2.0)  # vs the own first answer: Huang et al. 2024 (GPT-4 -6.5, GPT-4-Turbo -1.5)
TOKEN_RATIO = 1.3


def _options_lines(item: Item, fmt: str = "{l}. {c}") -> str:
  return "\n".join(fmt.format(l=l, c=c) for l, c in zip(LETTERS, item.meta["choices"]))


def _user(text: str, system: str | None = None) -> Messages:
  return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]


@dataclasses.dataclass(frozen=True)
class Prompt:
  """One held-out prompt. `build(item, proposals, own)` returns the messages; proposals and own are CoT replies of
  the model on the item (used by the reading kinds only)."""

  name: str
  benchmark: str
  kind: str
  source: str
  build: Callable[[Item, Sequence[str], str], Messages]


def _q(item: Item) -> str:
  return item.meta["stem"] if item.benchmark == "mmlu_redux" else item.question


DU = "composable-models/llm_multiagent_debate"
MOA_SYSTEM = ("You have been provided with a set of responses from various open-source models to the latest user "
              "query. Your task is to synthesize these responses into a single, high-quality response. It is "
              "crucial to critically evaluate the information provided in these responses, recognizing that some "
              "of it may be biased or incorrect. Your response should not simply replicate the given answers but "
              "should offer a refined, accurate, and comprehensive reply to the instruction. Ensure your response "
              "is well-structured, coherent, and adheres to the highest standards of accuracy and reliability.\n\n"
              "Responses from models:")


def _moa(item: Item, props: Sequence[str], user: str) -> Messages:
  system = MOA_SYSTEM + "".join(f"\n{i + 1}. {p}" for i, p in enumerate(props))
  return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _du_round2(first: str, props: Sequence[str], own: str, tail: str) -> Messages:
  text = "These are the solutions to the problem from other agents: " + "".join(
      f"\n\n One agent solution: ```{p}```" for p in props[:2]) + tail
  return [{"role": "user", "content": first}, {"role": "assistant", "content": own},
          {"role": "user", "content": text}]


def _du_mmlu_question(item: Item) -> str:
  a, b, c, d = item.meta["choices"]
  return (f"Can you answer the following question as accurately as possible? {item.meta['stem']}: A) {a}, B) {b}, "
          f"C) {c}, D) {d} Explain your answer, putting the answer in the form (X) at the end of your response.")


def _du_gsm_question(item: Item) -> str:
  return (f"Can you solve the following math problem? {item.question} Explain your reasoning. Your final answer "
          f"should be a single numerical number, in the form \\boxed{{answer}}, at the end of your response. ")


def _mmlu_pro_cot(item: Item) -> str:
  subject = item.meta.get("subject", "").replace("_", " ")
  return (f"The following are multiple choice questions (with answers) about {subject}. Think step by step and then "
          f"finish your answer with \"the answer is (X)\" where X is the correct letter choice.\n\nQuestion: "
          f"{item.meta['stem']}\nOptions:\n{_options_lines(item)}\nAnswer: Let's think step by step.")


SIMPLE_EVALS_MATH = ("Solve the following math problem step by step. The last line of your response should be of the "
                     "form Answer: $ANSWER (without quotes) where $ANSWER is the answer to the problem.\n\n{q}\n\n"
                     "Remember to put your answer on its own line after \"Answer:\", and you do not need to use a "
                     "\\boxed command.")
SIMPLE_EVALS_MCQ = ("Answer the following multiple choice question. The last line of your response should be of the "
                    "following format: 'Answer: $LETTER' (without quotes) where LETTER is one of ABCD. Think step by "
                    "step before answering.\n\n{q}\n\n{o}")
AFLOW_SOLVE = ("You are a mathematical problem solver. Your task is to solve the given problem step by step, showing "
               "all your work. After solving the problem, provide the final numerical answer without any units or "
               "explanations. Make sure to:\n\n1. Break down the problem into clear steps.\n2. Show all "
               "calculations.\n3. Use proper mathematical notation.\n4. Double-check your work for accuracy.\n5. "
               "Provide only the final numerical answer at the end, with no additional text.\n\nSolve the following "
               "problem:\n\n{q}")
AFLOW_SOLVE_2 = ("Solve the given math problem step by step. Show your work and clearly state the final answer.\n\n1. "
                 "Read the problem carefully and identify the key information.\n2. Determine the appropriate "
                 "mathematical operations needed to solve the problem.\n3. Perform the calculations step by step, "
                 "showing your work.\n4. Clearly state the final answer, including the appropriate units if "
                 "applicable.\n5. Double-check your calculations for accuracy.\n\nProvide your solution below:\n{q}")
AFLOW_REVIEW = ("Review the given problem and solution. Verify the accuracy of the solution and make corrections if "
                "necessary. If the solution is correct, simply restate the final answer. If there are errors, provide "
                "the correct solution with explanations.\n\n1. Read the original problem and the provided solution.\n"
                "2. Check each step of the solution for accuracy.\n3. Verify that the final answer is correct and "
                "appropriate for the given problem.\n4. If there are any errors, provide the correct solution with "
                "clear explanations.\n5. If the solution is correct, restate the final answer.\n\nProvide your review "
                "and final answer below:\n\nProblem: {q}\n\nSolution: {s}")
CHARM_COT = ("The following are multiple choice questions. Think step by step and then finish your answer.\n\nTASK "
             "REQUIREMENTS:\n1. Provide your thought process for arriving at the answer.\n2. You MUST respond in the "
             "following format:\nREASON: <The justification for your answer>\nANSWER: <A/B/C/D>\n")
CHARM_DIRECT = ("Please select the correct answer from the options.\n\nTASK REQUIREMENTS:\n1. You MUST respond in the "
                "following format:\nANSWER: <A/B/C/D>")
COURSE_DIRECT = ("You are presented with a multiple-choice question on {s}.\n\nQUESTION:\n{q}\n\nANSWER OPTIONS:\n{o}\n\n"
                 "INSTRUCTIONS:\n- Provide your answer as a single letter in parentheses: (X)\n- Select only one "
                 "correct answer\n- Do not include explanations or additional text\n\nThe answer is:")
GDESIGNER_SOLVER = ("You are a math expert. You will be given a math problem and hints from other agents. Give your own "
                    "solving process step by step based on hints. The last line of your output contains only the final "
                    "result without any units, for example: The answer is 140\nYou will be given some examples you may "
                    "refer to.")
GDESIGNER_INSPECTOR = ("You are an Inspector. You will be given a math problem, analysis and code from other agents. "
                       "Check whether the logic/calculation of the problem solving and analysis process is correct(if "
                       "present). Check whether the code corresponds to the solution analysis(if present). Give your own "
                       "solving process step by step based on hints. The last line of your output contains only the "
                       "final result without any units, for example: The answer is 140\nYou will be given some examples "
                       "you may refer to.")
MMLU_PRO_DIRECT = ("Please read the following multiple-choice questions and provide the most likely correct answer based "
                   "on the options given.\n\nQuestion: {q}\nOptions:\n{o}\n\nCorrect Answer:")
GMAT_EXPLAIN = "Please explain the problem-solving steps and answer in a tone that a high school student can understand."

PROMPTS: tuple[Prompt, ...] = (
    # ---- cot, MATH
    Prompt("simple_evals_math", "math", "cot", "openai/simple-evals math_eval.py",
           lambda it, p, o: _user(SIMPLE_EVALS_MATH.format(q=it.question))),
    Prompt("qwen25_math_cot", "math", "cot", "QwenLM/Qwen2.5-Math evaluation/utils.py (qwen25-math-cot)",
           lambda it, p, o: _user(f"{it.question}\nPlease reason step by step, and put your final answer within "
                                  f"\\boxed{{}}.", system="Please reason step by step, and put your final answer "
                                                          "within \\boxed{}.")),
    Prompt("kojima_zero_shot_cot", "math", "cot", "kojima-takeshi188/zero_shot_cot main.py (cot_trigger_no 1)",
           lambda it, p, o: _user(f"Q: {it.question}\nA: Let's think step by step.")),
    Prompt("kojima_trigger_12", "math", "cot", "kojima-takeshi188/zero_shot_cot main.py (cot_trigger_no 12)",
           lambda it, p, o: _user(f"Q: {it.question}\nA: Let's solve this problem by splitting it into steps.")),
    Prompt("plan_and_solve", "math", "cot", "AGI-Edgerunners/Plan-and-Solve-Prompting prompt.py (prompt_201)",
           lambda it, p, o: _user(f"Q: {it.question}\nA: Let's first understand the problem and devise a plan to "
                                  f"solve the problem. Then, let's carry out the plan to solve the problem step by "
                                  f"step.")),
    Prompt("du_gsm_round1", "math", "cot", f"{DU} gsm/gen_gsm.py", lambda it, p, o: _user(_du_gsm_question(it))),
    Prompt("aflow_solve", "math", "cot", "geekan/MetaGPT metagpt/ext/aflow/scripts/optimized/GSM8K/workflows/"
           "round_2/prompt.py", lambda it, p, o: _user(AFLOW_SOLVE.format(q=it.question))),
    Prompt("aflow_solve_2", "math", "cot", "fucking-dog/MetaGPT examples/ags/w_action_node/optimized/Gsm8K/"
           "graphs_test_4omini_919_best_ds/round_3/prompt.py", lambda it, p, o: _user(AFLOW_SOLVE_2.format(q=it.question))),
    Prompt("gdesigner_math_solver", "math", "cot", "yanweiyue/GDesigner GDesigner/prompt/gsm8k_prompt_set.py",
           lambda it, p, o: _user(f"The task is: {it.question}", system=GDESIGNER_SOLVER)),
    Prompt("gmat_explanation", "math", "cot", "danyuchn/GMAT-prompt 01_basic_explanation.md",
           lambda it, p, o: _user(f"{it.question}\n\n{GMAT_EXPLAIN}")),
    # ---- cot, MMLU-Redux
    Prompt("simple_evals_mmlu", "mmlu_redux", "cot", "openai/simple-evals common.py",
           lambda it, p, o: _user(SIMPLE_EVALS_MCQ.format(q=it.meta["stem"], o=_options_lines(it, "{l}) {c}")))),
    Prompt("mmlu_pro_cot", "mmlu_redux", "cot", "TIGER-AI-Lab/MMLU-Pro cot_prompt_lib/initial_prompt.txt",
           lambda it, p, o: _user(_mmlu_pro_cot(it))),
    Prompt("du_mmlu_round1", "mmlu_redux", "cot", f"{DU} mmlu/gen_mmlu.py", lambda it, p, o: _user(_du_mmlu_question(it))),
    Prompt("charmbench_cot", "mmlu_redux", "cot", "Sandia7171717171/CharmBench prompt.py (SYSTEM_PROMPT_CoT)",
           lambda it, p, o: _user(f"Question: {it.meta['stem']}\nOptions: {_options_lines(it, '({l}) {c}')}",
                                  system=CHARM_COT)),
    # ---- direct
    Prompt("qwen25_math_direct", "math", "direct", "QwenLM/Qwen2.5-Math evaluation/utils.py (direct)",
           lambda it, p, o: _user(f"Question: {it.question}\nAnswer: ")),
    Prompt("kojima_zero_shot", "math", "direct", "kojima-takeshi188/zero_shot_cot main.py (zero_shot)",
           lambda it, p, o: _user(f"Q: {it.question}\nA: The answer (arabic numerals) is")),
    Prompt("charmbench_direct", "mmlu_redux", "direct", "Sandia7171717171/CharmBench prompt.py (SYSTEM_PROMPT_no_CoT)",
           lambda it, p, o: _user(f"Question: {it.meta['stem']}\nOptions: {_options_lines(it, '({l}) {c}')}",
                                  system=CHARM_DIRECT)),
    Prompt("course_project_direct", "mmlu_redux", "direct", "nedeadinside/course_project src/data/config.py",
           lambda it, p, o: _user(COURSE_DIRECT.format(s=it.meta.get("subject", "").replace("_", " "),
                                                      q=it.meta["stem"], o=_options_lines(it)))),
    Prompt("mmlu_pro_style_1", "mmlu_redux", "direct", "TIGER-AI-Lab/MMLU-Pro cot_prompt_lib/tested_24_prompt_styles.txt",
           lambda it, p, o: _user(MMLU_PRO_DIRECT.format(q=it.meta["stem"], o=_options_lines(it, "({l}) {c}")))),
    Prompt("gdesigner_one_letter", "mmlu_redux", "direct", "yanweiyue/GDesigner GDesigner/prompt/mmlu_prompt_set.py",
           lambda it, p, o: _user(f"{it.meta['stem']}\n{_options_lines(it)}\nYour reply must only contain one letter "
                                  f"and cannot have any other characters.")),
    # ---- aggregate / decision
    Prompt("moa_system_math", "math", "aggregate", "togethercomputer/MoA utils.py (inject_references_to_messages)",
           lambda it, p, o: _moa(it, p, it.question)),
    Prompt("moa_system_mmlu", "mmlu_redux", "aggregate", "togethercomputer/MoA utils.py (inject_references_to_messages)",
           lambda it, p, o: _moa(it, p, f"{it.meta['stem']}\n{_options_lines(it)}")),
    Prompt("gdesigner_inspector", "math", "decision", "yanweiyue/GDesigner GDesigner/prompt/gsm8k_prompt_set.py",
           lambda it, p, o: _user(f"The task is: {it.question}\n" + "".join(
               f"Agent {k} as a Math Solver provides the following info: {r}\n\n" for k, r in enumerate(p, 1)),
               system=GDESIGNER_INSPECTOR)),
    Prompt("gdesigner_solver_hints", "math", "decision", "yanweiyue/GDesigner GDesigner/prompt/gsm8k_prompt_set.py",
           lambda it, p, o: _user(f"The task is: {it.question}\n" + "".join(
               f"Agent {k} provides the following info: {r}\n\n" for k, r in enumerate(p, 1)),
               system=GDESIGNER_SOLVER)),
    # ---- debate
    Prompt("du_gsm_round2", "math", "debate", f"{DU} gsm/gen_gsm.py (construct_message)",
           lambda it, p, o: _du_round2(_du_gsm_question(it), p, o,
                                       "\n\n Using the solutions from other agents as additional information, can you "
                                       "provide your answer to the math problem? \n The original math problem is "
                                       f"{it.question}. Your final answer should be a single numerical number, in the "
                                       "form \\boxed{answer}, at the end of your response.")),
    Prompt("du_mmlu_round2", "mmlu_redux", "debate", f"{DU} mmlu/gen_mmlu.py (construct_message)",
           lambda it, p, o: _du_round2(_du_mmlu_question(it), p, o,
                                       "\n\n Using the reasoning from other agents as additional advice, can you give "
                                       "an updated answer? Examine your solution and that other agents step by step. "
                                       "Put your answer in the form (X) at the end of your response.")),
    # ---- critique (intrinsic self-revision)
    Prompt("du_gsm_reflect", "math", "critique", f"{DU} gsm/gen_gsm.py (construct_message, single agent)",
           lambda it, p, o: [{"role": "user", "content": _du_gsm_question(it)}, {"role": "assistant", "content": o},
                             {"role": "user", "content": "Can you double check that your answer is correct. Please "
                                                         "reiterate your answer, with your final answer a single "
                                                         "numerical number, in the form \\boxed{answer}."}]),
    Prompt("du_mmlu_reflect", "mmlu_redux", "critique", f"{DU} mmlu/gen_mmlu.py (construct_message, single agent)",
           lambda it, p, o: [{"role": "user", "content": _du_mmlu_question(it)}, {"role": "assistant", "content": o},
                             {"role": "user", "content": "Can you double check that your answer is correct. Put your "
                                                         "final answer in the form (X) at the end of your response."}]),
    Prompt("du_math_verify", "math", "critique", f"{DU} math/gen_math.py (construct_message, single agent)",
           lambda it, p, o: [{"role": "user", "content": f"{it.question} Make sure to state your answer at the end of "
                                                         "the response."}, {"role": "assistant", "content": o},
                             {"role": "user", "content": "Can you verify that your answer is correct. Please reiterate "
                                                         "your answer, making sure to state your answer at the end of "
                                                         "the response."}]),
    Prompt("aflow_review", "math", "critique", "fucking-dog/MetaGPT examples/ags/w_action_node/optimized/Gsm8K/"
           "graphs_test_4omini_919_best_ds/round_3/prompt.py (REVIEW_PROMPT)",
           lambda it, p, o: _user(AFLOW_REVIEW.format(q=it.question, s=o))),
)


def _se(p: float, n: int) -> float:
  return 100 * math.sqrt(max(p * (1 - p), 1e-4) / n)


def run_heldout_prompts(base_url: str, *, model: str = "gpt-5-mini", n_items: int = 60,
                        prompts: Sequence[Prompt] = PROMPTS) -> dict[str, Any]:
  """Sends every prompt over `n_items` items per benchmark through the official openai client; returns the
  per-prompt accuracy, mean completion tokens, bound and verdict."""
  import openai  # pylint: disable=import-outside-toplevel
  logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per request otherwise
  client = openai.OpenAI(base_url=base_url, api_key="sim-no-key", max_retries=3)

  def ask(messages: Messages, sample: int = 0) -> tuple[str, int]:
    resp = client.chat.completions.create(model=model, messages=messages, max_completion_tokens=8192, seed=sample)
    return resp.choices[0].message.content or "", resp.usage.completion_tokens

  items = {b: load_items(b)[:n_items] for b in {p.benchmark for p in prompts}}
  plain = {"math": "Please put your final answer within \\boxed{}.",
           "mmlu_redux": "End your response with 'The answer is (X)' where X is the letter of the correct option."}
  refs: dict[str, dict[str, Any]] = {}
  for bench, its in items.items():
    cot = [ask(_user(f"{it.question}\n\n{plain[bench]} Let's think step by step."), k) for it in its for k in range(3)]
    props = {it.id: [cot[3 * i + k][0] for k in range(3)] for i, it in enumerate(its)}
    per_proposer = [statistics.fmean(graders.grade(it, props[it.id][k]).correct for it in its) for k in range(3)]
    base = [ask(_user(f"{it.question}\n\n{plain[bench]}")) for it in its]
    refs[bench] = {"props": props, "best_proposer": 100 * max(per_proposer),
                   "own": 100 * per_proposer[0], "base_tokens": statistics.fmean(t for _, t in base)}
  rows = []
  for prompt in prompts:
    bench, its = prompt.benchmark, items[prompt.benchmark]
    replies = [ask(prompt.build(it, refs[bench]["props"][it.id], refs[bench]["props"][it.id][0])) for it in its]
    acc = statistics.fmean(graders.grade(it, text).correct for it, (text, _) in zip(its, replies))
    tokens = statistics.fmean(t for _, t in replies)
    rows.append({"name": prompt.name, "benchmark": bench, "kind": prompt.kind, "source": prompt.source,
                 "accuracy": round(100 * acc, 2), "se": round(_se(acc, len(its)), 2), "n": len(its),
                 "completion_tokens": round(tokens, 1)})
  direct_tokens = {b: statistics.fmean([r["completion_tokens"] for r in rows if r["benchmark"] == b
                                        and r["kind"] == "direct"] or [refs[b]["base_tokens"]]) for b in items}
  for r in rows:
    bench, slack = r["benchmark"], SE_MULTIPLIER * r["se"]
    if r["kind"] == "cot":
      lo, hi = PAPER_COT[model][bench] - COT_TOLERANCE - slack, PAPER_COT[model][bench] + COT_TOLERANCE + slack
    elif r["kind"] == "direct":
      lo, hi = PAPER_BASE[model][bench] - COT_TOLERANCE - slack, PAPER_BASE[model][bench] + COT_TOLERANCE + slack
    elif r["kind"] in ("aggregate", "decision"):
      best = refs[bench]["best_proposer"]
      lo, hi = best + SYNTHESIS_RANGE[0] - slack, best + SYNTHESIS_RANGE[1] + slack
    elif r["kind"] == "debate":
      lo, hi = PAPER_COT[model][bench] - slack, 100.0
    else:  # critique
      own = refs[bench]["own"]
      lo, hi = own + REVISION_RANGE[0] - slack, own + REVISION_RANGE[1] + slack
    if r["kind"] == "direct":
      tokens_ok = r["completion_tokens"] <= TOKEN_RATIO * refs[bench]["base_tokens"]
    else:
      tokens_ok = r["completion_tokens"] >= TOKEN_RATIO * direct_tokens[bench]
    r.update(bound=[round(lo, 2), round(hi, 2)], accuracy_ok=lo <= r["accuracy"] <= hi, tokens_ok=tokens_ok)
  return {"model": model, "n_items": n_items, "rows": rows,
          "references": {b: {k: v for k, v in ref.items() if k != "props"} for b, ref in refs.items()},
          "n_within": sum(r["accuracy_ok"] and r["tokens_ok"] for r in rows)}


def heldout_markdown(record: dict[str, Any], label: str) -> str:
  """The suite's table: one row per prompt, bound and verdicts."""
  lines = [f"# Held-out prompt suite ({label})", "",
           f"Model {record['model']}, {record['n_items']} items per benchmark, through the official openai client. "
           f"{record['n_within']} of {len(record['rows'])} prompts within their bounds "
           "(hieramas_jax/experiment/heldout_prompts.py states each bound and its source).", "",
           "| Prompt | Benchmark | Kind | Source | Accuracy % (±SE) | Bound | Tokens | Within |",
           "|---|---|---|---|---|---|---|---|"]
  for r in record["rows"]:
    ok = "yes" if r["accuracy_ok"] and r["tokens_ok"] else ("**NO** (tokens)" if r["accuracy_ok"] else "**NO**")
    lines.append(f"| {r['name']} | {r['benchmark']} | {r['kind']} | {r['source']} | {r['accuracy']:.1f} ± {r['se']:.1f} "
                 f"| {r['bound'][0]:.1f} – {r['bound'][1]:.1f} | {r['completion_tokens']:.0f} | {ok} |")
  return "\n".join(lines) + "\n"

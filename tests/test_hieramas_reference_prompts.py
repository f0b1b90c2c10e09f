"""HieraMAS's reference options: the reference code's prompts (`prompt_set`) and task metadata (`task_metadata`).

Expected strings are written out here from the reference files (tianyao-aka/HieraMAS: prompt/gsm8k_prompt_set.py,
prompt/mmlu_prompt_set.py, agents/*.py, graph/learnable_multi_node*.py, utils/task_cache.py,
model/embeddings.py), not read from the module under test, so a changed prompt fails here.
"""

from __future__ import annotations

import asyncio
import dataclasses

import jax
import numpy as np
import pytest

from hieramas_jax.benchmarks.data import Item
from hieramas_jax.learn import policy as policy_lib
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.cache import ResponseCache
from hieramas_jax.llm.endpoint import sim_endpoint
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.mas import roles
from hieramas_jax.mas.runtime import build_config, run_mas
from hieramas_jax.methods.hieramas import metadata, prompts, training
from hieramas_jax.methods.hieramas.config import HieraMASConfig, HieraMASConfigError
from hieramas_jax.methods.hieramas.method import HieraMAS
from hieramas_jax.methods.hieramas.rollout import Setup, run_rollout
from hieramas_jax.sim.server import SimConfig, start_sim_in_thread

MATH = Item(id="t/1", benchmark="math", question="What is 2+3?", answer="5")
MMLU = Item(id="t/2", benchmark="mmlu_redux", question="Pick one.\nA. x\nB. y\nC. z\nD. w", answer="B")


@dataclasses.dataclass
class Result:
  text: str
  prompt_tokens: int = 10
  completion_tokens: int = 5
  cost_usd: float = 1e-5
  latency_s: float = 0.0
  cached: bool = False
  finish_reason: str = "stop"


class FakeClient:
  """Answers every call with `<model>#<n>` (or `reply`), and keeps every request."""

  def __init__(self, reply: str | None = None):
    self.requests, self.reply = [], reply

  async def chat(self, model, messages, *, temperature, max_tokens, sample_index=0):
    self.requests.append({"model": model, "messages": messages, "max_tokens": max_tokens})
    return Result(self.reply if self.reply is not None else f"{model}#{len(self.requests)}")


def _run(item, specs, edges, prompt_set):
  client = FakeClient()
  config = build_config(specs, "gpt-5-mini", edges)
  trace = asyncio.run(run_mas(client, item, config, prompts=prompt_set))
  return {(c.node, c.position): [dict(m) for m in c.messages] for c in trace.calls}, trace


def _msgs(system: str, user: str) -> list[dict]:
  return [{"role": "system", "content": system}, {"role": "user", "content": user}]


MATH_SOLVER_SYSTEM = (
    "You are a math expert. You will be given a math problem and hints from other agents. Give your own solving "
    "process step by step based on hints. The last line of your output contains only the final result without any "
    "units, for example: The answer is 140\n\n\nIMPORTANT: Do NOT include any drawing code such as Asymptote [asy], "
    "TikZ, PSTricks, or similar diagram code in your response. Focus only on mathematical reasoning and calculations.")
GSM8K_DECISION = (
    "You will be given a math problem, analysis and code from other agents. Let's analyze step by step and synthesize "
    "the best answer. Please find the most reliable answer based on the analysis and results of other agents. Give "
    "reasons for making decisions. The last line of your output contains only the final result without any units, "
    "for example: The answer is 140\n\nIMPORTANT: Do NOT include any drawing code such as Asymptote [asy], TikZ, "
    "PSTricks, or similar diagram code in your response. Focus only on mathematical reasoning and calculations.")


def test_math_reference_prompts_as_sent_equal_the_reference_strings():
  sent, _ = _run(MATH, [("Mathematical Analyst", ["qwen3-8b", "llama-8b"], "gemma-3-27b"),
                        ("Math Solver", ["qwen3-8b"], "qwen3-80b")], [(0, 1)], prompts.REFERENCE_PROMPTS)
  # Worker of the second node: the gsm8k role text; "Q:" + the task with its predecessor's output.
  assert sent[(1, "proposer:0")] == _msgs(
      MATH_SOLVER_SYSTEM,
      "Q:What is 2+3?\n\nAt the same time, the outputs of other agents are as follows:\n\n"
                                  "Agent mn_Mathematical_Analyst_0000, role is Mathematical Analyst, output is:\n"
                                  "gemma-3-27b#3")
  # Aggregator of the first node: the decision constraint; the solutions, then the role's aggregation prompt.
  assert sent[(0, "synthesizer")] == _msgs(
      GSM8K_DECISION,
      "Math Problem:\nWhat is 2+3?\n\nMultiple Mathematical Analysts have independently "
                                  "provided solutions:\n\n--- Solution 1 ---\nqwen3-8b#1\n\n--- Solution 2 ---\n"
                                  "llama-8b#2\n\n--- Your Task ---\nAnalyze all abstract mathematical analyses above "
                                  "and provide the best final answer:\n1. Check if the variable representations "
                                  "correctly model the problem\n2. Verify the substitution and calculation steps\n3. If "
                                  "analyses disagree, determine the correct approach\n\nYour final answer must end "
                                  "with: The answer is [number]\n")
  # Decision (FinalRefer): "{role}.\n {constraint}"; the few-shot, then the task with every role's output.
  system, user = (m["content"] for m in sent[(-1, "decision")])
  assert system == "You are the top decision-maker..\n " + GSM8K_DECISION
  assert user.startswith("\nQ:Josh decides to try flipping a house.  He buys a house for $80,000 and then puts in "
                         "$50,000 in repairs.")
  assert user.endswith(
      "The answer is 70000\n The task is:\n\n What is 2+3?\n\nBased on the following agent outputs, provide the final "
      "answer:\n\nAgent Mathematical Analyst output:\ngemma-3-27b#3\n\nAgent Math Solver output:\nqwen3-80b#5\n\n"
      "IMPORTANT: End your response with 'The answer is [your_answer]'.\n At the same time, the output of other agents "
      "is as follows:\n\n")
  assert "Agent 3qfQ's approach seems to be the most reliable." in user and len(user) > 2400


def test_mmlu_reference_prompts_as_sent_equal_the_reference_strings():
  sent, _ = _run(MMLU, [("Critic", ["qwen3-8b"], "gemma-3-27b")], [], prompts.REFERENCE_PROMPTS)
  assert sent[(0, "proposer:0")] == _msgs(
      "\nYou are an excellent critic.\nPlease point out potential issues in other agent's analysis point by point.\n",
      "The task is: Pick one.\nA. x\nB. y\nC. z\nD. w\n")
  mmlu_decision = ("\n        I will ask you a question.\n        I will also give you 4 answers enumerated as A, B, C "
                   "and D.\n        Only one answer out of the offered 4 is correct.\n        You must choose the "
                   "correct answer to the question.\n        Your response must be one of the 4 letters: A, B, C or "
                   "D,\n        corresponding to the correct answer.\n        I will give you some other people's "
                   "answers and analysis.\n        Let's analyze step by step and synthesize the best answer.\n"
                   "        Your reply must only contain one letter and cannot have any other characters.\n        For "
                   "example, your reply can be A.\n        ")
  assert sent[(0, "synthesizer")] == _msgs(
      mmlu_decision,
      "Question:\nPick one.\nA. x\nB. y\nC. z\nD. w\n\nMultiple Critics have independently "
                                  "provided analyses:\n\n--- Analysis 1 ---\nqwen3-8b#1\n\n--- Your Task ---\n"
                                  "Synthesize all critiques above:\n1. Evaluate the validity of each critique's points\n"
                                  "2. Identify the strongest counter-arguments\n3. Determine which answer best survives "
                                  "critical scrutiny\n\nBased on your synthesis, provide your final answer.\nThe first "
                                  "line of your reply must contain only one letter (A, B, C, or D).\n")
  assert sent[(-1, "decision")] == _msgs(
      ("You are the top decision-maker and are good at analyzing and summarizing other "
                                    "people's opinions, finding errors and giving final answers..\n " + mmlu_decision),
      (" The task is:\n\n Pick one.\nA. x\nB. y\nC. z\nD. w\n\nBased on the following agent "
                                  "outputs, provide the final answer:\n\nAgent Critic output:\ngemma-3-27b#2\n\n"
                                  "IMPORTANT: End your response with 'The answer is [your_answer]'.\n At the same time, "
                                  "the output of other agents is as follows:\n\n"))


def test_the_default_prompt_set_sends_the_suites_requests_unchanged():
  """A default HieraMAS rollout sends exactly the suite's messages (mas/roles.py), as before the option."""
  cfg = HieraMASConfig(benchmark="math")
  assert cfg.prompt_set == "suite" and cfg.task_metadata is False
  setup = Setup.make("math", get_pool("gpt-5-mini"), 1, prompt_set=cfg.prompt_set)
  assert setup.prompts is roles.SUITE_PROMPTS and Setup.make("math", get_pool("gpt-5-mini"), 1) == setup
  client = FakeClient()
  choices = np.array([[0, 1], [2, 3], [1, 7]])
  adjacency = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]], bool)
  asyncio.run(run_rollout(client, setup, MATH, choices, adjacency, grade_nodes=False))
  sent = [r["messages"] for r in client.requests]
  first = roles.agent_messages(MATH, "Mathematical Analyst", ())
  assert sent[0] == first and "Let's think step by step." in first[1]["content"]
  assert sent[1] == roles.synthesizer_messages(MATH, "Mathematical Analyst", [f"{setup.models[0]}#1"])
  assert sent[-1][0]["content"] == roles.decision_system("math")
  assert all(r["model"] != "metadata" for r in client.requests) and len(sent) == 7  # 3 x (1 + 1) + decision
  assert "prompt_set" not in HieraMAS(cfg).describe() and "task_metadata" not in HieraMAS(cfg).describe()
  assert HieraMAS(dataclasses.replace(cfg, task_metadata=True)).describe()["task_metadata"] is True


def test_humaneval_reference_prompts_as_sent_equal_the_reference_strings():
  item = Item(id="t/6", benchmark="humaneval_plus", question='def f(x):\n    """Return x."""\n', answer="")
  sent, _ = _run(item, [("Test Analyst", ["qwen3-8b"], "gemma-3-27b"), ("Programming Expert", ["llama-8b"], "qwen3-80b")],
                 [(0, 1)], prompts.REFERENCE_PROMPTS)
  task = 'def f(x):\n    """Return x."""\n'
  assert sent[(1, "proposer:0")] == _msgs(
      "You are a programming expert. You will be given a function signature and its docstring by the user. You may be "
      "able to get the output results of other agents. They may have passed internal tests, but they may not be "
      "completely correct. Write your full implementation (restate the function signature). Use a Python code block "
      "to write your response. For example:\n```python\nprint('Hello world!')\n```Do not include anything other than "
      "Python code blocks in your response. Do not change function names and input variable types in tasks.",
      f"The task is:\n\n{task}\n\nAt the same time, the outputs of other agents are as follows:\n\nAgent "
      "mn_Test_Analyst_0000, role is Test Analyst, output is:\ngemma-3-27b#2\n")
  assert sent[(1, "synthesizer")] == _msgs(
      "You are a programming expert. Output only Python code in a code block.",
      f"Task:\n{task}\n\nAt the same time, the outputs of other agents are as follows:\n\nAgent mn_Test_Analyst_0000, "
      "role is Test Analyst, output is:\ngemma-3-27b#2\n\nMultiple Programming Experts have independently written "
      "code solutions:\n\n--- Solution 1 ---\nllama-8b#3\n\n--- Your Task ---\nAnalyze all Python code solutions "
      "above and provide the best final code:\n1. Check if each code correctly implements the required function\n"
      "2. Verify edge cases and error handling\n3. If codes differ, determine the correct implementation\n\nOutput "
      "only the final correct Python code block:\n```python\n# Your synthesized solution here\n```\n")
  system, user = (m["content"] for m in sent[(0, "synthesizer")])
  assert system.startswith("You will be given a function signature and its docstring by the user.You may be given")
  assert "Multiple Test Analysts have independently provided analyses:" in user
  assert user.endswith("Summarize the key test considerations in 50 words or less.\n")
  assert sent[(0, "proposer:0")][0]["content"].endswith("Preferably within fifty words. Don\u2019t list too many points.")
  system, user = (m["content"] for m in sent[(-1, "decision")])
  assert system.startswith("You are the top decision-maker and are good at analyzing and summarizing other people's "
                           "opinions, finding errors and giving final answers. And you are an AI that only responds "
                           "with only python code..\n You will be given a function signature")
  assert user == (f"The task is:\n\n{task}\n\nBased on the following agent outputs, provide the final answer:\n\n"
                  "Agent Test Analyst output:\ngemma-3-27b#2\n\nAgent Programming Expert output:\nqwen3-80b#4\n\n"
                  "IMPORTANT: End your response with 'The answer is [your_answer]'.\n At the same time, the outputs and "
                  "feedbacks of other agents are as follows:\n\n\n\n")


def test_an_unknown_prompt_set_is_refused():
  with pytest.raises(HieraMASConfigError, match="prompt_set"):
    HieraMASConfig(benchmark="math", prompt_set="gdesigner")


TASK_PROMPT_HEAD = ("Analyze this task and extract metadata in JSON format.\n\nTask:\n")
TASK_PROMPT_TAIL = (
    "\n\nReturn ONLY a JSON object with these fields:\n- type: one of [math, coding, analysis, explanation, reasoning, "
    "general]\n- difficulty: one of [easy, medium, hard]\n- domain: specific domain (e.g., algebra, python, physics)\n"
    "- description: one-sentence summary\n- key_skills: list of 2-4 required skills\n\nExample output:\n"
    '{"type": "math", "difficulty": "medium", "domain": "algebra", "description": "Solve a quadratic equation", '
    '"key_skills": ["algebraic manipulation", "equation solving"]}\n\nJSON output:')


def test_metadata_prompt_parse_fallback_and_text_are_the_references():
  long_task = "x" * 2000
  assert metadata.messages(long_task) == _msgs("You are a task analyzer. Output only valid JSON.",
                                               TASK_PROMPT_HEAD + "x" * 1500 + TASK_PROMPT_TAIL)
  good = ('```json\n{"type": "math", "difficulty": "easy", "domain": "arithmetic", "description": "Add two numbers.",'
          ' "key_skills": ["addition", "arithmetic"]}\n```')
  meta = metadata.parse(good)
  assert metadata.format_text(meta) == ("Task type: math. Difficulty: easy. Domain: arithmetic. Key skills: addition, "
                                        "arithmetic. Description: Add two numbers..")
  assert metadata.parse('{"type": "math"}') is None and metadata.parse("The answer is 5.") is None
  assert metadata.heuristic("Compute 2+3.") == {"type": "math", "difficulty": "easy", "domain": "math",
                                                "description": "Compute 2+3.",
                                                "key_skills": ["mathematical reasoning", "calculation",
                                                               "step-by-step solving"]}
  words = " ".join(["word"] * 60)
  assert metadata.heuristic(words)["type"] == "general" and metadata.heuristic(words)["difficulty"] == "medium"
  assert metadata.format_text({}) == "General task."


@pytest.fixture(scope="module")
def emb():
  setup = Setup.make("math", get_pool("gpt-5-mini"), 1)
  return training.Embeddings(setup, "all-MiniLM-L6-v2", task_metadata=True)


def test_metadata_calls_go_through_the_client_once_per_query_and_change_the_policy_input(emb):
  client = FakeClient(reply='{"type": "math", "difficulty": "hard", "domain": "number theory", '
                            '"description": "d", "key_skills": ["a", "b"]}')
  other = Item(id="t/3", benchmark="math", question="What is 7*6?", answer="42")
  records = asyncio.run(emb.fetch_metadata(client, [MATH, other, MATH]))
  assert len(client.requests) == 2 and {r["model"] for r in client.requests} == {"gpt-5-mini"}  # the setting's strong
  assert [r["max_tokens"] for r in client.requests] == [256, 256]
  assert [rec.position for rec in records] == ["metadata", "metadata"] and all(rec.cost_usd > 0 for rec in records)
  assert emb.metadata_text[MATH.id] == "Task type: math. Difficulty: hard. Domain: number theory. Key skills: a, b. " \
                                       "Description: d."
  assert emb.metadata_source[MATH.id] == "llm"
  asyncio.run(emb.fetch_metadata(client, [MATH, other]))
  assert len(client.requests) == 2  # fetched once per query and run
  # The embedding of that text enters the policy: other metadata, other logits; no metadata, no parameter for it.
  inputs = emb.item_inputs([MATH])
  net = policy_lib.PairMLPPolicy(hidden=16)
  params = policy_lib.init_params(jax.random.key(0), inputs, net)
  assert "slot_metadata" in params
  emb.metadata_text["t/4"] = metadata.format_text(metadata.heuristic(MATH.question))
  swapped = emb.policy_inputs(emb.query_role([MATH]), emb.encoder.encode([emb.metadata_text["t/4"]]))
  a = np.asarray(policy_lib.logits(params, inputs, net=net))
  b = np.asarray(policy_lib.logits(params, swapped, net=net))
  assert np.abs(a - b).max() > 1e-4
  np.testing.assert_array_equal(a, np.asarray(policy_lib.logits(params, emb.item_inputs([MATH]), net=net)))
  plain = policy_lib.init_params(jax.random.key(0), inputs._replace(metadata=None), net)
  assert set(plain) == set(params) - {"slot_metadata"}
  with pytest.raises(training.TrainingError, match="metadata"):
    emb.metadata([Item(id="never", benchmark="math", question="q", answer="1")])


def test_an_unparsable_metadata_answer_falls_back_to_the_references_heuristic(emb):
  client = FakeClient(reply="Here is a concise answer to your request.")
  item = Item(id="t/5", benchmark="math", question="Solve x + 1 = 2.", answer="1")
  asyncio.run(emb.fetch_metadata(client, [item]))
  assert emb.metadata_source[item.id] == "heuristic"
  assert emb.metadata_text[item.id] == ("Task type: math. Difficulty: easy. Domain: math. Key skills: mathematical "
                                        "reasoning, calculation, step-by-step solving. Description: Solve x + 1 = 2..")


@pytest.mark.slow
def test_the_metadata_call_is_paid_once_and_a_rerun_replays_it_from_the_cache(tmp_path):
  handle = start_sim_in_thread(SimConfig(seed=0))

  async def once():  # a run: its own cache handle, closed (committed) at the end, as a process would
    cache = ResponseCache(tmp_path)
    try:
      async with LLMClient(sim_endpoint(handle.base_url), cache=cache) as client:
        record, _, _ = await metadata.fetch(client, MATH, "gpt-5-mini")
        return record
    finally:
      cache.close()

  try:
    first, second = asyncio.run(once()), asyncio.run(once())
  finally:
    handle.close()
  assert not first.cached and second.cached and second.text == first.text
  assert first.cost_usd > 0 and second.cost_usd == first.cost_usd  # a replay is priced, not paid again

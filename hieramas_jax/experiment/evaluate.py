"""Evaluate one method on a list of items: all queries concurrently, each result persisted as it lands.

Every finished item is appended (and flushed) to `items.jsonl` in the run directory, so a run killed
at any point resumes by skipping the ids already there; together with the response cache, calls of
finished queries are never paid for twice. Results are graded by the real graders
(hieramas_jax.benchmarks.graders), never by a model.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import math
import os
import pathlib
from typing import Any, Callable, Iterable, Sequence

from tqdm.auto import tqdm

from hieramas_jax.aio import gather_or_cancel
from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import Item
from hieramas_jax.experiment.rundir import StateError, read_sealed_lines, sealed_line
from hieramas_jax.experiment.writers import MetricWriter
from hieramas_jax.methods.api import Method, RunContext

log = logging.getLogger(__name__)

ITEMS_FILE = "items.jsonl"
TRACES_FILE = "traces.jsonl"
PROMPTS_FILE = "prompts.jsonl"


def _prompt_key(content: str) -> str:
  return hashlib.sha256(content.encode("utf-8")).hexdigest()[:20]


class PromptStore:
  """Each distinct message content of a run directory's traces, written once to prompts.jsonl.

  A trace line names its calls' messages as `[role, key]` pairs: the system prompts and questions that
  every call repeats are stored once per run directory, not once per call.
  """

  def __init__(self, run_dir: pathlib.Path):
    path = run_dir / PROMPTS_FILE
    self.seen = set(read_prompts(run_dir))
    tail = b""
    if path.exists() and path.stat().st_size:
      with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        tail = f.read(1)
    self.f = open(path, "a", encoding="utf-8")
    if tail and tail != b"\n":  # a line torn by a kill: end it, so the next record starts clean
      self.f.write("\n")

  def refs(self, messages) -> list[list[str]]:
    out = []
    for m in messages:
      key = _prompt_key(m["content"])
      if key not in self.seen:
        self.f.write(json.dumps({"key": key, "content": m["content"]}) + "\n")
        self.seen.add(key)
      out.append([m["role"], key])
    return out

  def close(self) -> None:
    self.f.close()


def read_prompts(run_dir: str | os.PathLike) -> dict[str, str]:
  """key -> message content from a run directory's prompts.jsonl ({} when absent; torn lines skipped)."""
  path = pathlib.Path(run_dir) / PROMPTS_FILE
  out: dict[str, str] = {}
  if path.exists():
    for line in path.read_text(encoding="utf-8").splitlines():
      try:
        rec = json.loads(line)
      except json.JSONDecodeError:
        continue
      out[rec["key"]] = rec["content"]
  return out


def read_traces(run_dir: str | os.PathLike) -> dict[str, dict[str, Any]]:
  """item id -> its trace line from traces.jsonl, each call's `messages` resolved to {"role", "content"}
  dicts (None where the run predates recorded prompts, or a content is missing). Torn lines are skipped."""
  run_dir = pathlib.Path(run_dir)
  path = run_dir / TRACES_FILE
  if not path.exists():
    return {}
  prompts = read_prompts(run_dir)
  out = {}
  for line in path.read_text(encoding="utf-8").splitlines():
    try:
      rec = json.loads(line)
    except json.JSONDecodeError:
      continue
    for call in rec.get("calls", []):
      refs = call.get("messages")
      if not refs:
        call["messages"] = None
      else:
        resolved = [{"role": r, "content": prompts.get(k)} for r, k in refs]
        call["messages"] = None if any(m["content"] is None for m in resolved) else resolved
    out[rec["item_id"]] = rec
  return out


@dataclasses.dataclass(frozen=True)
class ItemResult:
  """One graded query.

  Attributes:
    item_id: the benchmark item.
    correct: the grader's verdict.
    extracted: what the grader read as the answer (None: none found).
    detail: the grader's reason.
    cost_usd / prompt_tokens / completion_tokens / n_calls / cached_calls: sums over the query's calls.
    trace: the trace summary (who was called, wall time, method extras such as votes).
  """

  item_id: str
  correct: bool
  extracted: str | None
  detail: str
  cost_usd: float
  prompt_tokens: int
  completion_tokens: int
  n_calls: int
  cached_calls: int
  trace: dict[str, Any]

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  @classmethod
  def from_json(cls, data: dict[str, Any]) -> "ItemResult":
    """Raises ValueError naming the field when a value has the wrong type (e.g. a string cost)."""
    for f in dataclasses.fields(cls):
      if f.name not in data:
        raise ValueError(f"no field {f.name!r}")
      want = _FIELD_TYPES[f.name]
      value = data[f.name]
      if not isinstance(value, want) or (isinstance(value, bool) and bool not in want):
        raise ValueError(f"field {f.name!r} is {type(value).__name__}, not {want[0].__name__}")
    return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls)})


_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "item_id": (str,), "correct": (bool,), "extracted": (str, type(None)), "detail": (str,),
    "cost_usd": (float, int), "prompt_tokens": (int,), "completion_tokens": (int,), "n_calls": (int,),
    "cached_calls": (int,), "trace": (dict,)}


def summarise(results: Sequence[ItemResult]) -> dict[str, Any]:
  """Accuracy (%), total cost and tokens of a set of results (the cost sum is order-free: fsum)."""
  n = len(results)
  n_correct = sum(r.correct for r in results)
  return {"n": n, "n_correct": n_correct, "accuracy": 100.0 * n_correct / n if n else float("nan"),
          "cost_usd": math.fsum(r.cost_usd for r in results),
          "prompt_tokens": sum(r.prompt_tokens for r in results),
          "completion_tokens": sum(r.completion_tokens for r in results),
          "n_calls": sum(r.n_calls for r in results),
          "cached_calls": sum(r.cached_calls for r in results),
          "truncated_calls": sum(int(r.trace.get("truncated_calls", 0)) for r in results),
          "usage_by_model": usage_by_model(results)}


def usage_by_model(results: Sequence[ItemResult]) -> dict[str, list[int]]:
  """model -> [calls, prompt tokens, completion tokens] over the results' traces (what a dry run
  reprices at another endpoint's prices)."""
  usage: dict[str, list[int]] = {}
  for r in results:
    for model, row in (r.trace.get("usage_by_model") or {}).items():
      usage[model] = [a + b for a, b in zip(usage.get(model, [0, 0, 0]), row)]
  return dict(sorted(usage.items()))


def load_done(run_dir: str | os.PathLike) -> dict[str, ItemResult]:
  """Results already in a run directory's items.jsonl, each checked (checksum and field types).

  A line torn by a kill mid-write can only be the last one; it is dropped (said once) and the file
  rewritten without it. Anything else wrong (a torn middle line, an edited record, a wrong type) is
  a StateError naming the file: a damaged result is never replayed into a table.

  Raises:
    StateError: items.jsonl is damaged or was edited.
  """
  path = pathlib.Path(run_dir) / ITEMS_FILE
  if not path.exists():
    return {}
  fix = f"delete {path} (its cell then reruns; cached calls cost nothing)"
  records, torn = read_sealed_lines(path, fix)
  if torn:
    log.warning("%s: dropped the torn last line left by an interrupted run", path)
  done: dict[str, ItemResult] = {}
  for record in records:
    try:
      result = ItemResult.from_json(record)
    except ValueError as e:
      raise StateError(f"{path}: a record for {record.get('item_id')!r} is malformed ({e}); {fix}") from None
    done[result.item_id] = result
  return done


async def evaluate(method: Method, items: Sequence[Item], ctx: RunContext, *,
                   run_dir: str | os.PathLike | None = None, bound: int | asyncio.Semaphore = 32,
                   writers: Iterable[MetricWriter] = (), progress: bool = True, desc: str | None = None,
                   save_traces: bool = True, report: Callable[[int, ItemResult], None] | None = None) -> list[ItemResult]:
  """Solve and grade every item; returns results in the order of `items`.

  Args:
    method: any registered method.
    items: the queries (ids must be unique).
    ctx: client, pool, seed, settings.
    run_dir: where items.jsonl (and traces.jsonl) live; items already there are skipped. None: no
      persistence (tests).
    bound: most queries in flight at once, or a semaphore shared with other evaluations so that
      several cells of a table share one global bound.
    writers: metric writers; each finished item logs running accuracy and cost.
    progress: show a tqdm bar.
    desc: the progress bar's label.
    report: called with the number of items done and the result after each one finishes (the table's live
      display, the cell's W&B run).
    save_traces: also append each full trace (every call's text and messages, the gold answer) to
      traces.jsonl, the messages' contents once each to prompts.jsonl (`read_traces` joins them).

  Raises:
    Whatever a query raises once its retries are exhausted (LLMError...). Items finished before
    the failure are already on disk; rerun to resume.
  """
  ids = [it.id for it in items]
  if len(set(ids)) != len(ids):
    raise ValueError("evaluate: item ids must be unique")
  writers = list(writers)
  done: dict[str, ItemResult] = {}
  items_f = traces_f = prompts = None
  if run_dir is not None:
    run_dir = pathlib.Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    wanted = set(ids)
    done = {k: v for k, v in load_done(run_dir).items() if k in wanted}
    items_f = open(run_dir / ITEMS_FILE, "a", encoding="utf-8")
    if save_traces:
      traces_f = open(run_dir / TRACES_FILE, "a", encoding="utf-8")
      prompts = PromptStore(run_dir)
  sem = asyncio.Semaphore(bound) if isinstance(bound, int) else bound
  todo = [it for it in items if it.id not in done]
  finished: list[ItemResult] = list(done.values())
  bar = tqdm(total=len(items), initial=len(done), desc=desc or method.name, disable=not progress,
             dynamic_ncols=True, leave=False)

  async def one(item: Item) -> ItemResult:
    async with sem:
      trace = await method.solve(ctx, item)
    grade = await graders.grade_async(item, trace.final_text)
    result = ItemResult(item_id=item.id, correct=bool(grade.correct), extracted=grade.extracted,
                        detail=grade.detail, cost_usd=trace.cost_usd, prompt_tokens=trace.prompt_tokens,
                        completion_tokens=trace.completion_tokens, n_calls=trace.n_calls,
                        cached_calls=sum(c.cached for c in trace.calls), trace=trace.summary())
    # Runs in the event loop thread between awaits: lines never interleave.
    if traces_f is not None:
      record = {"item_id": item.id, "correct": result.correct, "target": item.answer, **trace.to_json()}
      for call in record["calls"]:
        call["messages"] = prompts.refs(call["messages"])
      prompts.f.flush()  # before the trace line that names them
      traces_f.write(json.dumps(record) + "\n")
      traces_f.flush()
    if items_f is not None:
      items_f.write(sealed_line(result.to_json()))
      items_f.flush()
    finished.append(result)
    bar.update(1)
    if report is not None:
      report(len(finished), result)
    if writers:
      running = summarise(finished)
      for w in writers:
        w.write_scalars(len(finished), {"accuracy": running["accuracy"], "cost_usd": running["cost_usd"],
                                        "item_correct": float(result.correct),
                                        "item_cost_usd": result.cost_usd})
    return result

  try:
    new = await gather_or_cancel([asyncio.ensure_future(one(it)) for it in todo])
  finally:
    bar.close()
    for f in (items_f, traces_f, prompts):
      if f is not None:
        f.close()
  by_id = {**done, **{r.item_id: r for r in new}}
  return [by_id[i] for i in ids]

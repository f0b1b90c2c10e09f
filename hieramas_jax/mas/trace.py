"""What one query cost and said: every LLM call's record, every node's output, the final text.

Costs and tokens are sums over this trace's own calls, never deltas of a global counter: the
reference code's global counter leaks cost between concurrent queries (docs/reference-differences.md).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Mapping

DECISION_NODE = -1  # `CallRecord.node` of the final decision call
NO_NODE = -2  # calls outside any MAS node (single-model baselines, self-consistency samples)


@dataclasses.dataclass(frozen=True)
class CallRecord:
  """One LLM call as the runtime saw it.

  Attributes:
    node: supernode index in the MASConfig, DECISION_NODE or NO_NODE.
    role: the node's role (None for single-model calls and the decision node).
    position: "proposer:<k>", "synthesizer", "solo" (a node with no proposers), "decision",
      "single" or "sample:<k>".
    model: short model name.
    text: the completion text.
    prompt_tokens / completion_tokens / cost_usd / latency_s / cached: from the client's CallResult.
    sample_index: the request's sample index (OpenAI `seed`).
    started_s / finished_s: seconds since the query started (monotonic clock); they prove the
      runtime's ordering and parallelism.
    finish_reason / reasoning_tokens: from the client's CallResult ("length": cut by max_tokens).
    raw_text: the completion as sent, when `text` (what was passed on) had its `<think>` blocks
      stripped by the client; "" otherwise (and then left out of the JSON).
    messages: the chat messages sent ({"role", "content"} dicts), for reading a sample back; not part of
      any cache key or result value.
  """

  node: int
  role: str | None
  position: str
  model: str
  text: str
  prompt_tokens: int
  completion_tokens: int
  cost_usd: float
  latency_s: float
  cached: bool
  sample_index: int = 0
  started_s: float = 0.0
  finished_s: float = 0.0
  finish_reason: str = ""
  reasoning_tokens: int = 0
  messages: tuple[dict[str, str], ...] = ()
  raw_text: str = ""

  def to_json(self) -> dict[str, Any]:
    out = dataclasses.asdict(self)
    if not out["raw_text"]:
      del out["raw_text"]
    return out


@dataclasses.dataclass
class Trace:
  """One query's run through a method.

  Attributes:
    item_id: the benchmark item.
    method: the method's registry name.
    final_text: the text that gets graded.
    calls: every LLM call, in a canonical order that does not depend on which finished first (the MAS
      runtimes sort them with `order_calls` once the query is done: nodes in topological order, a
      node's proposers before its synthesizer, the decision last).
    node_texts: supernode index -> that node's output (its synthesizer's text).
    extra: method-specific facts (the MAS config, votes...), JSON-serialisable.
  """

  item_id: str
  method: str
  final_text: str = ""
  calls: list[CallRecord] = dataclasses.field(default_factory=list)
  node_texts: dict[int, str] = dataclasses.field(default_factory=dict)
  extra: dict[str, Any] = dataclasses.field(default_factory=dict)

  def order_calls(self, rank: Callable[[CallRecord], tuple]) -> None:
    """Sorts `calls` by `rank` (stable): concurrent nodes finish in any order, and a trace that
    recorded them by arrival would differ between two runs of the same computation."""
    self.calls.sort(key=rank)

  @property
  def cost_usd(self) -> float:
    # math.fsum is correctly rounded, so the total does not depend on the calls' completion order
    # (a plain sum of floats does, in the last digit, and concurrent calls finish in any order).
    return math.fsum(c.cost_usd for c in self.calls)

  @property
  def prompt_tokens(self) -> int:
    return sum(c.prompt_tokens for c in self.calls)

  @property
  def completion_tokens(self) -> int:
    return sum(c.completion_tokens for c in self.calls)

  @property
  def n_calls(self) -> int:
    return len(self.calls)

  @property
  def wall_s(self) -> float:
    """From the first call's start to the last call's end."""
    if not self.calls:
      return 0.0
    return max(c.finished_s for c in self.calls) - min(c.started_s for c in self.calls)

  def summary(self) -> dict[str, Any]:
    """A small record for per-item logs: totals and who was called, without the texts."""
    return {"method": self.method, "n_calls": self.n_calls, "cost_usd": self.cost_usd,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "cached_calls": sum(c.cached for c in self.calls), "wall_s": round(self.wall_s, 4),
            "models": [c.model for c in self.calls],
            "truncated_calls": sum(c.finish_reason in ("length", "context_overflow") for c in self.calls),
            "usage_by_model": self.usage_by_model(), **self.extra}

  def usage_by_model(self) -> dict[str, list[int]]:
    """model -> [calls, prompt tokens, completion tokens]: what a dry run reprices at other prices."""
    usage: dict[str, list[int]] = {}
    for c in self.calls:
      row = usage.setdefault(c.model, [0, 0, 0])
      row[0] += 1
      row[1] += c.prompt_tokens
      row[2] += c.completion_tokens
    return dict(sorted(usage.items()))

  def to_json(self) -> dict[str, Any]:
    return {"item_id": self.item_id, "method": self.method, "final_text": self.final_text,
            "calls": [c.to_json() for c in self.calls],
            "node_texts": {str(k): v for k, v in self.node_texts.items()},
            "extra": self.extra, "cost_usd": self.cost_usd, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens}

  @classmethod
  def from_json(cls, data: Mapping[str, Any]) -> "Trace":
    return cls(item_id=data["item_id"], method=data["method"], final_text=data["final_text"],
               calls=[CallRecord(**{**c, "messages": tuple(c.get("messages") or ())}) for c in data["calls"]],
               node_texts={int(k): v for k, v in data.get("node_texts", {}).items()},
               extra=dict(data.get("extra", {})))

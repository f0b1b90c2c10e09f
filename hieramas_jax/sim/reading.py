"""How the simulated pool reads a request: which item, which role, which context.

Everything here works on the text of the messages only (principle 1 of SIMULATOR.md). The
phrasings it relies on are the shared prompt conventions (docs/simulator.md); when they are
absent the reading degrades to "no role", "no context" or "unknown item", never to an error.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Sequence

from hieramas_jax.benchmarks.data import BENCHMARKS, Item, load_items

# Word shingles of this many words identify an item; shorter items are matched as a whole.
SHINGLE_WORDS = 6
# Fraction of an item's shingles that must appear in the request for it to count as recognised.
MIN_COVERAGE = 0.6

_WS = re.compile(r"\s+")


def _words(text: str) -> list[str]:
  return text.lower().split()


def _shingles(words: Sequence[str], n: int) -> list[str]:
  return [" ".join(words[i:i + n]) for i in range(len(words) - n + 1)]


@dataclasses.dataclass(frozen=True)
class Recognised:
  item: Item
  coverage: float


class ItemIndex:
  """Maps word shingles of every benchmark question to the items that contain them.

  Built once at server start-up (about a second); a lookup costs one dict probe per word of the
  request per distinct short-item length, so the hot path never touches the files.
  """

  def __init__(self, benchmarks: Sequence[str] = BENCHMARKS):
    self.items: list[Item] = [it for b in benchmarks for it in load_items(b)]
    self._postings: dict[str, list[int]] = {}
    self._n_keys: list[int] = []
    self._short_lengths: set[int] = set()
    # Fast path: first shingle -> items starting with it, verified by a substring test.
    self._first: dict[str, list[int]] = {}
    self._normalised: list[str] = []
    for idx, item in enumerate(self.items):
      words = _words(item.question)
      self._normalised.append(" " + " ".join(words) + " ")
      if len(words) >= SHINGLE_WORDS:
        self._first.setdefault(" ".join(words[:SHINGLE_WORDS]), []).append(idx)
      if len(words) >= SHINGLE_WORDS:
        keys = set(_shingles(words, SHINGLE_WORDS))
      else:
        keys = {" ".join(words)}
        self._short_lengths.add(len(words))
      self._n_keys.append(len(keys))
      for k in keys:
        self._postings.setdefault(k, []).append(idx)

  @functools.lru_cache(maxsize=8192)  # ~2 KB per prompt text: ~16 MB at most
  def recognise(self, text: str) -> Recognised | None:
    """The item whose question appears (almost) verbatim in `text`, or None.

    Fast path: an item whose whole normalised question occurs in the text (the earliest, and the
    longest starting there, since a MATH problem can open an MMLU question). Otherwise a vote over word shingles
    tolerates small edits (coverage >= MIN_COVERAGE). Cached per text: the same question comes
    back in many requests (samples, models, roles).
    """
    words = _words(text)
    normalised = " " + " ".join(words) + " "
    for i in range(len(words) - SHINGLE_WORDS + 1):
      found = None
      for idx in self._first.get(" ".join(words[i:i + SHINGLE_WORDS]), ()):
        if (found is None or len(self._normalised[idx]) > len(self._normalised[found])) \
            and self._normalised[idx] in normalised:
          found = idx
      if found is not None:  # the earliest question in the text, the longest one starting there
        return Recognised(self.items[found], 1.0)
    hits: dict[int, int] = {}
    lengths = {SHINGLE_WORDS} | self._short_lengths
    seen: set[str] = set()
    for n in lengths:
      if n > len(words):
        continue
      for key in _shingles(words, n):
        if key in seen:
          continue
        seen.add(key)
        for idx in self._postings.get(key, ()):
          hits[idx] = hits.get(idx, 0) + 1
    # Highest coverage wins; among full matches the item with more shingles wins (a MATH problem
    # can sit verbatim inside an MMLU question); remaining ties go to the earlier item.
    best, best_score = None, (0.0, 0, 0)
    for idx, count in hits.items():
      score = (count / self._n_keys[idx], count, -idx)
      if score > best_score:
        best, best_score = idx, score
    best_cov = best_score[0]
    if best is None or best_cov < MIN_COVERAGE:
      return None
    return Recognised(self.items[best], best_cov)


# ---- request features ------------------------------------------------------------------------

_ROLE = re.compile(r"\bYou are an? ([A-Z][A-Za-z\-]*(?: [A-Z][A-Za-z\-]*){0,4})\s*[.,:]")
_SYNTH = re.compile(r"synthesi[sz]e these responses|provided with a set of responses", re.I)
_DECISION = re.compile(r"final decision maker", re.I)
_COT = re.compile(r"step[- ]by[- ]step", re.I)
# "### Response from Agent 2 (Math Solver):" / "### Proposal 1:" and close variants.
_BLOCK_HEADER = re.compile(
    r"^[ \t]*#{1,6}[ \t]*(?:Response from [^\n]*|Proposal[^\n]*|Agent \d+[^\n]*)$",
    re.I | re.M)

# Role name keywords -> the domain the role fits (SIMULATOR.md "role fit").
ROLE_DOMAIN_KEYWORDS = (
    ("code", ("program", "algorithm", "bug", "test analyst", "project manager", "coder",
              "software", "engineer", "developer")),
    ("math", ("math",)),
    ("knowledge", ("knowledgeable", "knowlegable", "expert", "historian", "doctor", "lawyer",
                   "economist", "psychologist", "scientist", "critic")),
)


def role_domain(role: str | None) -> str | None:
  """The domain a role name fits, or None for roles with no domain (e.g. Inspector)."""
  if not role:
    return None
  low = role.lower()
  for domain, keys in ROLE_DOMAIN_KEYWORDS:
    if any(k in low for k in keys):
      return domain
  return None


@dataclasses.dataclass(frozen=True)
class RequestView:
  """What the behaviour model needs to know about a request."""

  query_text: str           # user text before the first block of other agents' outputs
  role: str | None          # "Math Solver"; None for "a helpful assistant" or no system message
  kind: str                 # "single" | "peer" (has other agents' blocks) | "synth" | "decision"
  asks_step_by_step: bool
  context_blocks: tuple[str, ...]
  context_chars: int


def read_request(messages: Sequence[dict]) -> RequestView:
  """Splits the messages into the query, the role and other agents' blocks."""
  system = "\n".join(m["content"] for m in messages if m["role"] in ("system", "developer"))
  users = [m["content"] for m in messages if m["role"] == "user"]
  query_parts: list[str] = []
  blocks: list[str] = []
  for text in users:
    heads = list(_BLOCK_HEADER.finditer(text))
    if not heads:
      query_parts.append(text)
      continue
    query_parts.append(text[:heads[0].start()])
    for h, nxt in zip(heads, heads[1:] + [None]):
      blocks.append(text[h.end(): nxt.start() if nxt else len(text)])
  role_match = _ROLE.search(system)
  role = role_match.group(1) if role_match else None
  if _SYNTH.search(system):
    kind = "synth"
  elif _DECISION.search(system):
    kind = "decision"
  elif blocks:
    kind = "peer"
  else:
    kind = "single"
  query_text = "\n".join(query_parts)
  return RequestView(
      query_text=query_text,
      role=role,
      kind=kind,
      # Only the caller's own text counts: other agents' replies may say "step by step" too.
      asks_step_by_step=bool(_COT.search(query_text)),
      context_blocks=tuple(blocks),
      context_chars=sum(len(b) for b in blocks),
  )


# ---- answers found in other agents' blocks ---------------------------------------------------

_MMLU_ANSWER = re.compile(r"answer is:?\s*\(?\s*([A-D])\s*\)?", re.I)
_CODE_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)


def mmlu_vote(text: str) -> str | None:
  found = _MMLU_ANSWER.findall(text)
  return found[-1].upper() if found else None


def last_boxed(text: str) -> str | None:
  """Content of the last \\boxed{...} (brace-matched), or None."""
  start = text.rfind("\\boxed")
  if start < 0:
    return None
  i = text.find("{", start)
  if i < 0:
    return None
  depth, j = 0, i
  while j < len(text):
    if text[j] == "{":
      depth += 1
    elif text[j] == "}":
      depth -= 1
      if depth == 0:
        return text[i + 1:j]
    j += 1
  return None


_MATH_NOISE = re.compile(r"\\left|\\right|\\!|\\,|\\;|\\ |\s|\$")


def math_key(answer: str) -> str:
  """Loose normal form of a MATH answer, used only to group identical votes."""
  s = _MATH_NOISE.sub("", answer)
  s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").rstrip(".")
  return s


def code_block(text: str) -> str | None:
  blocks = _CODE_BLOCK.findall(text)
  return blocks[-1] if blocks else None


def code_key(code: str) -> str:
  """Normal form of code for recognising the same program: no comments, no blank lines."""
  lines = []
  for line in code.splitlines():
    stripped = line.split("#", 1)[0].rstrip() if "#" in line and "'" not in line and '"' not in line \
        else line.rstrip()
    if stripped.strip():
      lines.append(stripped)
  return "\n".join(lines)

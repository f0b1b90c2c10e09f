"""How the simulated pool reads a request: which item, which lettering, whether to reason, which candidates.

Everything here works on the text of the messages only (principle 1 of docs/simulator.md), and on no
wording of the suite's own: the question is found wherever it sits, other agents' answers are
read wherever they sit and under whatever header (or none), and whether the model reasons follows
what the request asks for (candidates to weigh, or an ordinary request to reason), not its
wording. When something is absent the reading degrades to "unknown item", "no candidates" or
"no request to reason", never to an error.

- **Item**: the whole normalised question (lower case, whitespace collapsed) must occur in the
  prompt. A question edited beyond that (a number changed, a word swapped) is not the item. For
  multiple choice the stem is matched, then the options are read from the prompt and matched to
  the item's options as a set, so a permuted prompt is recognised with its own lettering.
- **Candidates**: every answer statement outside the question itself, in user and assistant
  turns: MMLU "the answer is (X)" and its common variants, MATH the last ``\\boxed{}`` of each
  statement, HumanEval+ each fenced code block that is more than the question's own prompt.
- **Reasoning**: candidates in the prompt ask for an evaluation whatever the wording; without
  them, a generic request to reason (`ASKS_TO_REASON`), read from the system and user text with the
  question's own text removed (a MATH problem that says "Explain ..." asks nothing of the model).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Sequence

from hieramas_jax.benchmarks.data import BENCHMARKS, LETTERS, Item, load_items

# Items are indexed by their first KEY_WORDS normalised words (shorter questions by all of them).
KEY_WORDS = 6


def normalise(text: str) -> str:
  """Lower case, whitespace collapsed: the only edits under which a question stays itself."""
  return " ".join(text.lower().split())


def _recognition_text(item: Item) -> str:
  """What must occur verbatim (after normalisation): the stem for multiple choice, else the question."""
  return item.meta["stem"] if item.benchmark == "mmlu_redux" else item.question


@dataclasses.dataclass(frozen=True)
class Recognised:
  """An item found in a prompt.

  Attributes:
    item: the benchmark item.
    letters: for multiple choice, letters[k] is the letter under which the item's option k is
      shown in this prompt (the identity "ABCD" when the prompt keeps the file's order or shows no
      options); empty for other benchmarks.
  """

  item: Item
  letters: str = ""
  shown: bool = dataclasses.field(default=False, compare=False)

  def letter_of(self, option: int) -> str:
    return self.letters[option]

  def option_of(self, letter: str) -> int | None:
    idx = self.letters.find(letter.upper())
    return idx if idx >= 0 else None


_OPTION_LINE = re.compile(r"^[ \t]*\(?([A-Da-d])[.):][ \t]+(.+?)[ \t]*$", re.M)


def read_options(text: str) -> dict[str, str]:
  """Lettered option lines ("A. ...", "(B) ...", "C) ...", "D: ...") -> {letter: normalised text}.

  The first line of each letter after the stem wins (a later candidate quoting an option does
  not relabel it).
  """
  out: dict[str, str] = {}
  for m in _OPTION_LINE.finditer(text):
    out.setdefault(m.group(1).upper(), normalise(m.group(2)))
    if len(out) == 4:
      break
  return out


class ItemIndex:
  """Every benchmark question, indexed by its first words, for exact (normalised) recognition.

  Built once at server start-up (about a second). A lookup probes one dict per word of the prompt
  per distinct short-question length and verifies candidates with a substring test; results are
  cached per prompt text (the same question comes back in many requests).
  """

  def __init__(self, benchmarks: Sequence[str] = BENCHMARKS):
    self.items: list[Item] = [it for b in benchmarks for it in load_items(b)]
    self._text: list[str] = []
    self._by_key: dict[str, list[int]] = {}
    self._key_lengths: set[int] = set()
    self._choices: list[tuple[str, ...]] = []
    for idx, item in enumerate(self.items):
      words = normalise(_recognition_text(item)).split()
      self._text.append(" ".join(words))
      self._choices.append(tuple(normalise(c) for c in item.meta.get("choices", ())))
      n = min(KEY_WORDS, len(words))
      if n:
        self._key_lengths.add(n)
        self._by_key.setdefault(" ".join(words[:n]), []).append(idx)

  @functools.lru_cache(maxsize=8192)  # ~2 KB per prompt text: ~16 MB at most
  def recognise(self, text: str) -> Recognised | None:
    """The item whose whole question occurs in `text` (earliest first, then longest), or None.

    Multiple-choice stems must also come with options matching the item's (in any order); when
    several items share a stem, the options decide. A prompt showing no options at all keeps the
    file's lettering.
    """
    norm = normalise(text)
    words = norm.split()
    # Character offset of each word in `norm` (single spaces), for the substring test.
    offsets, pos = [], 0
    for w in words:
      offsets.append(pos)
      pos += len(w) + 1
    for i in range(len(words)):
      found: list[int] = []
      for n in self._key_lengths:
        if i + n > len(words):
          continue
        for idx in self._by_key.get(" ".join(words[i:i + n]), ()):
          if norm.startswith(self._text[idx], offsets[i]):
            found.append(idx)
      if not found:
        continue
      # A multiple-choice item shown with its options wins over a MATH problem it quotes; a
      # stem shown without options comes last. Then the longest question, then file order.
      found.sort(key=lambda j: (-len(self._text[j]), j))
      recognised = [rec for rec in (self._with_options(j, text) for j in found) if rec is not None]
      if recognised:
        return min(recognised, key=_preference)
    return None

  def _with_options(self, idx: int, text: str) -> Recognised | None:
    item = self.items[idx]
    if item.benchmark != "mmlu_redux":
      return Recognised(item)
    stem = item.meta["stem"].strip()
    at = text.find(stem)
    shown = read_options(text[at + len(stem):] if at >= 0 else text)
    if not shown:
      return Recognised(item, LETTERS)
    choices = self._choices[idx]
    if sorted(shown.values()) != sorted(choices):
      return None  # options edited, or not this item's options: not this item
    letters, free = [], dict(shown)
    for c in choices:  # a duplicated option text takes the next free letter showing it
      letter = next(l for l, t in free.items() if t == c)
      letters.append(letter)
      del free[letter]
    return Recognised(item, "".join(letters), shown=True)


def _preference(rec: Recognised) -> int:
  if rec.item.benchmark != "mmlu_redux":
    return 1
  return 0 if rec.shown else 2


# ---- cues --------------------------------------------------------------------------------------

# Whether a model reasons before answering. A reasoning model always does (params.BEHAVIOUR: its
# hidden reasoning is billed whatever the prompt). Otherwise the request decides, by what it asks
# for, not by how it words it:
#   - candidate answers in the prompt (other agents', its own earlier turn) ask for an evaluation
#     or a decision among them, whatever the header or instruction says (or none): it reasons;
#   - with no candidates, it reasons when the request asks for reasoning in one of the ordinary
#     chain-of-thought phrasings below (Kojima et al. 2022 "Let's think step by step" and its
#     common variants). They are generic requests to reason, none of them this suite's aggregation,
#     synthesis or decision wording; evaluation verbs ("evaluate", "synthesize", "weigh", "decide")
#     are deliberately absent, since what decides an evaluation is the candidates, not the verb.
# The sim's own reply texts contain none of the phrases (test).
ASKS_TO_REASON = re.compile("|".join((
    r"step[- ]by[- ]step", r"let'?s think", r"\bthink (?:carefully|through|about|hard|it through)",
    r"\breason(?:ing)? (?:carefully|through|about|step)", r"show (?:your |all )?(?:work|reasoning|steps)",
    r"explain (?:your |the )?(?:reasoning|answer|steps|solution)", r"chain[- ]of[- ]thought",
    r"\bwork (?:it )?out\b", r"\bjustify",
)), re.I)

_ROLE = re.compile(r"\bYou are an? ([A-Z][A-Za-z\-]*(?: [A-Z][A-Za-z\-]*){0,4})\s*[.,:]")

# Role name keywords -> the domain the role fits (docs/simulator.md, "Role" and the parameter `fit`).
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


# ---- answers anywhere in the context --------------------------------------------------------------

# MMLU answer statements: "the answer is (C)", "Answer: C", "**Answer:** (C)", {"answer": "C"},
# "\boxed{C}". Each occurrence is one candidate.
_MMLU_STATEMENT = re.compile(
    r"answer(?: is|:)\**[ \t]*:?[ \t]*\**[ \t]*\(?((?-i:[A-D]))\)?(?![A-Za-z])"
    r"|\"answer\"[ \t]*:[ \t]*\"\(?((?-i:[A-D]))\)?\""
    r"|\\boxed\{\(?((?-i:[A-D]))\)?\}", re.I)
_CODE_BLOCK = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.S | re.I)
_FORMAT_MATH = re.compile(r"\\boxed|final answer", re.I)
_DEF = re.compile(r"^\s*def\s+([A-Za-z_]\w*)\s*\(", re.M)


def boxed_contents(text: str) -> list[str]:
  """Every non-empty \\boxed{...} (brace-matched), in order."""
  out, start = [], 0
  while True:
    start = text.find("\\boxed", start)
    if start < 0:
      return out
    i = text.find("{", start)
    if i < 0:
      return out
    depth, j = 0, i
    while j < len(text):
      if text[j] == "{":
        depth += 1
      elif text[j] == "}":
        depth -= 1
        if depth == 0:
          break
      j += 1
    inner = text[i + 1:j].strip()
    if inner:
      out.append(inner)
    start = j + 1


# What a format instruction puts in a box to show the form ("put it in the form \\boxed{answer}"):
# a placeholder, not anyone's answer.
_PLACEHOLDER = re.compile(r"^\\?(?:\\text\{)?\s*(?:your |the )?(?:final )?(?:answer|solution|result|\.\.\.|…)\s*\}?$",
                          re.I)


def is_placeholder(boxed: str) -> bool:
  """Whether a boxed content is a format template's placeholder ("answer", "your final answer", "...")."""
  return bool(_PLACEHOLDER.match(boxed.strip().strip("{}<>")))


def last_boxed(text: str) -> str | None:
  """Content of the last non-empty \\boxed{...}, or None."""
  found = boxed_contents(text)
  return found[-1] if found else None


def mmlu_statements(text: str) -> list[str]:
  """Every MMLU answer letter stated in `text`, in order."""
  return [next(g for g in m.groups() if g).upper() for m in _MMLU_STATEMENT.finditer(text)]


def mmlu_vote(text: str) -> str | None:
  found = mmlu_statements(text)
  return found[-1] if found else None


def code_blocks(text: str) -> list[str]:
  return [b for b in _CODE_BLOCK.findall(text) if b.strip()]


def code_block(text: str) -> str | None:
  blocks = code_blocks(text)
  return blocks[-1] if blocks else None


_MATH_NOISE = re.compile(r"\\left|\\right|\\!|\\,|\\;|\\ |\s|\$")


def math_key(answer: str) -> str:
  """Loose normal form of a MATH answer, used only to group identical answers."""
  s = _MATH_NOISE.sub("", answer)
  s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").rstrip(".")
  return s


def code_key(code: str) -> str:
  """Normal form of code for recognising the same program: no comments, no blank lines."""
  lines = []
  for line in code.splitlines():
    stripped = line.split("#", 1)[0].rstrip() if "#" in line and "'" not in line and '"' not in line \
        else line.rstrip()
    if stripped.strip():
      lines.append(stripped)
  return "\n".join(lines)


# ---- the request as a whole --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RequestView:
  """What the behaviour model needs to know about a request.

  Attributes:
    recognised: the item and its lettering in this prompt, or None.
    answer_format: for an unknown question, the format the prompt asks for: "mcq" (lettered
      options), "math" (a boxed or final answer), "code" (a Python function), or "generic".
    role: "Math Solver" from "You are a Math Solver."; None for "a helpful assistant" or none.
    reasons: the request asks for reasoning (ASKS_TO_REASON) or for a decision among candidates.
    candidates: answers stated outside the question (letters in this prompt's lettering, MATH
      boxed contents, code blocks), in order of appearance.
    context_chars: characters of the prompt outside the question (what dilutes attention).
    query_text: the user text (for the generic reply of an unknown prompt).
    code_entry: the first function name defined in the prompt (unknown code questions).
  """

  recognised: Recognised | None
  answer_format: str
  role: str | None
  reasons: bool
  candidates: tuple[str, ...]
  context_chars: int
  query_text: str
  code_entry: str | None = None

  @property
  def item(self) -> Item | None:
    return self.recognised.item if self.recognised else None


def read_request(messages: Sequence[dict], index: ItemIndex | None = None) -> RequestView:
  """Reads item, format, role, cue and candidates from the messages (see the module docstring).

  Cached per (index, messages): the same messages come back for every sample, proposer seat and
  model that is sent them.
  """
  return _read_cached(index or default_index(), tuple((m["role"], m["content"]) for m in messages))


@functools.lru_cache(maxsize=4096)
def _read_cached(index: "ItemIndex", turns: tuple[tuple[str, str], ...]) -> RequestView:
  return _read(index, [{"role": r, "content": c} for r, c in turns])


def _read(index: "ItemIndex", messages: Sequence[dict]) -> RequestView:
  system = "\n".join(m["content"] for m in messages if m["role"] in ("system", "developer"))
  user = "\n\n".join(m["content"] for m in messages if m["role"] == "user")
  dialogue = "\n\n".join(m["content"] for m in messages if m["role"] in ("user", "assistant", "tool"))
  recognised = index.recognise(user) if user else None
  if recognised is not None and changes_task(user, recognised.item):
    recognised = None  # the task asked is not the vendored item's: its gold is unknown
  role_match = _ROLE.search(system)
  role = role_match.group(1) if role_match else None
  if recognised is None:
    def_match = _DEF.search(user)
    return RequestView(recognised=None, answer_format=_unknown_format(user), role=role,
                       reasons=bool(ASKS_TO_REASON.search(system + "\n" + user)), candidates=(),
                       context_chars=0, query_text=user, code_entry=def_match.group(1) if def_match else None)
  item = recognised.item
  if item.benchmark == "humaneval_plus":
    # Candidates' code repeats the prompt (signature, docstring): read blocks from the raw text,
    # dropping any block that is only the question's own prompt. The question is blanked only to
    # measure the other agents' text, so only when there are candidates.
    prompt_key = code_key(item.question)
    candidates = tuple(b for b in code_blocks(dialogue) if code_key(b) != prompt_key)
    stripped = without_question(dialogue, item) if candidates else ""
  else:
    stripped = without_question(dialogue, item)  # the other agents' text, the question blanked
    candidates = tuple(mmlu_statements(stripped) if item.benchmark == "mmlu_redux"
                       else (c for c in boxed_contents(stripped) if not is_placeholder(c)))
  context_chars = len(stripped.strip()) if candidates else 0
  instruction = without_question(system + "\n" + user, item)
  return RequestView(recognised=recognised, answer_format=FORMAT_OF[item.benchmark], role=role,
                     reasons=bool(candidates) or bool(ASKS_TO_REASON.search(instruction)),
                     candidates=candidates,
                     context_chars=context_chars, query_text=user)


FORMAT_OF = {"mmlu_redux": "mcq", "math": "math", "humaneval_plus": "code"}


# ---- a task changed after the item ----------------------------------------------------------------
#
# Text after the item that brings new task content ("now double it", "answer for n = 7 instead", a
# second problem) means the gold answer of the vendored item is no longer the answer asked for, and
# the sim cannot know the new one: it answers as on an unknown item (chance; docs/simulator.md,
# "Unknown questions; when the sim cannot know the gold answer"). What counts is content, never wording: a number or a
# formula, or (outside code items) a program, in the user text that follows both the item and the
# last answer statement of the prompt, that is not a label ("Agent 2:", "Round 3", "1." at a line's
# start, "gpt-5") and does not already occur in the other agents' text; on a code item a line calling the
# item's own function is a test report on the same task, not new content. Format instructions ("put
# your final answer in \\boxed{}", "end with 'The answer is (X)'") carry no number and never fire.
_NUMBER = re.compile(r"(?<![\w.\-])\d+(?:\.\d+)?(?![\w.]*\w)")
_LABEL = re.compile(r"^[ \t#*\-]*(?:[A-Za-z]+[ \t]+){0,4}[A-Za-z]+[ \t]*#?\d+[ \t]*[:)\].]?[ \t*]*$"  # a header line
                    r"|\b[A-Z][a-z]+[ \t]*#?\d+\b"  # "Agent 2:", "Agent 3 as a ...", "Solution 3)"
                    r"|^[ \t#*\-]*\(?\d+[.):]", re.M)  # list numbering
_FORMULA = re.compile(r"\$[^$\n]+\$|\\\(|\\frac|\\sqrt|\\cdot|\b[a-z]\s*=\s*-?[\w\\]|[\w)]\s*[\^*/+]\s*[\w(]")
_ANSWER_END = re.compile(r"\\boxed\{|```|" + _MMLU_STATEMENT.pattern, re.I)


def _after_item(user: str, item: Item) -> tuple[str, str] | None:
  """(text between the item and the prompt's last answer statement, text after both), or None when
  the item's text cannot be located verbatim or normalised."""
  needle = _recognition_text(item)
  text = user
  at = text.rfind(needle)
  if at < 0:
    text, needle = normalise(user), normalise(needle)
    at = text.rfind(needle)
    if at < 0:
      return None
  rest = text[at + len(needle):]
  cut = 0
  for m in _ANSWER_END.finditer(rest):
    end = rest.find("\n", m.end())
    cut = len(rest) if end < 0 else end
  return rest[:cut], rest[cut:]


@functools.lru_cache(maxsize=512)  # one per HumanEval+ entry point (164 items)
def _call_line(entry_point: str) -> re.Pattern:
  """A line that calls `entry_point`: compiled once per function, not once per request."""
  return re.compile(rf"^.*\b{re.escape(entry_point)}\s*\(.*$", re.M)


def changes_task(user: str, item: Item) -> bool:
  """Whether user text after the item brings new task content (see the comment above)."""
  parts = _after_item(user, item)
  if parts is None:
    return False
  others, tail = parts
  tail = _OPTION_LINE.sub(" ", tail)
  if item.benchmark == "humaneval_plus":
    # A line that calls the item's own function reports a test of the same task ("f('010') should be
    # '100', got '1 0 0'": a tool's feedback on a candidate), whatever numbers it shows.
    tail = _call_line(item.meta["entry_point"]).sub(" ", tail)
  unlabelled = _LABEL.sub(" ", tail)
  seen = set(_NUMBER.findall(others))
  if any(n not in seen for n in _NUMBER.findall(unlabelled)):
    return True
  if _FORMULA.search(unlabelled) and not _FORMULA.search(others):
    return True
  return item.benchmark != "humaneval_plus" and bool(_DEF.search(tail))


def without_question(text: str, item: Item) -> str:
  """`text` with every occurrence of the question (for MMLU: its stem and option lines) blanked."""
  out = text
  if item.benchmark == "mmlu_redux":
    out = _OPTION_LINE.sub(" ", out)
  needle = _recognition_text(item)
  if needle in out:
    return out.replace(needle, " ")
  # Re-wrapped in the prompt (whitespace changed): blank it on the normalised text.
  return normalise(out).replace(normalise(needle), " ")


def _unknown_format(user: str) -> str:
  if len(read_options(user)) == 4:
    return "mcq"
  if _DEF.search(user) and ("```" in user or "python" in user.lower() or '"""' in user):
    return "code"
  if _FORMAT_MATH.search(user):
    return "math"
  return "generic"


@functools.lru_cache(maxsize=1)
def default_index() -> ItemIndex:
  return ItemIndex()


__all__ = ["ItemIndex", "Recognised", "RequestView", "read_request", "ASKS_TO_REASON", "LETTERS"]

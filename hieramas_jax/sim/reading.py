"""How the simulated pool reads a request: which item, which lettering, whether to reason, which candidates.

Everything here works on the text of the messages only (principle 1 of docs/simulator.md), and on no
wording of the suite's own: the question is found wherever it sits, other agents' answers are
read wherever they sit and under whatever header (or none), and whether the model reasons follows
what the request asks for (candidates to weigh, or an ordinary request to reason), not its
wording. When something is absent the reading degrades to "unknown item", "no candidates" or
"no request to reason", never to an error.

- **Item**: the whole normalised question (lower case, whitespace collapsed) must occur in the
  prompt, in any role (user turns first, then the system message, then earlier assistant turns),
  found through an index of every vendored question's first words. A question edited beyond that
  (a number changed, a word swapped) is not the item. For multiple choice the stem is matched,
  then each of the item's options is looked for right after an option label, in any layout (one per
  line, Du et al.'s one-line "A) x, B) y, ...", text appended after an option), so a permuted prompt
  is recognised with its own lettering.
- **Candidates**: every answer statement outside the question itself, in every role (system, user,
  assistant): MMLU "the answer is (X)" and its common variants, MATH every ``\\boxed{}``,
  HumanEval+ each fenced code block that is more than the question's own prompt.
- **Reasoning**: candidates in the prompt ask for an evaluation whatever the wording; without
  them, what the instruction asks for, read by meaning (`intent.asks_to_reason`) from the system
  and user text with the question's own text removed (a MATH problem that says "Explain ..." asks
  nothing of the model).
- **Text it cannot place** (a sentence after the question that is neither an answer, an option,
  a format or length instruction nor a request to reason, e.g. "This request was logged as ticket
  4821."): ignored; it changes the task only by the content rule of `changes_task`.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Sequence

from hieramas_jax.benchmarks.data import BENCHMARKS, LETTERS, Item, load_items
from hieramas_jax.sim import intent

_TRAILING = ":;,.?!)"
# Items are indexed by their first KEY_WORDS normalised words (shorter questions by all but the last).
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
      # The key stops short of the question's last word: in a prompt that word may carry what follows it
      # ("... the process of: A) ..." in Du et al.'s one-line layout); the substring test checks the rest.
      n = min(KEY_WORDS, max(1, len(words) - 1))
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
        key = " ".join(words[i:i + n])
        trimmed = key.rstrip(_TRAILING)  # a one-word question glued to what follows ("Osteoclasts: A) ...")
        for k in (key, trimmed) if trimmed != key else (key,):
          for idx in self._by_key.get(k, ()):
            if norm.startswith(self._text[idx], offsets[i]) and idx not in found:
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
    norm = normalise(text)
    at = norm.find(self._text[idx])
    tail = norm[at + len(self._text[idx]):] if at >= 0 else norm
    letters = match_options(tail, self._choices[idx])
    if letters is None:
      return None  # options shown but one of the item's is missing or edited: not this item
    return Recognised(item, letters or LETTERS, shown=bool(letters))


# An option label in normalised text: "a.", "(b)", "c)", "d:" at a line start, after a space or after
# a comma (Du et al.'s one-line "a) x, b) y, c) z, d) w"), followed by a space.
_LABEL_AT = re.compile(r"(?:^|(?<=[\s,;:(]))\(?([a-d])[.):]\)?[ ]+")
# How far after the stem the options are looked for (characters of normalised text): the options
# follow the stem; candidates quoting "(b) ..." further down must not relabel them.
OPTIONS_WINDOW = 4000


def match_options(tail: str, choices: Sequence[str]) -> str | None:
  """The letters under which `choices` are shown in `tail` (normalised text after the stem).

  Read by content, whatever the layout (one per line, all on one line, with text appended after an
  option): each choice must begin right after a label and end at a word boundary; the longest
  choices are placed first so that "1" never takes the label of "10". Returns "" when the text shows
  no labelled options at all (the file's lettering is kept), None when it shows options but not all
  of this item's (an edited option: not this item).
  """
  tail = tail[:OPTIONS_WINDOW]
  labels = [(m.group(1).upper(), m.end()) for m in _LABEL_AT.finditer(tail)]
  if not labels:
    return ""
  placed: dict[int, str] = {}
  used: set[str] = set()
  for k in sorted(range(len(choices)), key=lambda k: -len(choices[k])):
    c = choices[k]
    for letter, start in labels:
      if letter in used or not tail.startswith(c, start):
        continue
      after = tail[start + len(c):start + len(c) + 1]
      if after and after.isalnum() and c[-1:].isalnum():
        continue
      placed[k] = letter
      used.add(letter)
      break
  if not placed:
    return ""  # labels, but none before any of the item's options: no options shown (e.g. a candidate's "(b)")
  if len(placed) < len(choices):
    return None
  return "".join(placed[k] for k in range(len(choices)))


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
#   - with no candidates, it reasons when the instruction asks it to, read by meaning with the
#     shipped sentence encoder against intent families quoted from public codebases (`intent.py`).
# The sim's own reply texts ask for no reasoning (test).

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
    reasons: the request asks for reasoning (intent.asks_to_reason) or for a decision among candidates.
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
  others = "\n\n".join(m["content"] for m in messages if m["role"] in ("assistant", "tool"))
  # Every role is read, as a model reads its whole context: the question is looked for in the user
  # turns first, then in the system message (a framework that puts the task there), then in earlier
  # assistant turns; answers to weigh are read from all of them (Mixture-of-Agents' own code puts
  # the proposals in the system message).
  where, recognised = user, (index.recognise(user) if user else None)
  for text in (system, others):
    if recognised is None and text:
      where, recognised = text, index.recognise(text)
  if recognised is not None and changes_task(where, recognised.item):
    recognised = None  # the task asked is not the vendored item's: its gold is unknown
  role_match = _ROLE.search(system)
  role = role_match.group(1) if role_match else None
  if recognised is None:
    def_match = _DEF.search(user)
    return RequestView(recognised=None, answer_format=_unknown_format(user), role=role,
                       reasons=intent.asks_to_reason(system + "\n" + _frame(user)), candidates=(),
                       context_chars=0, query_text=user, code_entry=def_match.group(1) if def_match else None)
  item = recognised.item
  dialogue = "\n\n".join(m["content"] for m in messages if m["role"] in ("user", "assistant", "tool"))
  # Answers are read from the system message too, before the dialogue (message order); the text that
  # dilutes attention is that of the parts that carry answers (a system message of instructions only
  # does not count, as before proposals could sit there).
  candidates: tuple[str, ...] = ()
  context_chars = 0
  for text in (system, dialogue):
    found, stripped = _candidates_in(text, item) if text else ((), "")
    candidates += found
    context_chars += len(stripped.strip()) if found else 0
  return RequestView(recognised=recognised, answer_format=FORMAT_OF[item.benchmark], role=role,
                     reasons=bool(candidates) or intent.asks_to_reason(
                         without_question(system + "\n" + user, item)),
                     candidates=candidates,
                     context_chars=context_chars, query_text=user)


FORMAT_OF = {"mmlu_redux": "mcq", "math": "math", "humaneval_plus": "code"}


def _candidates_in(text: str, item: Item) -> tuple[tuple[str, ...], str]:
  """(answers stated in `text` outside the question, `text` with the question blanked)."""
  if item.benchmark == "humaneval_plus":
    # Candidates' code repeats the prompt (signature, docstring): read blocks from the raw text,
    # dropping any block that is only the question's own prompt. The question is blanked only to
    # measure the other agents' text, so only when there are candidates.
    prompt_key = code_key(item.question)
    found = tuple(b for b in code_blocks(text) if code_key(b) != prompt_key)
    return found, without_question(text, item) if found else ""
  stripped = without_question(text, item)  # the other agents' text, the question blanked
  return tuple(mmlu_statements(stripped) if item.benchmark == "mmlu_redux"
               else (c for c in boxed_contents(stripped) if not is_placeholder(c))), stripped

FRAME_SENTENCES = 3


def _frame(user: str) -> str:
  """Where an unknown question's instruction sits: the first and the last FRAME_SENTENCES sentences.

  The question of an unknown item cannot be removed (it is not known), so its instruction is read from
  the frame around it, not from every sentence of the question: bounded cost (an unknown question is
  new text every time) and a question's own "Explain ..." asks nothing of the model.
  """
  found = intent.sentences(user)
  if len(found) <= FRAME_SENTENCES + 1:
    return "\n".join(found[-FRAME_SENTENCES:])
  return "\n".join(found[:1] + found[-FRAME_SENTENCES:])


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
# your final answer in \\boxed{}", "end with 'The answer is (X)'") carry no number and never fire. A
# number counts only in a sentence that asks something of the task (`_placed`): a length or format
# instruction ("Keep your final response under 200 words.") or a statement that names nothing of
# the request ("This request was logged as ticket 4821.") is text the sim cannot place, and ignores.
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
  tail = _blank_options(tail, item)
  if item.benchmark == "humaneval_plus":
    # A line that calls the item's own function reports a test of the same task ("f('010') should be
    # '100', got '1 0 0'": a tool's feedback on a candidate), whatever numbers it shows.
    tail = _call_line(item.meta["entry_point"]).sub(" ", tail)
  unlabelled = _LABEL.sub(" ", tail)
  seen = set(_NUMBER.findall(others))
  if any(_placed(sentence, user) for sentence in _SENTENCES.split(unlabelled)
         if any(n not in seen for n in _NUMBER.findall(sentence))):
    return True
  if _FORMULA.search(unlabelled) and not _FORMULA.search(others):
    return True
  return item.benchmark != "humaneval_plus" and bool(_DEF.search(tail))


_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_CONTENT_WORD = re.compile(r"[a-z]{4,}")
# Function words of four letters or more: they tie a sentence to nothing.
_FUNCTION_WORDS = frozenset((
    "this", "that", "these", "those", "with", "from", "into", "onto", "your", "yours", "have", "been", "were",
    "will", "would", "shall", "should", "could", "what", "when", "where", "which", "while", "there", "their",
    "then", "than", "them", "they", "also", "only", "each", "some", "such", "about", "after", "before",
    "over", "under", "just", "very", "more", "most", "does", "done", "here", "please", "must"))


def _placed(sentence: str, user: str) -> bool:
  """Whether a sentence with a new number asks something of the task (and so may change it).

  Not placed, so ignored: a sentence the intent reader reads as a format or length instruction
  ("Keep your final response under 200 words."), and a statement that asks nothing (near no exemplar
  instruction) and names nothing of the request (no question mark, no content word that also occurs
  elsewhere in the user text: "This request was logged as ticket 4821."). A question, another
  instruction ("Now give the answer multiplied by 2.") or a sentence about the question's objects
  ("Now make it return 7 for empty strings.") is placed.
  """
  if "?" in sentence:
    return True
  family = intent.sentence_family(" ".join(sentence.split()))[0]
  if family is not None:
    return family != "form"  # an instruction: placed unless it only shapes the reply
  low = user.lower()
  words = {w for w in _CONTENT_WORD.findall(sentence.lower()) if w not in _FUNCTION_WORDS}
  return any(low.count(w) > sentence.lower().count(w) for w in words)


@functools.lru_cache(maxsize=4096)
def _inline_options(item_id: str, choices: tuple[str, ...]) -> re.Pattern | None:
  """Options laid out on one line after a label (Du et al.'s "Q: A) x, B) y, C) z, D) w"), compiled once."""
  del item_id  # the cache key only
  if not choices:
    return None
  alternatives = "|".join(re.escape(c) for c in sorted(choices, key=len, reverse=True) if c)
  return re.compile(r"(?:(?<=[,:;])|^)[ \t]*\(?[A-Da-d][.):]\)?[ \t]+(?:" + alternatives + ")", re.M)


def _blank_options(text: str, item: Item) -> str:
  """`text` without the item's option lines and one-line options (MMLU); other items unchanged."""
  if item.benchmark != "mmlu_redux":
    return text
  out = _OPTION_LINE.sub(" ", text)
  pattern = _inline_options(item.id, tuple(c.strip() for c in item.meta.get("choices", ())))
  return pattern.sub(" ", out) if pattern else out


def without_question(text: str, item: Item) -> str:
  """`text` with every occurrence of the question (for MMLU: its stem and its options) blanked."""
  out = _blank_options(text, item)
  needle = _recognition_text(item)
  if needle in out:
    return out.replace(needle, " ")
  # Re-wrapped in the prompt (whitespace changed): blank it on the normalised text; absent: nothing to blank.
  norm = normalise(out)
  return norm.replace(normalise(needle), " ") if normalise(needle) in norm else out


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


__all__ = ["ItemIndex", "Recognised", "RequestView", "read_request", "LETTERS", "match_options"]

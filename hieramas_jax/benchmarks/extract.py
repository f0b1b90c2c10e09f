"""Answer extraction: from a model's free text to the answer it commits to, for every benchmark.

Pure and cheap, with no grading in it: the simulator, the voting methods and AFlow's operators read
answers with these helpers too, and none of them needs math-verify or the sandbox. `graders.py` turns
an extracted answer into a verdict; `humaneval.py` runs extracted code.

  * `strip_reasoning`: a reasoning model's `<think>` blocks removed before any extraction;
  * `extract_mmlu_letter`: the option letter (A-D);
  * `extract_math_answer`: the final answer of a MATH solution, as LaTeX (`last_boxed` and statements);
  * `extract_code`: the Python program in an answer (`defines`: whether code defines a function).
"""

from __future__ import annotations

import ast
import functools
import re
from typing import Sequence

from hieramas_jax.benchmarks.data import LETTERS


# ---------------------------------------------------------------------------------------------
# Reasoning blocks.

# Tags that reasoning models (DeepSeek-R1 and its distills, Qwen3, QwQ, open reasoning fine-tunes) put
# around their hidden chain of thought when a server passes it through in `content`.
_REASONING_TAGS = ("think", "thinking", "reasoning", "thought")
_REASONING_BLOCK = re.compile(r"<(%s)>.*?</\1\s*>" % "|".join(_REASONING_TAGS), re.DOTALL | re.IGNORECASE)
_REASONING_OPEN = re.compile(r"<(?:%s)>" % "|".join(_REASONING_TAGS), re.IGNORECASE)
_REASONING_CLOSE = re.compile(r"</(?:%s)\s*>" % "|".join(_REASONING_TAGS), re.IGNORECASE)


def strip_reasoning(text: str | None) -> str | None:
  """The answer part of a completion: reasoning blocks removed before any extraction.

  A reasoning model's hidden thoughts argue about several answers before committing, so what it
  says inside `<think>...</think>` is no answer. Three shapes are handled:
    * closed blocks (`<think>...</think>`, also `thinking`, `reasoning`, `thought`) are removed;
    * a block that opens and never closes (the output was cut by max_tokens while the model was
      still thinking) removes everything after its tag: an unfinished thought commits to nothing;
    * a closing tag before any opening one (chat templates that put `<think>` in the prompt, as
      DeepSeek-R1's does) removes everything before it. Only there: a literal `</think>` after a
      closed block (an answer that talks about the tags) is text, and the answer before it stays.
  The full text is kept in the traces; grading, voting and (by default) the next agents read the
  stripped one.
  """
  if not text:
    return text
  first_open = _REASONING_OPEN.search(text)
  first_close = _REASONING_CLOSE.search(text)
  if first_close is not None and (first_open is None or first_close.start() < first_open.start()):
    text = text[first_close.end():]
  text = _REASONING_CLOSE.sub("", _REASONING_BLOCK.sub("", text))  # a stray closing tag left is no text
  opened = _REASONING_OPEN.search(text)
  if opened is not None:
    text = text[:opened.start()]
  return text


# ---------------------------------------------------------------------------------------------
# MMLU: letter extraction.

# The letter itself, after optional brackets and LaTeX text wrappers: "(B)", "[B]", "\text{B}", "B".
_LETTER = (r"[(\[{]?\s*(?:\\(?:text|textbf|mathrm|mathbf)\s*\{\s*)?\(?([A-Da-d])\)?"
           r"(?![A-Za-z0-9_])")
# After an answer cue: adverbs and the words option/choice/letter before the letter.
_CUE_TAIL = r"\s*(?:(?:probably|likely|clearly|definitely|therefore|thus|then)\s+)?[:\-]?\s*" \
            r"(?:(?:option|choice|letter)\s*)?[:\-]?\s*"

_BOXED_LETTER = re.compile(
    r"\\(?:boxed|fbox)\s*\{\s*(?:\\text(?:bf)?\s*\{\s*)?\(?([A-Da-d])\)?(?:[.:)][^{}]*)?\s*\}?\s*\}")
# Explicit final statements: "final answer: B", "The final answer to this question is (B)", an
# "Answer: B" label opening a line, a JSON or XML answer field.
_FINAL_STATEMENT = re.compile(
    r"\bfinal\s+(?:answer|choice|option|selection)\b(?:\s+to\s+(?:this|the)\s+question)?"
    r"\s*(?:is\b|[:=])?" + _CUE_TAIL + _LETTER, re.IGNORECASE)
_ANSWER_LABEL = re.compile(
    r"^[ \t>#]*(?:(?:correct|final|my|best)\s+)?answer\s*[:\-]" + _CUE_TAIL + _LETTER,
    re.IGNORECASE | re.MULTILINE)
_JSON_ANSWER = re.compile(
    r"[\"'](?:final_?answer|answer|choice|option|letter)[\"']\s*:\s*[\"']\s*\(?([A-Da-d])\)?"
    r"(?:[.:)\s][^\"'\n]*)?[\"']", re.IGNORECASE)
_XML_ANSWER = re.compile(r"<answer>\s*\(?([A-Da-d])\)?(?:[.:)\s][^<]*)?</answer>", re.IGNORECASE)
# Answer statements: "The answer is (B)", "correct option is C", "I choose C", "Option D is
# correct", "Therefore, D.", "**B**". Mentions ("Answer choice A is incorrect", "(A) and then
# B") are not statements: they lack the copula, or a negative remark follows the letter.
_ANSWER_STATEMENT = re.compile(
    r"(?:\banswer\b(?:\s+to\s+(?:this|the)\s+question)?\s*(?:is\b|would\s+be|should\s+be|must\s+be|[:=])"
    r"|\b(?:correct|right|best|true)\s+(?:answer|option|choice|letter|response)(?:\s+(?:choice|option))?"
    r"\s*(?:is\b|would\s+be|[:=])"
    r"|\bi\s+(?:would\s+|will\s+)?(?:choose|pick|select|go\s+with)\b)" + _CUE_TAIL + _LETTER,
    re.IGNORECASE)
_IS_CORRECT = re.compile(
    r"(?:\b(?:option|choice|answer)\s+[(\[]?([A-Da-d])[)\]]?|[(\[]([A-D])[)\]]|\b([A-D]))"
    r"\s+is\s+(?:the\s+)?(?:correct|right|best|true)\b(?!\s+(?:only|if|when|for))", re.IGNORECASE)
_CONCLUSION = re.compile(
    r"\b(?:therefore|thus|hence|so|consequently|accordingly)\b\s*,?\s*"
    r"(?:the\s+(?:correct\s+|best\s+|right\s+)?(?:answer|option|choice)\s+(?:is\b)?\s*:?\s*)?"
    r"(?:(?:option|choice)\s+)?[(\[]?([A-Da-d])[)\]]?(?=\s*(?:[.,;:!)\]]|$)|\s+is\b)", re.IGNORECASE)
_BOLD_LETTER = re.compile(r"\*\*\s*\(?([A-D])\)?(?:[.:)]\s*[^*\n]*)?\s*\*\*")
# What follows a letter that is being discussed, not chosen: "A is incorrect", "B can be ruled out".
_NEGATIVE_REMARK = re.compile(
    r"\s+(?:(?:is|are|was|seems|appears|would\s+be)\s+(?:(?:also|clearly|definitely)\s+)?"
    r"(?:not\b|incorrect|wrong|false|invalid|unlikely|implausible|a\s+distractor|ruled\s+out|eliminated)"
    r"|(?:can|could|should|must)\s+(?:also\s+)?(?:be\s+)?(?:ruled|eliminated|excluded|discarded|dismissed)"
    r"|(?:does\s+not|doesn't|cannot|can't|isn't|fails)\b)", re.IGNORECASE)
# A line that is only a letter: "B", "(B)", "B.", "[B]", "Option B".
_BARE_LINE = re.compile(r"^\s*(?:option\s+|choice\s+)?[(\[]?([A-D])[)\]]?[.:]?\s*$", re.IGNORECASE)
# A line that starts with a letter and its option text: "B. Niacin", "(B) Niacin", "B) Niacin".
_LEAD_LINE = re.compile(r"^\s*(?:\(([A-D])\)|([A-D])[.):])\s+\S")
# Words that announce the answer in a last line naming an option by its text ("So it must be X").
_TEXT_CUE = re.compile(r"\b(?:answer|correct|therefore|thus|hence|so|must\s+be|would\s+be|should\s+be"
                       r"|i\s+(?:would\s+)?(?:choose|pick|select|go\s+with))\b", re.IGNORECASE)


def _lowercase_ok(text: str, end: int) -> bool:
  """Lower-case letters count only when nothing word-like follows ("answer is a bit" is not 'A')."""
  return re.match(r"\s*(?:[)\]}.,:;*!]|$)", text[end:]) is not None


def _strip_markup(text: str) -> str:
  """Blank out markdown emphasis, code ticks and `$`, keeping every character's position (so
  matches found in the stripped text and in the raw text can be ordered together)."""
  return text.replace("**", "  ").replace("__", "  ").replace("`", " ").replace("$", " ")


def _letters(pattern: re.Pattern, text: str, *, remarks: bool = True) -> list[tuple[int, str]]:
  """(position, letter) of every match of `pattern`, minus lower-case letters followed by a word
  and, with `remarks`, letters followed by a negative remark."""
  found = []
  for m in pattern.finditer(text):
    group = next(g for g in range(1, (m.lastindex or 0) + 1) if m.group(g))
    letter, end = m.group(group), m.end(group)
    if letter.islower() and not _lowercase_ok(text, end):
      continue
    if remarks:
      # "(A) is wrong": past the closing bracket. "D) cannot pay...": option text, not a remark.
      after = end + 1 if m.start(group) > 0 and text[m.start(group) - 1] in "([" and text[end:end + 1] in ")]" \
          else end
      if _NEGATIVE_REMARK.match(text, after):
        continue
    found.append((m.start(), letter.upper()))
  return found


def _named_option(line: str, options: Sequence[str]) -> str | None:
  """The one option whose text the answer cue in `line` is followed by, as a whole word (short
  texts such as "In" or "Io" only in their own case), or None."""
  cue = None
  for cue in _TEXT_CUE.finditer(line):
    pass
  if cue is None:
    return None
  tail = line[cue.end():]
  hits = []
  for i, opt in enumerate(options[:4]):
    opt = str(opt).strip().rstrip(".")
    if not opt:
      continue
    flags = 0 if len(opt) <= 3 else re.IGNORECASE
    if re.search(rf"(?<![A-Za-z0-9]){re.escape(opt)}(?![A-Za-z0-9])", tail, flags):
      hits.append((i, opt))
  # "Epilepsy" inside a matched "Epilepsy and narcolepsy" is the longer option's, not its own.
  hits = [(i, o) for i, o in hits if not any(o != p and o.lower() in p.lower() for _, p in hits)]
  return LETTERS[hits[0][0]] if len(hits) == 1 else None


def extract_mmlu_letter(text: str | None, options: Sequence[str] | None = None) -> str | None:
  """The option letter (A-D) a model's answer commits to, or None (see `_extract_mmlu_letter`).

  Memoised on (text, options): HieraMAS's training grades each reply at several levels (its role's
  reward, the consensus check, the system reward), about 3.6 times per distinct text on MMLU-Redux,
  and extraction is the runner's largest pure-Python cost there.
  """
  if text is None:
    return None
  return _extract_mmlu_letter(text, None if options is None else tuple(str(o) for o in options))


@functools.lru_cache(maxsize=32768)
def _extract_mmlu_letter(text: str, options: tuple[str, ...] | None) -> str | None:
  """The option letter (A-D) a model's answer commits to, or None.

  Tiers of evidence, strongest first; within a tier the last match wins (models argue about
  several options before committing, and correct themselves):
    1. a boxed letter: `\\boxed{B}`, `\\boxed{\\text{B}}`;
    2. an explicit final statement: "Final Answer: B", "The final answer is (B)", an "Answer: B"
       label opening a line, a JSON (`{"answer": "C"}`, fenced or pretty-printed) or XML answer;
    3. an answer statement: "The answer is (B)", "correct option is C", "I choose C", "Option D is
       correct", "B is the correct answer", "Therefore, D.", "**B**";
    4. the last line that is only a letter ("(C)");
    5. the last line that starts with one option ("B. Niacin"; ignored when the text lists three
       or more options, i.e. restates the question);
    6. with `options`, the one option text named after an answer cue in the last line ("So it
       must be narcolepsy."), as a whole word.
  A letter followed by a negative remark ("Answer choice A is incorrect", "B can be ruled out")
  is a mention, not a statement, so remarks after a conclusion never override it. Lower-case
  letters count only when nothing word-like follows ("the answer is a bit..." is not A).

  Args:
    text: the model's full output.
    options: the option texts in A-D order.

  Returns:
    An upper-case letter in "ABCD", or None when the text commits to none. Reasoning blocks
    (`strip_reasoning`) are removed first.
  """
  text = strip_reasoning(text)
  if not text:
    return None
  plain = _strip_markup(text)
  tiers = (
      lambda: _letters(_BOXED_LETTER, text, remarks=False),
      lambda: (_letters(_FINAL_STATEMENT, plain) + _letters(_ANSWER_LABEL, plain)
               + _letters(_JSON_ANSWER, text) + _letters(_XML_ANSWER, text)),
      lambda: (_letters(_ANSWER_STATEMENT, plain) + _letters(_IS_CORRECT, plain, remarks=False)
               + _letters(_CONCLUSION, plain) + _letters(_BOLD_LETTER, text)),
  )
  for tier in tiers:
    found = tier()
    if found:
      return max(found)[1]
  lines = [ln for ln in plain.splitlines() if ln.strip()]
  for line in reversed(lines):
    m = _BARE_LINE.match(line)
    if m:
      return m.group(1).upper()
  leads = [(m.group(1) or m.group(2)) for ln in lines if (m := _LEAD_LINE.match(ln))]
  if leads and len(set(leads)) < 3:
    return leads[-1]
  if options and lines and not _LEAD_LINE.match(lines[-1]):
    return _named_option(lines[-1], options)
  return None


# ---------------------------------------------------------------------------------------------
# MATH: answer extraction.

_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)\b")


def _balanced_group(text: str, start: int) -> tuple[str, int] | None:
  """Contents of the `{...}` group opening at text[start], honouring nesting and escapes."""
  if start >= len(text) or text[start] != "{":
    return None
  depth = 0
  i = start
  while i < len(text):
    ch = text[i]
    if ch == "\\":
      i += 2
      continue
    if ch == "{":
      depth += 1
    elif ch == "}":
      depth -= 1
      if depth == 0:
        return text[start + 1:i], i + 1
    i += 1
  return None


def last_boxed(text: str) -> str | None:
  """Contents of the last non-empty `\\boxed{...}` / `\\fbox{...}` (or `\\boxed 5`) with a closed group.

  An empty `\\boxed{}` (a model that writes the template before filling it, or a truncated
  edit) is skipped, so an earlier filled box or a later answer statement still counts."""
  for m in reversed(list(_BOX_COMMAND.finditer(text))):
    rest = m.end()
    while rest < len(text) and text[rest] == " ":
      rest += 1
    if rest < len(text) and text[rest] == "{":
      group = _balanced_group(text, rest)
      if group is not None and group[0].strip():
        return group[0].strip()
      continue
    # `\boxed 5`: the argument is the next token.
    token = re.match(r"([^\s$]+)", text[rest:])
    if token and rest > m.end():
      return token.group(1).rstrip(".")
  return None


def _math_span(text: str, start: int) -> str | None:
  """The math at text[start] if a delimiter opens there ($...$, $$...$$, \\[...\\], \\(...\\)),
  spanning line breaks (a matrix or a long expression often does), else None."""
  for opener, closer in (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$")):
    if text.startswith(opener, start):
      i = start + len(opener)
      while i < len(text) and i - start < 4000:
        if text[i] == "\\" and not text.startswith(closer, i):
          i += 2  # an escaped character (`\$` is money, not the end of math mode)
          continue
        if text.startswith(closer, i):
          return text[start + len(opener):i].strip()
        i += 1
      return None
  return None


# After an answer cue: filler words before the answer itself.
_FILLER = re.compile(r"(?:\*\*|[ \t:=]|\b(?:therefore|thus|then|simply|just|exactly|indeed|given\s+by)\b)*",
                     re.IGNORECASE)
# Where a plain-text answer ends: a reason ("X, since ...", "X because ..."), a new sentence.
_ANSWER_END = re.compile(r"\s*[,;]?\s+(?:since|because|as|which|so|where|given|i\.e\.|hence|thus)\b"
                         r"|\.\s+(?=\S)|\.\s*$|[,;]\s*$|\s+I\s+hope\b|\*\*")
_FINAL_CUE = re.compile(r"\bfinal\s+answer\b(?:\s+(?:to|for)\s+(?:this|the)\s+(?:problem|question))?"
                        r"\s*(?:is\b|[:=])?", re.IGNORECASE)
_ANSWER_CUE = re.compile(r"\b(?:answer|solution)\b(?:\s+(?:to|for)\s+(?:this|the)\s+(?:problem|question|equation))?"
                         r"(?:\s*(?:is\b|[:=])|(?=[ \t]*(?:\$|\\\[|\\\()))", re.IGNORECASE)


# Plain text (outside math delimiters) counts as an answer only if it looks like mathematics.
_MATH_SIGN = re.compile(r"[0-9\\+\-*/^=<>|()\[\]{}]")
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+\s*(?:\{[^{}]*\})?")
_PROSE_WORD = re.compile(r"[A-Za-z]{3,}")
_MATH_WORDS = frozenset({"sqrt", "pi", "infty", "infinity", "and", "or", "cm", "mm", "km", "inches", "feet",
                         "degrees", "units", "dollars", "cents", "sin", "cos", "tan", "log", "ln", "exp"})
_FUNCTION_WORDS = frozenset({"the", "a", "an", "this", "that", "these", "those", "it", "be", "is", "are", "was",
                             "can", "will", "would", "should", "could", "may", "might", "following", "below",
                             "above", "here", "there", "follows", "simple", "simply", "given", "clear", "obvious",
                             "same", "then", "now", "we", "you", "to", "of", "in", "on", "at", "by", "with"})


def _looks_mathematical(span: str) -> bool:
  """Whether a plain-text answer span is mathematics rather than prose.

  Real models write answer cues inside prose ("the answer can be rewritten as", "the answer is,
  or more accurately, ..."): the words after such a cue are no answer, and counted as one they
  would be a vote in self-consistency and debate. A span counts if it holds a digit, a LaTeX
  command or an operator/bracket, and at most two prose words of three letters or more outside
  LaTeX commands (units and words such as "and", "sqrt", "pi" aside); or it is a word answer
  ("Evelyn", "odd") of one or two words, none a function word ("the answer can be rewritten").
  A bare capital letter ("the answer is N") is a placeholder, not an answer; every MATH gold
  answer passes.
  """
  span = span.replace("**", "").strip()
  if not span or span[0] in ",;:":
    return False
  if not _MATH_SIGN.search(span):
    # A word answer ("Evelyn", "odd"): one or two words of two letters or more, none a function word.
    words = span.split()
    return (len(words) <= 2 and all(re.fullmatch(r"[A-Za-z][A-Za-z'.]+", w) for w in words)
            and not any(w.lower().strip(".") in _FUNCTION_WORDS for w in words))
  words = [w.lower() for w in _PROSE_WORD.findall(_LATEX_COMMAND.sub(" ", span))]
  return sum(w not in _MATH_WORDS for w in words) <= 2


# A plain-text span that hedges between answers ("either -18 or 2") or is a sentence ("The value of x
# is 3 and y is 4") commits to no one answer: counted as one, it would be graded (and voted) as a guess.
_HEDGE = re.compile(r"\b(?:either|maybe|perhaps|possibly)\b", re.IGNORECASE)
_SENTENCE_VERB = re.compile(r"\b(?:is|are|was|were|equals?|value|values)\b", re.IGNORECASE)


def _answer_after(text: str, pos: int) -> str | None:
  """The answer stated right after an answer cue ending at `pos`, or None.

  Math in delimiters is taken whole (line breaks included); plain text runs to the end of its
  line, cut before a reason or the next sentence ("The answer is 12, since ..." -> "12"). An
  answer on the next line counts only in math delimiters (a "Final Answer" heading before
  prose is no answer).
  """
  i = _FILLER.match(text, pos).end()
  if i < len(text) and text[i] == "\n":
    j = len(text[i:]) - len(text[i:].lstrip()) + i
    if _math_span(text, j) is None:
      return None
    i = j
  span = _math_span(text, i)
  if span is None and text.startswith("\\boxed", i):
    return None  # an unclosed box is no answer
  if span is None:
    line = text[i:].split("\n", 1)[0]
    end = _ANSWER_END.search(line)
    span = line[:end.start()] if end else line
    if _HEDGE.search(span) or _SENTENCE_VERB.search(_LATEX_COMMAND.sub(" ", span.split("$", 1)[0])):
      return None
    # "... is approximately $5$": math that opens inside the answer's own words.
    dollar = re.search(r"(?<!\\)\$", span)
    in_math = dollar is not None and _math_span(text, i + dollar.start()) is not None
    if in_math:
      span = _math_span(text, i + dollar.start())
    elif dollar is not None or not _looks_mathematical(span):
      return None  # math that never closes (the output was cut mid-answer), or prose
  span = span.replace("**", "").strip()
  span = re.sub(r"[.\s]+$", "", span)
  if not span or re.match(r"(?:not|no|unknown|unclear|undefined)\b", span, re.IGNORECASE):
    return None
  return span


def _last_statement(pattern: re.Pattern, text: str) -> str | None:
  for m in reversed(list(pattern.finditer(text))):
    answer = _answer_after(text, m.end())
    if answer is not None:
      return answer
  return None


def extract_math_answer(text: str | None) -> str | None:
  """The final answer of a MATH solution, as a LaTeX string, or None.

  Evidence, strongest first:
    1. the last closed `\\boxed{...}` (or `\\fbox{...}`), nested braces included: the format the
       prompts ask for and that MATH solutions use;
    2. the last explicit final answer statement: "Final Answer: X", "**Final Answer: X**",
       "**Final Answer:** $X$", Minerva's "The final answer is $X$. I hope it is correct.", a
       "Final Answer" heading followed by display math;
    3. the last answer statement: "The answer is X, since ...", "Answer: $X$".
  Math in delimiters is taken whole, across line breaks; plain text is cut before a reason or the
  next sentence. A statement whose answer is "not ..." is skipped, and so is plain text that is
  prose rather than mathematics (`_looks_mathematical`). Reasoning blocks (`strip_reasoning`) are
  removed first; an empty `\\boxed{}` does not end the search.
  """
  text = strip_reasoning(text)
  if not text:
    return None
  boxed = last_boxed(text)
  if boxed is not None:
    return boxed
  return _last_statement(_FINAL_CUE, text) or _last_statement(_ANSWER_CUE, text)


# ---------------------------------------------------------------------------------------------
# HumanEval+: code extraction.

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+\-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_PYTHON_TAGS = {"", "python", "py", "python3", "py3"}


def defines(code: str, entry_point: str) -> bool:
  """Whether `code` defines `entry_point` at any indentation (a method or nested def counts too).

  Public because HumanEval judging (`humaneval.assemble_program`) decides with it how to join a
  candidate to its prompt, and the two must agree with `extract_code` on what "defines" means.
  """
  return re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE) is not None


def _parses(code: str) -> bool:
  try:
    ast.parse(code)
  except (SyntaxError, ValueError):
    return False
  return True


def extract_code(text: str | None, entry_point: str) -> str | None:
  """The Python program in a model's answer, or None.

  Fenced blocks first (```python, ```py or a bare ```): the last one that defines
  `entry_point` if any does (models often show a usage example after the solution), else the
  last Python block. An unterminated fence (output cut by max_tokens) runs to the end. With no
  fence, a raw `def entry_point(...)` with the imports and helpers around it is taken, trimmed
  of trailing prose until it parses.

  Returns:
    The code (not checked for correctness; a block without `def entry_point` is the body that
    continues the prompt, which the sandbox handles), or None when there is no code. Reasoning
    blocks (`strip_reasoning`) are removed first: code drafted while thinking is not the answer.
  """
  text = strip_reasoning(text)
  if not text:
    return None
  blocks = [m.group(2) for m in _FENCE.finditer(text) if m.group(1).lower() in _PYTHON_TAGS]
  blocks = [b for b in blocks if b.strip()]
  if blocks:
    defining = [b for b in blocks if defines(b, entry_point)]
    return (defining or blocks)[-1].rstrip() + "\n"
  lines = text.splitlines()
  def_line = next((i for i, ln in enumerate(lines)
                   if re.match(rf"\s*(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", ln)), None)
  if def_line is None:
    return None
  start = def_line
  code_start = re.compile(r"^(?:from\s+\S+\s+import|import\s|def\s|async\s+def\s|class\s|@|#)")
  while start > 0 and (code_start.match(lines[start - 1]) or not lines[start - 1].strip()):
    start -= 1
  while start < def_line and not lines[start].strip():
    start += 1
  end = len(lines)
  # Trim trailing prose a line at a time (bounded: a model's answer is not a long program).
  while end > max(def_line + 1, len(lines) - 400):
    candidate = "\n".join(lines[start:end])
    if _parses(candidate):
      return candidate.rstrip() + "\n"
    end -= 1
  candidate = "\n".join(lines[start:])
  return candidate.rstrip() + "\n"

"""The behaviour model of the simulated pool: who answers what, right or wrong, and how long.

A request becomes a reply in five steps, each a pure function of (server seed, model, messages,
sampling parameters, sample index):

1. read the request (`reading.read_request`): item, role, step-by-step request, other agents' blocks;
2. own competence: p = sigmoid(theta[model, benchmark] - b[item] + fit[role, domain]
   + cot[domain] * asks_step_by_step)  (item response theory, 1PL);
3. own answer: correct iff Phi(z) < p with z = sqrt(rho(T)) z_persist(model, item)
   + sqrt(1 - rho(T)) z_sample(request), so the marginal accuracy is p at every temperature while
   low-temperature samples agree more; a wrong answer is a plausible one (distractor, near-miss,
   mutant) chosen with the same correlated construction;
4. context: other agents' answers are votes; the model adopts the majority with a probability
   that grows with agreement and falls with its own competence (`params.ADOPT_MAX` ...);
5. render the text in the benchmark's format (`render`), count tokens, add hidden reasoning.

See docs/simulator.md for every parameter and its source.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import gzip
import json
import math
from typing import Mapping, Sequence

import numpy as np

from hieramas_jax.benchmarks.data import BENCHMARKS, LETTERS, Item, load_items
from hieramas_jax.llm.registry import MODELS
from hieramas_jax.paths import DATA_DIR
from hieramas_jax.sim import params as P
from hieramas_jax.sim import reading, render
from hieramas_jax.sim.calibration_targets import sigmoid
from hieramas_jax.sim.hashing import inv_phi, messages_fingerprint, normals, phi, seed_int, uniforms

SIM_DATA_DIR = DATA_DIR / "sim"
THETA_PATH = SIM_DATA_DIR / "theta.json"
MATH_WRONG_PATH = SIM_DATA_DIR / "math_wrong.json"
MUTANTS_PATH = SIM_DATA_DIR / "humaneval_mutants.json.gz"


class SimDataError(RuntimeError):
  """A precomputed sim artefact is missing or does not match the benchmark data."""


# MMLU subjects on which a math role also fits (the role is about the item's actual content).
_MMLU_MATH_SUBJECTS = ("math", "algebra", "statistics")


def item_difficulty(item: Item) -> float:
  """b[item]: fixed for the simulated world (DIFFICULTY_SEED), independent of the server seed."""
  rng = np.random.default_rng(seed_int("difficulty", P.DIFFICULTY_SEED, item.benchmark, item.id))
  if item.benchmark == "math":
    return P.MATH_LEVEL_SLOPE * (int(item.meta["level"]) - 3) + P.MATH_LEVEL_NOISE * rng.normal()
  return P.LATENT_DIFFICULTY_SIGMA[item.benchmark] * rng.normal()


def all_difficulties(benchmark: str) -> np.ndarray:
  return np.array([item_difficulty(it) for it in load_items(benchmark)])


def role_fit(role: str | None, item: Item) -> float:
  """+ROLE_FIT when the role's domain matches the item's, -ROLE_FIT when not, 0 without one."""
  domain = reading.role_domain(role)
  if domain is None:
    return 0.0
  if domain == item.domain:
    return P.ROLE_FIT
  if domain == "math" and item.benchmark == "mmlu_redux" and any(
      s in item.meta.get("subject", "") for s in _MMLU_MATH_SUBJECTS):
    return P.ROLE_FIT
  return -P.ROLE_FIT


def count_tokens(text: str) -> int:
  """Approximate BPE token count (~4 characters per token)."""
  return int(math.ceil(len(text) / P.CHARS_PER_TOKEN))


def prompt_tokens(messages: Sequence[dict]) -> int:
  return sum(count_tokens(m["content"]) + P.MESSAGE_OVERHEAD_TOKENS for m in messages) \
      + P.REPLY_PRIMING_TOKENS


@dataclasses.dataclass(frozen=True)
class Reply:
  """What the server turns into a chat completion.

  Attributes:
    text: visible message content (before any max_tokens truncation).
    reasoning_tokens: hidden reasoning tokens (reasoning models only).
    item_id: recognised item, or None (generic answer); for debugging and tests only, never sent.
    correct_drawn: whether the model's own draw was correct (None for generic answers).
    adopted: whether the answer was taken from the context's majority.
    p_correct: the model's own probability of a correct answer.
  """

  text: str
  reasoning_tokens: int
  item_id: str | None = None
  correct_drawn: bool | None = None
  adopted: bool = False
  p_correct: float | None = None


class BehaviourModel:
  """Loads everything once; `reply(...)` is then pure and does no I/O."""

  def __init__(self, seed: int = 0):
    self.seed = int(seed)
    self.index = reading.ItemIndex()
    self.theta = _load_theta()
    self.math_wrong = _load_math_wrong()
    self.mutants = _load_mutants()
    self.difficulty: dict[tuple[str, str], float] = {
        (it.benchmark, it.id): item_difficulty(it) for b in BENCHMARKS for it in load_items(b)}
    self._strata = {(m, b): _stratified_normals(self.seed, m, b, self.difficulty)
                    for m in MODELS for b in BENCHMARKS}
    for it in load_items("humaneval_plus"):
      if it.id not in self.mutants or not self.mutants[it.id]:
        raise SimDataError(f"no HumanEval+ mutant for {it.id}; rebuild with "
                           f"`python -m hieramas_jax.sim.build_mutants`")
    for it in load_items("math"):
      if not self.math_wrong.get(it.id):
        raise SimDataError(f"no MATH near-miss for {it.id}; rebuild with "
                           f"`python -m hieramas_jax.sim.build_math_wrong`")

  # ---- the steps -----------------------------------------------------------------------------

  def p_correct(self, model: str, item: Item, view: reading.RequestView) -> float:
    logit = (self.theta[model][item.benchmark] - self.difficulty[(item.benchmark, item.id)]
             + role_fit(view.role, item)
             + (P.COT_LOGIT_GAP[item.domain] if view.asks_step_by_step else 0.0))
    return sigmoid(logit)

  def reply(self, model: str, messages: Sequence[dict], temperature: float | None,
            top_p: float | None, sample_index: int) -> Reply:
    """The model's answer to one request. Pure: same inputs, same reply."""
    view = reading.read_request(messages)
    fingerprint = messages_fingerprint(list(messages))
    temp = P.DEFAULT_TEMPERATURE if temperature is None else float(temperature)
    # One digest per request: u[0] correctness, u[1] which wrong answer, u[2] adoption,
    # u[3] wording, u[4] reasoning length.
    u = uniforms("sample", self.seed, model, fingerprint, temp, top_p, sample_index)
    found = self.index.recognise(view.query_text)
    if found is None:
      text = render.generic_answer(view.query_text or fingerprint.decode("utf-8", "replace"),
                                   P.BEHAVIOUR[model].verbosity)
      return Reply(text, self._reasoning_tokens(model, "generic", 0.0, inv_phi(u[4])))
    item = found.item
    p_self = self.p_correct(model, item, view)
    r = P.rho(temp)
    zp = self._persistent(model, item)
    z_correct = math.sqrt(r) * zp[0] + math.sqrt(1.0 - r) * inv_phi(u[0])
    correct = phi(z_correct) < p_self
    u_wrong = phi(math.sqrt(r) * zp[1] + math.sqrt(1.0 - r) * inv_phi(u[1]))
    answer = self._gold(item) if correct else self._wrong(item, u_wrong)
    adopted = False
    votes = [v for v in (self._vote(item, b) for b in view.context_blocks) if v is not None]
    if votes and view.kind != "single":
      key_fn = reading.code_key if item.benchmark == "humaneval_plus" else reading.math_key
      majority, share = _majority(votes, answer, key_fn)
      p_adopt = P.p_adopt(view.kind, len(votes), share, p_self,
                          view.context_chars / P.CHARS_PER_TOKEN)
      if u[2] < p_adopt and majority != answer:
        answer, adopted = majority, True
    sentences = P.SENTENCES[item.domain][1 if view.asks_step_by_step else 0]
    n_sent = int(round(sentences * P.BEHAVIOUR[model].verbosity))
    text = render.answer_text(item, answer, n_sent, adopted, u[3])
    reasoning = self._reasoning_tokens(model, item.domain,
                                       self.difficulty[(item.benchmark, item.id)], inv_phi(u[4]))
    return Reply(text, reasoning, item.id, correct, adopted, p_self)

  @functools.lru_cache(maxsize=1 << 16)
  def _persistent(self, model: str, item: Item) -> tuple[float, float]:
    """z_persist(model, item) for correctness and for the choice of wrong answer."""
    z = normals("persist", self.seed, model, item.benchmark, item.id)
    return self._strata[(model, item.benchmark)][item.id], z[1]

  # ---- answers -------------------------------------------------------------------------------

  def _gold(self, item: Item) -> str:
    if item.benchmark == "humaneval_plus":
      return item.question + item.answer
    return item.answer

  def _wrong(self, item: Item, u: float) -> str:
    if item.benchmark == "mmlu_redux":
      wrong = [c for c in LETTERS if c != item.answer]
      g = normals("distractor", self.seed, item.id)[:3]
      weights = [math.exp(P.DISTRACTOR_SPREAD * x) for x in g]
      return _pick(wrong, weights, u)
    options = self.math_wrong[item.id] if item.benchmark == "math" else self.mutants[item.id]
    return _pick(options, P.LISTED_WRONG_WEIGHTS[:len(options)], u)

  def _vote(self, item: Item, block: str) -> str | None:
    """The answer an agent's block commits to, as an answer this model could output."""
    if item.benchmark == "mmlu_redux":
      return reading.mmlu_vote(block)
    if item.benchmark == "math":
      boxed = reading.last_boxed(block)
      return boxed.strip() if boxed else None
    return reading.code_block(block)

  def _reasoning_tokens(self, model: str, domain: str, b: float, z: float) -> int:
    mean = P.BEHAVIOUR[model].reasoning_tokens[domain]
    if mean <= 0:
      return 0
    return int(round(mean * math.exp(P.REASONING_DIFFICULTY_SLOPE * b + P.REASONING_SIGMA * z)))


def _stratified_normals(seed: int, model: str, benchmark: str,
                        difficulty: Mapping[tuple[str, str], float]) -> dict[str, float]:
  """z_persist(model, item) for correctness, stratified within blocks of similar difficulty."""
  items = sorted(load_items(benchmark), key=lambda it: (difficulty[(benchmark, it.id)], it.id))
  rng = np.random.default_rng(seed_int("persist-strata", seed, model, benchmark))
  out: dict[str, float] = {}
  for start in range(0, len(items), P.STRATUM_SIZE):
    block = items[start:start + P.STRATUM_SIZE]
    k = len(block)
    grid = (rng.permutation(k) + rng.random(k)) / k
    for it, u in zip(block, grid):
      out[it.id] = inv_phi(min(max(float(u), 1e-12), 1 - 1e-12))
  return out


def _majority(votes: list[str], prefer: str, key_fn) -> tuple[str, float]:
  """Most common vote (by normal form) and its share; ties go to `prefer`, then to the first."""
  counts = collections.Counter(key_fn(v) for v in votes)
  first: dict[str, str] = {}
  for v in votes:
    first.setdefault(key_fn(v), v)
  top = max(counts.values())
  leaders = [k for k in first if counts[k] == top]
  pref = key_fn(prefer)
  key = pref if pref in leaders else leaders[0]
  # Adopting an answer equal to one's own (in normal form) is no change.
  chosen = prefer if key == pref else first[key]
  return chosen, top / len(votes)


def _pick(options: Sequence[str], weights: Sequence[float], u: float) -> str:
  total = sum(weights)
  acc = 0.0
  for opt, w in zip(options, weights):
    acc += w / total
    if u < acc:
      return opt
  return options[-1]


# ---- artefacts ---------------------------------------------------------------------------------


def _load_json(path, what: str, command: str):
  if not path.exists():
    raise SimDataError(f"{what} missing at {path}; build it with `{command}`")
  opener = gzip.open if path.suffix == ".gz" else open
  with opener(path, "rt", encoding="utf-8") as f:
    return json.load(f)


def _load_theta() -> dict[str, dict[str, float]]:
  data = _load_json(THETA_PATH, "fitted competences", "python -m hieramas_jax.sim.fit_theta")
  theta = data["theta"]
  missing = [m for m in MODELS if m not in theta or set(theta[m]) != set(BENCHMARKS)]
  if missing:
    raise SimDataError(f"{THETA_PATH} lacks competences for {missing}; rerun "
                       f"`python -m hieramas_jax.sim.fit_theta`")
  if data.get("difficulty_seed") != P.DIFFICULTY_SEED:
    raise SimDataError(f"{THETA_PATH} was fitted for another difficulty seed; rerun the fit")
  return theta


def _load_math_wrong() -> dict[str, list[str]]:
  data = _load_json(MATH_WRONG_PATH, "MATH near-misses", "python -m hieramas_jax.sim.build_math_wrong")
  return data["wrong"]


def _load_mutants() -> dict[str, list[str]]:
  data = _load_json(MUTANTS_PATH, "HumanEval+ mutants", "python -m hieramas_jax.sim.build_mutants")
  return data["mutants"]


def theta_table() -> Mapping[str, Mapping[str, float]]:
  return _load_theta()

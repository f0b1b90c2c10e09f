"""The sim's aggregation mechanism on synthetic item populations, vectorised (for fitting it).

Fitting the aggregation parameters on published rows needs thousands of evaluations; running real
methods through the server for each would take hours on two cores. This module reproduces, in numpy,
the same draws the behaviour model makes (`model.BehaviourModel.reply`) on a synthetic benchmark
whose members have the published solo accuracies:

- item difficulty b ~ N(0, sigma_b); a model of solo accuracy a gets the theta with mean
  sigmoid(theta - b) = a (item response theory, as the sim);
- an attempt is correct iff Phi(sqrt(rho) z_persist + sqrt(1 - rho) z_sample) < sigmoid(theta - b),
  with z_persist shared by every sample of one model on one item (`params.rho`);
- a wrong attempt picks among `n_wrong` wrong answers with weights exp(shared g[item, k] + model
  h[model, item, k]) (`params.ERROR_SHARED_SPREAD`, `ERROR_MODEL_SPREAD`);
- a reader with candidates makes its own attempt, then the Luce choice of `params.Aggregation`
  (`luce_choice`; a test checks it against `BehaviourModel.choose` term by term);
- a vote is the plurality of the attempts, ties broken at random.

Answers are integers: 0 is the correct answer, 1..n_wrong the wrong ones.
"""

from __future__ import annotations

import dataclasses
import numpy as np
from scipy.special import expit, ndtr

from hieramas_jax.sim import params as P


@dataclasses.dataclass(frozen=True)
class Population:
  """A synthetic benchmark: `n_items` items, difficulty spread, wrong-answer pool and its spreads."""

  n_items: int = 20000
  sigma_b: float = 1.5
  n_wrong: int = 3
  shared_spread: float = 1.8
  model_spread: float = P.ERROR_MODEL_SPREAD
  seed: int = 0


class World:
  """One population's items and the persistent draws of each named model on them."""

  def __init__(self, pop: Population):
    self.pop = pop
    rng = np.random.default_rng([pop.seed, 104729])
    self.b = rng.normal(0.0, pop.sigma_b, pop.n_items)
    self.g = rng.normal(0.0, 1.0, (pop.n_items, pop.n_wrong))
    self._models: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    self._rng = rng

  def theta_for(self, accuracy: float) -> float:
    """The theta whose mean sigmoid(theta - b) over this population is `accuracy` (bisection)."""
    lo, hi = -15.0, 15.0
    for _ in range(60):
      mid = (lo + hi) / 2
      if expit(mid - self.b).mean() < accuracy:
        lo = mid
      else:
        hi = mid
    return (lo + hi) / 2

  def _model(self, name: str):
    """(z_persist for correctness, z_persist for the answer choice, h preferences) of a model."""
    if name not in self._models:
      n, k = self.pop.n_items, self.pop.n_wrong
      self._models[name] = (self._rng.normal(size=n), self._rng.normal(size=n), self._rng.normal(size=(n, k)))
    return self._models[name]

  def attempts(self, name: str, accuracy: float, n_samples: int, temperature: float,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(answers (items, n_samples), logits (items,)) of `n_samples` samples of model `name`."""
    zc, zw, h = self._model(name)
    logit = self.theta_for(accuracy) - self.b
    r = P.rho(temperature)
    n = self.pop.n_items
    e = rng.normal(size=(n, n_samples))
    correct = ndtr(np.sqrt(r) * zc[:, None] + np.sqrt(1 - r) * e) < expit(logit)[:, None]
    u = ndtr(np.sqrt(r) * zw[:, None] + np.sqrt(1 - r) * rng.normal(size=(n, n_samples)))
    w = np.exp(self.pop.shared_spread * self.g + self.pop.model_spread * h)
    cum = np.cumsum(w / w.sum(axis=1, keepdims=True), axis=1)
    wrong = 1 + np.minimum((u[:, :, None] >= cum[:, None, :]).sum(axis=2), self.pop.n_wrong - 1)
    return np.where(correct, 0, wrong), logit


def luce_choice(agg: P.Aggregation, own: np.ndarray, candidates: np.ndarray, own_logit: np.ndarray,
                context_tokens: float, u: np.ndarray, n_answers: int, u_lapse: np.ndarray | None = None) -> np.ndarray:
  """The reader's final answer per item: `Aggregation.luce_weight` over the distinct answers present, or
  its own attempt where it lapses (`Aggregation.lapse`; every synthetic answer is placed).

  Args:
    own: (items,) the reader's own attempt. candidates: (items, n) answers in its prompt.
    own_logit: (items,) the reader's logit. u: (items,) uniforms. n_answers: 1 + n_wrong.
    u_lapse: (items,) uniforms of the lapse (None: no lapse drawn, as with lapse_max 0).
  """
  n = own.shape[0]
  counts = np.zeros((n, n_answers))
  np.add.at(counts, (np.repeat(np.arange(n), candidates.shape[1]), candidates.ravel()), 1.0)
  own_hot = np.zeros((n, n_answers))
  own_hot[np.arange(n), own] = 1.0
  p_self = expit(own_logit)
  kappa = (agg.recognition_max * expit(own_logit + agg.recognition_gap)
           / (1.0 + context_tokens / agg.dilution_tokens))
  support = counts + own_hot * (agg.self_weight + agg.self_confidence * p_self)[:, None]
  w = np.where(support > 0, np.power(np.maximum(support, 1e-300), agg.support_power), 0.0)
  w[:, 0] *= np.exp(kappa)
  cum = np.cumsum(w / w.sum(axis=1, keepdims=True), axis=1)
  chosen = np.minimum((u[:, None] >= cum).sum(axis=1), n_answers - 1)
  if u_lapse is None:
    return chosen
  return np.where(u_lapse < agg.lapse_max * (1.0 - p_self), own, chosen)


def vote(answers: np.ndarray, u: np.ndarray, n_answers: int) -> np.ndarray:
  """Plurality of each row of `answers` (items, n); ties broken by `u` uniformly among the tied."""
  n = answers.shape[0]
  counts = np.zeros((n, n_answers))
  np.add.at(counts, (np.repeat(np.arange(n), answers.shape[1]), answers.ravel()), 1.0)
  top = counts == counts.max(axis=1, keepdims=True)
  cum = np.cumsum(top / top.sum(axis=1, keepdims=True), axis=1)
  return np.minimum((u[:, None] >= cum).sum(axis=1), n_answers - 1)


def accuracy(answers: np.ndarray) -> float:
  """Percent correct (answer 0)."""
  return 100.0 * float(np.mean(answers == 0))


__all__ = ["Population", "World", "luce_choice", "vote", "accuracy"]

"""Every HieraMAS hyperparameter in one frozen record (a run is defined by it; nothing hides in code).

Defaults are the reference code's values where the paper is silent (shared/REFERENCE.md), except the
stage-1 recipe (steps, batch, samples per query, lr, entropy, temperature, skip prior, credit of
on/off decisions), which is what learned on the simulated pool (docs/learn.md gives the measurements);
`experiments/ablations/reference_stage1.flags` restores the reference's stage-1 values. The entry
point `experiments/train_hieramas.py` exposes each field as a flag of the same name.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hieramas_jax.benchmarks.data import check_benchmark
from hieramas_jax.llm.registry import get_pool

# How the graph of a test query is chosen (the "w/o Graph" ablation replaces the classifier).
GRAPH_MODES = ("classifier", "random_vote")
# How the LLM of every position is chosen (the "w/o LLM Selection" ablation: the strong model everywhere).
LLM_MODES = ("policy", "strong")
SELECT_BY = ("accuracy", "reward")
ACTIVATION_CREDIT = ("system", "role")

# Reference graph-pool sizes per benchmark (MMLU 200, MATH 100; HumanEval: not given, we use 100).
DEFAULT_K = {"mmlu_redux": 200, "math": 100, "humaneval_plus": 100}


class HieraMASConfigError(ValueError):
  """A HieraMAS configuration that describes no valid run."""


@dataclasses.dataclass(frozen=True)
class HieraMASConfig:
  """One HieraMAS run.

  Attributes:
    benchmark: which benchmark's roles and data.
    pool: the Table 1 setting (`gpt-5-mini` or `qwen3-80b`): the LLMs the policy may pick and the
      decision node's model (the setting's strong backbone).
    num_proposers: W, proposer positions per supernode (paper: 2).
    k_pool: K candidate graphs scored at inference (0: the benchmark's reference value).
    pool_min_density, pool_max_density: density range of the inference pool's random DAGs.
    seed: the one seed every key and data order comes from.
    encoder: sentence-transformers model ("all-MiniLM-L6-v2" = the bundled, checksummed weights).
    policy_hidden: width of the policy's slot/key spaces.
    policy_skip_logit_init: initial learned bias on the skip logit (reference 0; > 0 starts
      exploring sparse, cheap configurations where the reward still sees cost; see learn/policy.py).
    stage1_steps, stage1_batch: REINFORCE updates and queries per update.
    stage1_samples: configurations sampled per query in each update (>= 2: leave-one-out baseline
      over them; 1: per-role moving-average baseline). Each update runs stage1_batch x stage1_samples MAS.
    stage1_lr, stage1_weight_decay, stage1_clip: AdamW and gradient clip (reference lr 1e-3).
    stage1_entropy: entropy bonus beta (reference 1.0).
    stage1_tau_start, stage1_tau_end: cosine temperature schedule (reference 10 -> 0.8; default constant 1).
    stage1_min_density, stage1_max_density: random training graphs (reference 0.3-0.7).
    stage1_val_every: validate the greedy policy every n steps (and after the last).
    stage1_checkpoint_every: save the latest state every n steps (resume granularity).
    stage1_select_by: best checkpoint by mean validation system "reward" (default: the paper's
      objective, utility minus cost) or by validation "accuracy" (the reference code; ties broken by
      mean reward).
    alpha: node-level weight of checkable roles' rewards (reference 0.5).
    activation_credit: what credits a synthesizer's on/off (the role's activation): "system" (the
      system-level reward; the model choice given "on" keeps the role's mixed reward) or "role" (the
      reference: the role's mixed reward credits the whole choice). See learn/stage1.py.
    reward_k: cost scale k of the reward shape (reference 300, cost in USD).
    stage2_graphs: random graphs run per training query (reference 5).
    stage2_min_density, stage2_max_density: their density range (reference 0.3-1.0).
    stage2_top_k: positives per query (reference 2, reward > 0).
    stage2_drop_ties: leave out queries whose graphs all earned the same reward (no contrast to
      learn from; the reference labels them all, which calls every such graph positive).
    stage2_epochs, stage2_lr, stage2_batch, stage2_patience, stage2_val_fraction: classifier training.
    gcn_hidden, gcn_dropout: classifier width and dropout (reference 128, 0.5).
    graph_mode: "classifier" (HieraMAS) or "random_vote" (w/o Graph: three random pool graphs, majority
      vote over their answers).
    vote_graphs: graphs of the random_vote mode (paper: 3).
    llm_mode: "policy" (HieraMAS) or "strong" (w/o LLM Selection: the setting's strong model at every
      proposer and synthesizer position, no skips, on the classifier's G*).
    max_queries: most MAS runs in flight at once during training rollouts.
  """

  benchmark: str = "mmlu_redux"
  pool: str = "gpt-5-mini"
  num_proposers: int = 2
  k_pool: int = 0
  pool_min_density: float = 0.0
  pool_max_density: float = 1.0
  seed: int = 0
  encoder: str = "all-MiniLM-L6-v2"
  policy_hidden: int = 128
  policy_skip_logit_init: float = 4.0
  stage1_steps: int = 100
  stage1_batch: int = 16
  stage1_samples: int = 4
  stage1_lr: float = 1e-2
  stage1_weight_decay: float = 1e-5
  stage1_clip: float = 1.0
  stage1_entropy: float = 0.01
  stage1_tau_start: float = 1.0
  stage1_tau_end: float = 1.0
  stage1_min_density: float = 0.3
  stage1_max_density: float = 0.7
  stage1_val_every: int = 10
  stage1_checkpoint_every: int = 5
  stage1_select_by: str = "reward"
  alpha: float = 0.5
  activation_credit: str = "system"
  reward_k: float = 300.0
  stage2_graphs: int = 5
  stage2_min_density: float = 0.3
  stage2_max_density: float = 1.0
  stage2_top_k: int = 2
  stage2_drop_ties: bool = True
  stage2_epochs: int = 20
  stage2_lr: float = 5e-4
  stage2_batch: int = 32
  stage2_patience: int = 5
  stage2_val_fraction: float = 0.2
  gcn_hidden: int = 128
  gcn_dropout: float = 0.5
  graph_mode: str = "classifier"
  vote_graphs: int = 3
  llm_mode: str = "policy"
  max_queries: int = 32

  def __post_init__(self):
    check_benchmark(self.benchmark)
    get_pool(self.pool)
    positive = ("num_proposers", "stage1_batch", "stage1_samples", "stage1_val_every", "stage1_checkpoint_every",
                "stage2_graphs", "stage2_top_k", "stage2_batch", "stage2_patience", "gcn_hidden", "policy_hidden",
                "vote_graphs", "max_queries")
    for name in positive:
      if getattr(self, name) < 1:
        raise HieraMASConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
    for name in ("k_pool", "stage1_steps", "stage2_epochs"):
      if getattr(self, name) < 0:
        raise HieraMASConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
    if 0 < self.k_pool < 4:
      raise HieraMASConfigError(f"k_pool must be 0 (reference value) or >= 4 (3 reference graphs + random), "
                                f"got {self.k_pool}")
    for lo, hi in (("pool_min_density", "pool_max_density"), ("stage1_min_density", "stage1_max_density"),
                   ("stage2_min_density", "stage2_max_density")):
      a, b = getattr(self, lo), getattr(self, hi)
      if not 0.0 <= a <= b <= 1.0:
        raise HieraMASConfigError(f"need 0 <= {lo} <= {hi} <= 1, got {a}, {b}")
    if not 0.0 <= self.alpha <= 1.0:
      raise HieraMASConfigError(f"alpha must be in [0, 1], got {self.alpha}")
    if self.reward_k <= 0:
      raise HieraMASConfigError(f"reward_k must be > 0, got {self.reward_k}")
    if not 0.0 < self.stage2_val_fraction < 1.0:
      raise HieraMASConfigError(f"stage2_val_fraction must be in (0, 1), got {self.stage2_val_fraction}")
    if not 0.0 <= self.gcn_dropout < 1.0:
      raise HieraMASConfigError(f"gcn_dropout must be in [0, 1), got {self.gcn_dropout}")
    if self.stage1_tau_end <= 0 or self.stage1_tau_start <= 0:
      raise HieraMASConfigError("stage1 temperatures must be > 0")
    for name, value, allowed in (("graph_mode", self.graph_mode, GRAPH_MODES), ("llm_mode", self.llm_mode, LLM_MODES),
                                 ("stage1_select_by", self.stage1_select_by, SELECT_BY),
                                 ("activation_credit", self.activation_credit, ACTIVATION_CREDIT)):
      if value not in allowed:
        raise HieraMASConfigError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")

  @property
  def num_candidates(self) -> int:
    """K actually used: the flag, or the benchmark's reference value when the flag is 0."""
    return self.k_pool or DEFAULT_K[self.benchmark]

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  @classmethod
  def from_json(cls, data: dict[str, Any]) -> "HieraMASConfig":
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
      raise HieraMASConfigError(f"unknown HieraMAS config keys: {', '.join(unknown)}")
    return cls(**data)

  def training_fingerprint(self) -> dict[str, Any]:
    """The fields that determine the trained policy and classifier (inference-only fields left out).

    Two runs with the same fingerprint train the same models, so one may load the other's
    checkpoints (ablations that only change inference).
    """
    inference_only = {"k_pool", "pool_min_density", "pool_max_density", "graph_mode", "vote_graphs", "llm_mode",
                      "max_queries"}
    return {k: v for k, v in self.to_json().items() if k not in inference_only}

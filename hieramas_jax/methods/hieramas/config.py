"""Every HieraMAS hyperparameter in one frozen record (a run is defined by it; nothing hides in code).

Defaults are HieraMAS as published: the paper's text where it states a choice, and where it is silent
the public reference code (tianyao-aka/HieraMAS; docs/reference-differences.md):
its reward (system reward on the decision node's cost), credit (the role reward credits every choice
of the role), no skip prior, no baseline, hard Gumbel sampling, its per-benchmark budgets, learning
rates, validation cadence, densities, K, classifier settings and its inference rule (top-N rotation,
drop caps, consensus). Fields whose reference value depends on the benchmark default to a sentinel
(0, or -1 where 0 is a legal value) that `__post_init__` replaces by the benchmark's value
(`BENCHMARK_DEFAULTS`), so a recorded config always holds the values actually used.

This suite's earlier recipe (total-cost reward, skip prior, leave-one-out baseline, larger budget) is
the named variant `experiments/ablations/total_cost.flags`. The entry point
`experiments/train_hieramas.py` exposes each field as a flag of the same name.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hieramas_jax.benchmarks.data import check_benchmark
from hieramas_jax.errors import UserError
from hieramas_jax.llm.registry import UnknownModelError, get_model, get_pool

# How the graph of a test query is chosen (the "w/o Graph" ablation replaces the classifier).
GRAPH_MODES = ("classifier", "random_vote")
# How the LLM of every position is chosen (the "w/o LLM Selection" ablation: the strong model everywhere).
LLM_MODES = ("policy", "strong")
SELECT_BY = ("accuracy", "reward")
ACTIVATION_CREDIT = ("system", "role")
SYSTEM_COST = ("decision", "total")
# "gumbel": the reference's hard Gumbel argmax (a draw from softmax(logits), tau only in log-probabilities
# and entropy); "tempered": a draw from softmax(logits / tau).
SAMPLING = ("gumbel", "tempered")
# With one sample per query: "none" (the reference: raw rewards) or "moving_average" (per-role EMA).
BASELINES = ("none", "moving_average")
# "rotation": the reference's top-N rotation with drop caps; "greedy": argmax per position, skip included.
INFERENCE = ("rotation", "greedy")
# The graph stage 1 validates on: "full" (the reference's run_validation: every forward edge, index order)
# or "random" (one seeded random DAG per validation query, the suite's earlier rule; the total-cost variant).
VAL_GRAPHS = ("full", "random")
# What the consensus override compares (rollout.consensus_index): the roles' whole "text" (reference) or
# their extracted "answer" (the suite's earlier rule).
CONSENSUS_MATCH = ("text", "answer")
# Which policy positions the rotation reads (policy.rotation_choices): the reference's, indexed by the
# inference W, or the trained synthesizer position ("last").
AGGREGATOR_SLOTS = ("reference", "last")
# The policy's head (learn/policy.py HEADS): "pair_mlp" (the reference's compute_logits: an MLP over each
# (position, LLM) pair) or "dot" (this suite's earlier dot product of projections; the total-cost variant).
POLICY_HEADS = ("pair_mlp", "dot")
# Where a test query's K candidates come from: "per_query" (the reference: K random DAGs drawn for each
# query, seeded by the run seed and the item id) or "shared" (one seeded pool for the whole test split:
# K - 3 random DAGs over sparse/medium/dense bands plus chain, star and full; the total-cost variant).
GRAPH_POOLS = ("per_query", "shared")
# Which prompts HieraMAS's MAS runs send (methods/hieramas/prompts.py): "suite" (mas/roles.py, shared with every
# method) or "reference" (the reference code's own worker, synthesizer and decision prompts).
PROMPT_SETS = ("suite", "reference")
# The texts the policy reads (methods/hieramas/policy_inputs.py): "suite" (policy.query_role_text with the suite's role
# descriptions) or "reference" (the reference selector's task+role text with its own role descriptions).
POLICY_INPUTS = ("suite", "reference")
CHOICES = {"graph_mode": GRAPH_MODES, "prompt_set": PROMPT_SETS, "policy_inputs": POLICY_INPUTS, "graph_pool": GRAPH_POOLS,
           "llm_mode": LLM_MODES,
           "stage1_select_by": SELECT_BY,
           "activation_credit": ACTIVATION_CREDIT, "system_cost": SYSTEM_COST, "stage1_sampling": SAMPLING,
           "stage1_baseline": BASELINES, "inference": INFERENCE, "policy_head": POLICY_HEADS,
           "stage1_val_graph": VAL_GRAPHS, "consensus_match": CONSENSUS_MATCH,
           "aggregator_slot": AGGREGATOR_SLOTS}

# Reference graph-pool sizes per benchmark (reference scripts: MMLU 200, MATH 100, HumanEval 200).
DEFAULT_K = {"mmlu_redux": 200, "math": 100, "humaneval_plus": 200}

# The reference's per-benchmark values (experiments_v2/<benchmark>/bash/*.sh and the run scripts'
# defaults), filled into fields left at their sentinel (`_SENTINEL`).
BENCHMARK_DEFAULTS: dict[str, dict[str, Any]] = {
    "stage1_batch": {"mmlu_redux": 4, "math": 6, "humaneval_plus": 6},
    "stage1_lr": {"mmlu_redux": 5e-3, "math": 2e-3, "humaneval_plus": 2e-3},
    "stage1_lr_end": {"mmlu_redux": 2e-3, "math": 2e-3, "humaneval_plus": 2e-3},
    "stage1_val_every": {"mmlu_redux": 3, "math": 2, "humaneval_plus": 2},
    "stage1_max_density": {"mmlu_redux": 0.7, "math": 0.7, "humaneval_plus": 0.75},
    "stage1_proposers": {"mmlu_redux": 6, "math": 0, "humaneval_plus": 0},  # 0: num_proposers
    "stage2_max_density": {"mmlu_redux": 0.7, "math": 1.0, "humaneval_plus": 0.8},
    "stage2_lr": {"mmlu_redux": 1e-3, "math": 5e-4, "humaneval_plus": 5e-4},
    "stage2_batch": {"mmlu_redux": 128, "math": 32, "humaneval_plus": 32},
    "gcn_dropout": {"mmlu_redux": 0.05, "math": 0.5, "humaneval_plus": 0.5},
    "stage2_weight_decay": {"mmlu_redux": 2e-5, "math": 1e-5, "humaneval_plus": 1e-5},
    # Roles the inference rule may drop where skip is their argmax (graph/learnable_multi_node_graph.py).
    "max_dropped_roles": {"mmlu_redux": 2, "math": 0, "humaneval_plus": 0},
}
# The value of a field that means "the benchmark's reference value".
_SENTINEL = {"stage1_batch": 0, "stage1_lr": 0.0, "stage1_lr_end": 0.0, "stage1_val_every": 0,
             "stage1_max_density": -1.0, "stage1_proposers": -1, "stage2_max_density": -1.0, "stage2_lr": 0.0,
             "stage2_batch": 0, "gcn_dropout": -1.0, "max_dropped_roles": -1, "stage2_weight_decay": -1.0}


# Fields added after the committed results, with the value those results ran with: `HieraMAS.describe()` leaves
# them out while they hold it, so the run directories of the committed results stay valid (their config.json
# has no such key) until the next full rerun records them.
UNRECORDED_AT_DEFAULT: dict[str, Any] = {"prompt_set": "suite", "task_metadata": False, "policy_inputs": "suite",
                                         "exclude_llms": ""}


# This suite's earlier recipe, beyond the paper: the named variant "hieramas_total_cost" (Table 1 row
# "HieraMAS (total-cost reward)") and `experiments/ablations/total_cost.flags` (a test keeps them equal).
TOTAL_COST_RECIPE: dict[str, Any] = {
    "system_cost": "total", "activation_credit": "system", "stage1_mask_unused": True, "policy_skip_logit_init": 4.0,
    "policy_head": "dot", "policy_hidden": 128, "stage1_val_graph": "random",
    "stage1_samples": 4, "stage1_sampling": "tempered", "stage1_tau_start": 1.0, "stage1_tau_end": 1.0,
    "stage1_lr": 1e-2, "stage1_lr_end": 1e-2, "stage1_entropy": 0.01, "stage1_steps": 100, "stage1_batch": 16,
    "stage1_val_every": 10, "stage1_proposers": 0, "stage1_max_density": 0.7, "stage1_select_by": "reward",
    "consensus": False, "inference": "greedy", "graph_pool": "shared", "pool_min_density": 0.0,
    "pool_max_density": 1.0,
    "stage2_max_density": 1.0, "stage2_lr": 5e-4, "stage2_weight_decay": 1e-5,
    "stage2_batch": 32, "gcn_dropout": 0.5,
}


class HieraMASConfigError(UserError, ValueError):
  """A HieraMAS configuration that describes no valid run."""


@dataclasses.dataclass(frozen=True)
class HieraMASConfig:
  """One HieraMAS run.

  Attributes:
    benchmark: which benchmark's roles and data.
    pool: the Table 1 setting (`gpt-5-mini` or `qwen3-80b`): the LLMs the policy may pick and the
      decision node's model (the setting's strong backbone).
    num_proposers: W, proposer positions per supernode at inference (paper: 2).
    stage1_proposers: W during stage 1 and stage-2 data collection (reference: 6 on MMLU-Redux, else W;
      -1: the benchmark's value, 0: num_proposers). The policy has stage1_proposers + 1 positions; the
      rotation rule fills any inference W from one proposer position's top-N.
    k_pool: K candidate graphs scored at inference (0: the benchmark's reference value).
    graph_pool: "per_query" (reference: K random DAGs drawn for each test query, key
      fold_in(fold_in(key(seed), INFERENCE_TAG), crc32(item id)); duplicates of an earlier candidate are
      masked out, as the reference keeps only distinct graphs) or "shared" (one pool for the whole split:
      K - 3 random DAGs over sparse/medium/dense bands plus chain, star and full).
    pool_min_density: lower end of the per-query density range of the inference pool's random DAGs
      (reference 0.3).
    pool_max_density: upper end of that range (reference 0.7).
    seed: the one seed every key and data order comes from.
    encoder: sentence-transformers model ("all-MiniLM-L6-v2" = the bundled, checksummed weights).
    prompt_set: the prompts of every MAS call HieraMAS makes: "suite" (mas/roles.py, every method's) or
      "reference" (the reference code's own, per benchmark: methods/hieramas/prompts.py).
    task_metadata: the reference's task metadata: one call per query to the setting's strong model (the
      reference: gpt-4o-mini) writes JSON metadata (`utils/task_cache.py`), whose formatted text is embedded
      and fed to the policy beside the query-role embedding (methods/hieramas/metadata.py); paid, cached
      and counted like any other call.
    policy_inputs: the texts whose embeddings the policy reads: "suite" ("Role: {role}. {description}\nQuery:
      {query}" with the suite's role descriptions) or "reference" (the reference selector's "Task: {task}\n\nRole:
      {role}\n{description}" with its own role descriptions: methods/hieramas/policy_inputs.py).
    exclude_llms: pool models the policy never chooses, comma-separated (empty: none, the paper's choice; the
      reference's stage-1 scripts exclude deepseek-r1-14b): their logits are masked in sampling, greedy choice
      and the rotation, as the reference's `excluded_llm_indices` are; stored in pool order.
    policy_head: "pair_mlp" (reference `compute_logits`: an MLP scores every (position, LLM) pair) or "dot"
      (the suite's earlier dot product of slot and key projections; the total-cost variant keeps it).
    policy_hidden: width of the policy's slot/key spaces and of the pair MLP (reference 256).
    policy_skip_logit_init: initial learned bias on the skip logit (reference 0; > 0 starts
      exploring sparse, cheap configurations; see learn/policy.py).
    stage1_steps: REINFORCE updates of stage 1 (reference 12 iterations).
    stage1_batch: training queries per update (reference 4 on MMLU-Redux, 6 on MATH and HumanEval+; 0:
      the benchmark's value).
    stage1_samples: configurations sampled per query in each update (>= 2: leave-one-out baseline
      over them; 1: stage1_baseline). Each update runs stage1_batch x stage1_samples MAS.
    stage1_baseline: with one sample per query, "none" (reference) or "moving_average" (per role).
    stage1_sampling: "gumbel" (reference: hard Gumbel argmax, tau only in the log-probabilities and
      entropy) or "tempered" (draws from softmax(logits / tau)).
    stage1_mask_unused: leave the proposers of a skipped role out of the gradient (they were never
      called); the reference credits them with the role reward like every other choice.
    stage1_lr: AdamW step size at the first step, a cosine down to stage1_lr_end over the first half of the
      steps, then flat (the reference's shape; reference values:
      MMLU-Redux 5e-3, MATH and HumanEval+ 2e-3; 0: the benchmark's value).
    stage1_lr_end: step size at the last step (reference 2e-3; 0: the benchmark's value, or with an
      explicit stage1_lr: constant).
    stage1_weight_decay: AdamW weight decay (reference 1e-5).
    stage1_clip: gradient clip by global norm (reference 1.0).
    stage1_entropy: entropy bonus beta (reference 1.0).
    stage1_tau_start: temperature at the first step of the cosine schedule (reference 10).
    stage1_tau_end: temperature at the last step (reference 0.8).
    stage1_min_density: lower density of stage 1's random training graphs (reference 0.3).
    stage1_max_density: upper density of those graphs (reference 0.7, HumanEval+ 0.75; -1: the
      benchmark's value).
    stage1_val_every: validate the greedy policy every n steps and after the last (reference 3 on
      MMLU-Redux, 2 otherwise; 0: the benchmark's value).
    stage1_val_graph: the graph of stage 1's validation runs: "full" (reference `run_validation`: the fully
      connected DAG in index order) or "random" (one seeded random DAG per validation query).
    stage1_checkpoint_every: save the latest state every n steps (resume granularity).
    stage1_select_by: best checkpoint by mean validation system "reward" (the paper's objective,
      utility minus cost) or by validation "accuracy" (the reference code's best_valid_model; ties
      broken by mean reward).
    alpha: node-level weight of checkable roles' rewards (reference 0.5).
    system_cost: what the system reward charges: "decision" (reference: the decision node's cost; each
      role pays its own calls in its node reward; a skipped role earns 0.5 x system) or "total" (the
      query's total cost; a skipped role earns the full system reward). See learn/rewards.py.
    consensus: if every active role gives the same output, it is the final answer (reference).
    consensus_match: what "the same" compares: "text" (reference: the whole texts; the extracted code on
      HumanEval+) or "answer" (the extracted answers, as majority votes compare them).
    activation_credit: what credits a synthesizer's on/off (the role's activation): "role" (the
      reference: the role's mixed reward credits the whole choice) or "system" (the system-level
      reward; the model choice given "on" keeps the role's mixed reward). See learn/stage1.py.
    reward_k: cost scale k of the reward shape (reference 300, cost in USD; 0 ignores cost).
    inference: "rotation" (reference: proposers are the top-N LLMs of one proposer position, chosen at
      random per query and seeded, skip excluded; the synthesizer is the argmax with skip masked; roles
      are dropped only where skip is the argmax, at most max_dropped_roles) or "greedy" (argmax per
      position, skip included).
    rotation_top_n: N of the rotation (reference 2).
    aggregator_slot: which policy positions the rotation reads: "reference" (the proposer position among
      the first W, the synthesizer from position W: on MMLU-Redux, trained with W = 6, a worker position)
      or "last" (any proposer position; the trained synthesizer position).
    max_dropped_roles: the rotation's drop cap (reference: 2 on MMLU-Redux, 0 on MATH and HumanEval+;
      -1: the benchmark's value).
    stage2_graphs: random graphs run per training query (reference 5).
    stage2_min_density: lower density of stage 2's random graphs (reference 0.3).
    stage2_max_density: upper density of those graphs (reference 0.7 MMLU-Redux, 1.0 MATH, 0.8
      HumanEval+; -1: the benchmark's value).
    stage2_top_k: positives per query (reference 2, reward > 0).
    stage2_drop_ties: leave out queries whose graphs all earned the same reward (no contrast to
      learn from; the reference labels them all, which calls every such graph positive).
    stage2_epochs: most epochs of the classifier's training.
    stage2_lr: the classifier's AdamW step size (reference: MMLU-Redux 1e-3, MATH and HumanEval+ 5e-4;
      0: the benchmark's value).
    stage2_weight_decay: its AdamW weight decay (reference: MMLU-Redux 2e-5, MATH and HumanEval+ 1e-5;
      -1: the benchmark's value).
    stage2_batch: queries per classifier update (reference: MMLU-Redux 128, MATH and HumanEval+ 32; 0:
      the benchmark's value).
    stage2_patience: epochs without a better validation loss before training stops early.
    stage2_val_fraction: the share of stage-2 queries held out for the classifier's validation.
    gcn_hidden: the classifier's GCN width (reference 128).
    gcn_dropout: the classifier's dropout (reference 0.05 on MMLU-Redux, 0.5 otherwise; -1: the
      benchmark's value).
    graph_mode: "classifier" (HieraMAS) or "random_vote" (w/o Graph: vote_graphs of the query's candidates,
      majority vote over their answers; the reference's --random_graph is one graph, one run:
      vote_graphs = 1).
    vote_graphs: graphs of the random_vote mode (reference 1).
    llm_mode: "policy" (HieraMAS) or "strong" (w/o LLM Selection: the setting's strong model at every
      proposer and synthesizer position, on the classifier's G*; the rotation's drop rule still
      removes roles whose skip is the argmax, as the reference's --fixed_llm does).
    max_queries: most MAS runs in flight at once during training rollouts.
  """

  benchmark: str = "mmlu_redux"
  pool: str = "gpt-5-mini"
  num_proposers: int = 2
  stage1_proposers: int = -1
  k_pool: int = 0
  graph_pool: str = "per_query"
  pool_min_density: float = 0.3
  pool_max_density: float = 0.7
  seed: int = 0
  encoder: str = "all-MiniLM-L6-v2"
  prompt_set: str = "suite"
  task_metadata: bool = False
  policy_inputs: str = "suite"
  exclude_llms: str = ""
  policy_head: str = "pair_mlp"
  policy_hidden: int = 256
  policy_skip_logit_init: float = 0.0
  stage1_steps: int = 12
  stage1_batch: int = 0
  stage1_samples: int = 1
  stage1_baseline: str = "none"
  stage1_sampling: str = "gumbel"
  stage1_mask_unused: bool = False
  stage1_lr: float = 0.0
  stage1_lr_end: float = 0.0
  stage1_weight_decay: float = 1e-5
  stage1_clip: float = 1.0
  stage1_entropy: float = 1.0
  stage1_tau_start: float = 10.0
  stage1_tau_end: float = 0.8
  stage1_min_density: float = 0.3
  stage1_max_density: float = -1.0
  stage1_val_every: int = 0
  stage1_val_graph: str = "full"
  stage1_checkpoint_every: int = 5
  stage1_select_by: str = "accuracy"
  alpha: float = 0.5
  system_cost: str = "decision"
  consensus: bool = True
  consensus_match: str = "text"
  activation_credit: str = "role"
  reward_k: float = 300.0
  inference: str = "rotation"
  rotation_top_n: int = 2
  aggregator_slot: str = "reference"
  max_dropped_roles: int = -1
  stage2_graphs: int = 5
  stage2_min_density: float = 0.3
  stage2_max_density: float = -1.0
  stage2_top_k: int = 2
  stage2_drop_ties: bool = True
  stage2_epochs: int = 20
  stage2_lr: float = 0.0
  stage2_weight_decay: float = -1.0
  stage2_batch: int = 0
  stage2_patience: int = 5
  stage2_val_fraction: float = 0.2
  gcn_hidden: int = 128
  gcn_dropout: float = -1.0
  graph_mode: str = "classifier"
  vote_graphs: int = 1
  llm_mode: str = "policy"
  max_queries: int = 32

  def __post_init__(self):
    check_benchmark(self.benchmark)
    get_pool(self.pool)
    explicit_lr = self.stage1_lr != _SENTINEL["stage1_lr"]
    for name, sentinel in _SENTINEL.items():
      if getattr(self, name) == sentinel:
        value = BENCHMARK_DEFAULTS[name][self.benchmark]
        if name == "stage1_lr_end" and explicit_lr:  # an explicit start lr without an end: constant
          value = self.stage1_lr
        object.__setattr__(self, name, value)
    if self.stage1_proposers == 0:
      object.__setattr__(self, "stage1_proposers", self.num_proposers)
    positive = ("num_proposers", "stage1_proposers", "rotation_top_n", "stage1_batch", "stage1_samples",
                "stage1_val_every", "stage1_checkpoint_every",
                "stage2_graphs", "stage2_top_k", "stage2_batch", "stage2_patience", "gcn_hidden", "policy_hidden",
                "vote_graphs", "max_queries")
    for name in positive:
      if getattr(self, name) < 1:
        raise HieraMASConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
    for name in ("k_pool", "stage1_steps", "stage2_epochs", "max_dropped_roles"):
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
    if self.reward_k < 0:
      raise HieraMASConfigError(f"reward_k must be >= 0 (0: cost ignored), got {self.reward_k}")
    if not 0.0 < self.stage2_val_fraction < 1.0:
      raise HieraMASConfigError(f"stage2_val_fraction must be in (0, 1), got {self.stage2_val_fraction}")
    if not 0.0 <= self.gcn_dropout < 1.0:
      raise HieraMASConfigError(f"gcn_dropout must be in [0, 1), got {self.gcn_dropout}")
    if self.stage1_tau_end <= 0 or self.stage1_tau_start <= 0:
      raise HieraMASConfigError("stage1 temperatures must be > 0")
    if self.stage1_lr <= 0 or self.stage1_lr_end <= 0 or self.stage2_lr <= 0:
      raise HieraMASConfigError("learning rates must be > 0")
    if self.inference == "rotation" and self.rotation_top_n > len(get_pool(self.pool).models):
      raise HieraMASConfigError(f"rotation_top_n={self.rotation_top_n} exceeds the pool's "
                                f"{len(get_pool(self.pool).models)} models")
    for name, allowed in CHOICES.items():
      value = getattr(self, name)
      if value not in allowed:
        raise HieraMASConfigError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")
    object.__setattr__(self, "exclude_llms", ",".join(self._check_excluded()))

  def _check_excluded(self) -> tuple[str, ...]:
    """The names of `exclude_llms`, checked (known models, in the pool, enough left), in pool order."""
    names = [n.strip() for n in str(self.exclude_llms).split(",") if n.strip()]
    models = get_pool(self.pool).models
    for name in names:
      try:
        get_model(name)
      except UnknownModelError as e:
        raise HieraMASConfigError(f"exclude_llms: {e}") from None
      if name not in models:
        raise HieraMASConfigError(f"exclude_llms: {name!r} is not in the {self.pool} pool ({', '.join(models)})")
    left = len(models) - len(set(names))
    needed = self.rotation_top_n if self.inference == "rotation" else 1
    if left < needed:
      raise HieraMASConfigError(f"exclude_llms leaves {left} of the pool's {len(models)} models; the policy needs "
                                f"at least {needed}")
    return tuple(m for m in models if m in names)

  @property
  def excluded_models(self) -> tuple[str, ...]:
    """The models of `exclude_llms`, in pool order."""
    return tuple(n for n in self.exclude_llms.split(",") if n)

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
    inference_only = {"k_pool", "graph_pool", "pool_min_density", "pool_max_density", "graph_mode", "vote_graphs",
                      "llm_mode", "max_queries", "inference", "rotation_top_n", "max_dropped_roles",
                      "aggregator_slot"}
    return {k: v for k, v in self.to_json().items() if k not in inference_only}

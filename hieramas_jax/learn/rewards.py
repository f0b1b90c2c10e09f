"""Multi-level rewards for stage 1 (paper Sec. 3.3), pure jnp.

Reward shape (reference code; the paper only says "utility minus cost"):

  solved: max(exp(-k * cost), 0.5)        failed: max(-exp(k * cost), -2.5)      k = 300, cost in USD

Odd things about this shape, kept on purpose and written down:
- The cost term saturates early: a solved query reaches the 0.5 floor at cost ln(2)/k = 0.0023 USD
  and a failed one the -2.5 floor at ln(2.5)/k = 0.0031 USD. Above a third of a cent per query the
  reward no longer sees cost at all; below it, cost matters a lot.
- Failure at zero cost is -1, not 0, and gets worse with cost; success is always > 0. So any solved
  query beats any failed one regardless of cost (the floors keep the two ranges apart).

Levels (two ways to charge cost, `SYSTEM_COST` names them):
- "decision" (the reference code, `graph/learnable_multi_node_graph.py` `forward`, the default): the
  system reward grades the final answer with the DECISION NODE's own cost only, and each role's node
  reward grades its own output with its own cost, so every call is charged once, where it was made.
  A skipped role's node term is 0 (it emitted nothing) while alpha stays, so it earns
  alpha * 0 + (1 - alpha) * system = 0.5 * system; a role with no checkable answer has alpha = 0.
- "total" (this suite's earlier recipe, the named variant `experiments/ablations/total_cost.flags`):
  the system reward uses the query's total cost; a deactivated or non-checkable role gets alpha = 0,
  i.e. the full system reward.
Role reward = alpha * node + (1 - alpha) * system.
"""

from __future__ import annotations

import jax.numpy as jnp

COST_SCALE_K = 300.0
SOLVED_FLOOR = 0.5
FAILED_FLOOR = -2.5
ALPHA = 0.5
SYSTEM_COST = ("decision", "total")


def outcome_reward(solved, cost, *, k: float = COST_SCALE_K, solved_floor: float = SOLVED_FLOOR,
                   failed_floor: float = FAILED_FLOOR):
  """Reward of one graded output at a given USD cost (any matching shapes)."""
  solved = jnp.asarray(solved, bool)
  cost = jnp.asarray(cost, jnp.float32)
  # Clip the exponent: exp(300 * 1 USD) overflows float32, and the floor makes the value moot.
  exponent = jnp.minimum(k * cost, 80.0)
  good = jnp.maximum(jnp.exp(-exponent), solved_floor)
  bad = jnp.maximum(-jnp.exp(exponent), failed_floor)
  return jnp.where(solved, good, bad)


def role_rewards(node_solved, node_cost, node_checkable, system_solved, system_cost, *, alpha: float = ALPHA,
                 k: float = COST_SCALE_K):
  """Per-role training signal [B, R].

  Args:
    node_solved: [B, R] bool, the supernode's own answer graded correct.
    node_cost: [B, R] USD spent by that supernode's calls (0 for a deactivated role).
    node_checkable: [B, R] bool, the role emitted a gradable answer (False for roles that only
      critique or plan, and for deactivated roles); there alpha is 0.
    system_solved: [B] bool, the final answer graded correct.
    system_cost: [B] USD of the whole query (all calls, decision node included).
    alpha: weight of the node level.
  """
  node = outcome_reward(node_solved, node_cost, k=k)
  system = outcome_reward(system_solved, system_cost, k=k)[:, None]
  a = jnp.where(jnp.asarray(node_checkable, bool), alpha, 0.0)
  return a * node + (1.0 - a) * system


def reference_role_rewards(node_solved, node_cost, node_active, node_checkable, system_solved, decision_cost, *,
                           alpha: float = ALPHA, k: float = COST_SCALE_K):
  """Per-role training signal [B, R] as the reference code computes it (system_cost = "decision").

  Args:
    node_solved, node_cost: [B, R] the role's own output graded, and the USD of its own calls.
    node_active: [B, R] bool, the role ran (False: skipped, node term 0 with alpha kept).
    node_checkable: [B, R] bool, the role emits a checkable answer (False: alpha = 0, whether it ran
      or not; the reference's NON_ANSWER_ROLES).
    system_solved: [B] bool, the final answer graded correct.
    decision_cost: [B] USD of the decision node's call only.
  """
  node = jnp.where(jnp.asarray(node_active, bool), outcome_reward(node_solved, node_cost, k=k), 0.0)
  system = outcome_reward(system_solved, decision_cost, k=k)[:, None]
  a = jnp.where(jnp.asarray(node_checkable, bool), alpha, 0.0)
  return a * node + (1.0 - a) * system


def system_reward(system_solved, system_cost, *, k: float = COST_SCALE_K):
  """The system-level reward alone (stage-2 labels, oracle search, regret): pass the decision node's
  cost under the reference's "decision" charging, the query's total cost under "total"."""
  return outcome_reward(system_solved, system_cost, k=k)

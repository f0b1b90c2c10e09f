"""Multi-level rewards for stage 1 (paper Sec. 3.3), pure jnp.

Reward shape (reference code; the paper only says "utility minus cost"):

  solved: max(exp(-k * cost), 0.5)        failed: max(-exp(k * cost), -2.5)      k = 300, cost in USD

Odd things about this shape, kept on purpose and written down:
- The cost term saturates early: a solved query reaches the 0.5 floor at cost ln(2)/k = 0.0023 USD
  and a failed one the -2.5 floor at ln(2.5)/k = 0.0031 USD. Above a third of a cent per query the
  reward no longer sees cost at all; below it, cost matters a lot.
- Failure at zero cost is -1, not 0, and gets worse with cost; success is always > 0. So any solved
  query beats any failed one regardless of cost (the floors keep the two ranges apart).

Levels: a node's reward grades that supernode's own output with its own cost (sum of its calls'
costs, from the per-call trace accounting); the system reward grades the final answer with the
query's total cost. Role reward = alpha * node + (1 - alpha) * system, alpha = 0.5 where the role's
output is checkable, 0 otherwise (and 0 for a deactivated role: it emitted nothing to grade).
"""

from __future__ import annotations

import jax.numpy as jnp

COST_SCALE_K = 300.0
SOLVED_FLOOR = 0.5
FAILED_FLOOR = -2.5
ALPHA = 0.5


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


def system_reward(system_solved, system_cost, *, k: float = COST_SCALE_K):
  """The system-level reward alone (stage-2 labels, oracle search, regret)."""
  return outcome_reward(system_solved, system_cost, k=k)

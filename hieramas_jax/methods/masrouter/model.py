"""MASRouter's cascaded controller (Yue et al. 2025, arXiv 2502.11133; public code yanweiyue/masrouter), in Flax.

Per query (embedding q), a cascade of decisions, each conditioned on the previous ones (the reference's
`MasRouter.forward`, hidden width H = 64, D = 384):

  task       t = normalize(W_q q) . normalize(W_t T)^T / 0.5 -> softmax     (a task classifier; trained with
             cross-entropy on the known task; its query projection is the query context)
  mode       c ~ softmax(normalize(z_ctx(q)) . normalize(z_c(C))^T / 0.8)   over 6 collaboration modes
  agents     n = clip(round(6 sigmoid(w . normalize(z_n(q)))), 1, 6)        deterministic (as in the reference)
  roles      for j < n:  h_j = layernorm(h_{j-1} + e_{r_{j-1}});  r_j ~ softmax(normalize(W_r [ctx; h_j]) .
             normalize(z_r(R))^T / 0.5)   (each role conditioned on the ones chosen before it)
  LLMs       l_1..l_n i.i.d. ~ softmax(normalize(W_l [ctx; e_c; h_n]) . normalize(z_l(L))^T)

where z_*(.) are VAE encoders (64-d latent, reparameterised with std 0.1) whose losses regularise the
embedding spaces. The log-probability of the whole system is log P(c) + sum_j log P(r_j) + the
multinomial log-probability of the LLM counts, whose coefficient uses the *continuous* agent count
(gammaln(n_float + 1)): the only path by which the utility reaches the agent-count head, as in the
reference. Loss (the reference's training scripts):

  L = CE(task) + mean_b [ -u_b log P_b ] + 0.001 * VAE,     u_b = solved_b - rate * cost_b (USD)
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from jax.scipy.special import gammaln

PRIOR_STD = 0.1
PRIOR_VAR = PRIOR_STD**2
VAE_WEIGHT = 0.001


class RouterInputs(NamedTuple):
  """Embeddings the controller reads (a pytree).

  Role and LLM rows may be padded to fixed counts (every benchmark and pool then shares one compiled
  program per batch size); padding rows are never chosen and count in no loss.

  Attributes:
    query: [B, D] queries.
    tasks: [T, D] task profiles.
    modes: [C, D] collaboration-mode profiles.
    roles: [R, D] the benchmark's role profiles (padded).
    llms: [L, D] the pool's LLM profiles (padded).
    role_mask: [R] bool, real role rows (None: all).
    llm_mask: [L] bool, real LLM rows (None: all).
  """

  query: jax.Array
  tasks: jax.Array
  modes: jax.Array
  roles: jax.Array
  llms: jax.Array
  role_mask: jax.Array | None = None
  llm_mask: jax.Array | None = None


class Choices(NamedTuple):
  """One sampled system per query: mode [B], agents [B] (int), roles [B, A], llms [B, A] (A = max agents;
  entries at j >= agents are unused)."""

  mode: jax.Array
  agents: jax.Array
  roles: jax.Array
  llms: jax.Array


class RouterOut(NamedTuple):
  choices: Choices
  log_prob: jax.Array      # [B]
  task_probs: jax.Array    # [B, T]
  agents_float: jax.Array  # [B]
  vae_loss: jax.Array      # scalar
  mode_probs: jax.Array    # [B, C]
  role_probs: jax.Array    # [B, A, R]
  llm_probs: jax.Array     # [B, L]


def normalize(x: jax.Array) -> jax.Array:
  return x / jnp.maximum(jnp.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def layer_norm(x: jax.Array, eps: float = 1e-5) -> jax.Array:
  """torch's F.layer_norm without affine parameters."""
  mean = x.mean(-1, keepdims=True)
  var = x.var(-1, keepdims=True)
  return (x - mean) / jnp.sqrt(var + eps)


def _masked_mean(values: jax.Array, rows: jax.Array | None) -> jax.Array:
  """Mean over every element of [n, f] `values`, counting only the rows where `rows` is True."""
  if rows is None:
    return jnp.mean(values)
  w = rows.astype(values.dtype)[:, None]
  return jnp.sum(values * w) / (jnp.maximum(w.sum(), 1.0) * values.shape[-1])


def vae_loss(x_hat: jax.Array, x: jax.Array, mu: jax.Array, log_var: jax.Array,
             rows: jax.Array | None = None) -> jax.Array:
  """MSE reconstruction + KL to N(0, PRIOR_STD^2) (the reference's `vae_loss_function`), over real rows."""
  mse = _masked_mean((x_hat - x)**2, rows)
  kld = -0.5 * _masked_mean(1 - jnp.log(PRIOR_VAR) + log_var - (mu**2 + jnp.exp(log_var)) / PRIOR_VAR, rows)
  return mse + kld


def multinomial_log_prob(agents_float: jax.Array, counts: jax.Array, probs: jax.Array) -> jax.Array:
  """[B] gammaln(n + 1) - sum gammaln(k + 1) + sum k log p, with the continuous n of the reference."""
  return (gammaln(agents_float + 1.0) - gammaln(counts + 1.0).sum(-1)
          + (counts * jnp.log(jnp.maximum(probs, 1e-30))).sum(-1))


def task_loss(task_probs: jax.Array, labels: jax.Array) -> jax.Array:
  """The reference's `F.cross_entropy(tasks_probs, y)` where tasks_probs are already softmax outputs."""
  logp = jax.nn.log_softmax(task_probs, axis=-1)
  return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=-1))


def router_loss(out: RouterOut, task_labels: jax.Array, utility: jax.Array) -> jax.Array:
  """L = CE(task) + mean(-u log P) + 0.001 * VAE."""
  return task_loss(out.task_probs, task_labels) + jnp.mean(-out.log_prob * utility) + VAE_WEIGHT * out.vae_loss


def _masked_softmax(logits: jax.Array, mask: jax.Array | None) -> jax.Array:
  if mask is None:
    return jax.nn.softmax(logits, axis=-1)
  return jax.nn.softmax(jnp.where(mask, logits, -jnp.inf), axis=-1)


class VAE(nn.Module):
  hidden: int = 64
  latent: int = 64

  @nn.compact
  def __call__(self, x: jax.Array, rng: jax.Array, rows: jax.Array | None = None):
    h = jax.nn.relu(nn.Dense(self.hidden, name="fc1")(x))
    mu = nn.Dense(self.latent, name="fc21")(h)
    log_var = nn.Dense(self.latent, name="fc22")(h)
    z = mu + jax.random.normal(rng, mu.shape) * jnp.exp(0.5 * log_var) * PRIOR_STD
    x_hat = nn.Dense(x.shape[-1], name="fc4")(jax.nn.relu(nn.Dense(self.hidden, name="fc3")(z)))
    return z, vae_loss(x_hat, x, mu, log_var, rows)


class RouterNet(nn.Module):
  """The cascade. `forced` replays given choices (the loss pass); otherwise choices are sampled.

  Attributes:
    max_agents: most agents per system (reference 6).
    hidden: the controller's width H (reference 64).
    task_temp, mode_temp, role_temp, llm_temp: softmax temperatures (reference 0.5, 0.8, 0.5, 1.0).
  """

  max_agents: int = 6
  hidden: int = 64
  task_temp: float = 0.5
  mode_temp: float = 0.8
  role_temp: float = 0.5
  llm_temp: float = 1.0

  @nn.compact
  def __call__(self, x: RouterInputs, rng: jax.Array, forced: Choices | None = None) -> RouterOut:
    keys = jax.random.split(rng, 10)
    b = x.query.shape[0]
    # Task classification: its normalised query projection is the query context.
    query_ctx = normalize(nn.Dense(self.hidden, name="task_query")(x.query))
    task_probs = jax.nn.softmax(query_ctx @ normalize(nn.Dense(self.hidden, name="task_task")(x.tasks)).T
                                / self.task_temp, axis=-1)
    # Collaboration mode.
    z_modes, vae_modes = VAE(self.hidden, self.hidden, name="mode_vae")(x.modes, keys[0])
    z_ctx, vae_ctx = VAE(self.hidden, self.hidden, name="mode_context_vae")(x.query, keys[1])
    mode_probs = jax.nn.softmax(normalize(z_ctx) @ normalize(z_modes).T / self.mode_temp, axis=-1)
    mode = forced.mode if forced is not None else jax.random.categorical(keys[2], jnp.log(mode_probs))
    mode_lp = jnp.log(jnp.take_along_axis(mode_probs, mode[:, None], axis=-1))[:, 0]
    mode_ctx = normalize(z_modes)[mode]
    # Number of agents: deterministic given the query.
    z_num, vae_num = VAE(self.hidden, self.hidden, name="num_vae")(x.query, keys[3])
    agents_float = jax.nn.sigmoid(nn.Dense(1, name="num_head")(normalize(z_num))[:, 0]) * self.max_agents
    agents = jnp.clip(jnp.round(agents_float), 1, self.max_agents).astype(jnp.int32)
    if forced is not None:
      agents = forced.agents
    # Roles, one after another, each conditioned on the history of the ones before it.
    z_roles, vae_roles = VAE(self.hidden, self.hidden, name="role_vae")(x.roles, keys[4], x.role_mask)
    role_keys = normalize(z_roles)
    role_context = nn.Dense(self.hidden, name="role_context")
    context = jnp.concatenate([query_ctx, mode_ctx], axis=-1)
    history = jnp.zeros((b, self.hidden))
    current = jnp.zeros((b, self.hidden))
    role_lp = jnp.zeros(b)
    chosen_roles, role_probs = [], []
    for j in range(self.max_agents):
      active = j < agents
      history = jnp.where(active[:, None], layer_norm(history + current), history)
      probs = _masked_softmax(normalize(role_context(jnp.concatenate([context, history], axis=-1))) @ role_keys.T
                              / self.role_temp, x.role_mask)
      r = forced.roles[:, j] if forced is not None else jax.random.categorical(jax.random.fold_in(keys[5], j),
                                                                               jnp.log(probs))
      role_lp = role_lp + jnp.where(active, jnp.log(jnp.take_along_axis(probs, r[:, None], axis=-1))[:, 0], 0.0)
      current = jnp.where(active[:, None], role_keys[r], current)
      chosen_roles.append(r)
      role_probs.append(probs)
    # LLMs: i.i.d. draws from one distribution per query, scored as a multinomial.
    z_llms, vae_llms = VAE(self.hidden, self.hidden, name="llm_vae")(x.llms, keys[6], x.llm_mask)
    llm_ctx = normalize(nn.Dense(self.hidden, name="llm_context")(jnp.concatenate([query_ctx, mode_ctx, history],
                                                                                  axis=-1)))
    llm_probs = _masked_softmax(llm_ctx @ normalize(z_llms).T / self.llm_temp, x.llm_mask)
    if forced is not None:
      llms = forced.llms
    else:
      llms = jax.random.categorical(keys[7], jnp.log(llm_probs)[:, None, :], shape=(b, self.max_agents))
    active = jnp.arange(self.max_agents)[None, :] < agents[:, None]
    counts = (jax.nn.one_hot(llms, x.llms.shape[0]) * active[..., None]).sum(1)
    llm_lp = multinomial_log_prob(agents_float, counts, llm_probs)
    choices = Choices(mode.astype(jnp.int32), agents, jnp.stack(chosen_roles, 1).astype(jnp.int32),
                      llms.astype(jnp.int32))
    vae = vae_modes + vae_ctx + vae_num + vae_roles + vae_llms
    return RouterOut(choices, mode_lp + role_lp + llm_lp, task_probs, agents_float, vae, mode_probs,
                     jnp.stack(role_probs, 1), llm_probs)


@functools.partial(jax.jit, static_argnames=("net",))
def sample(params, inputs: RouterInputs, rng: jax.Array, *, net: RouterNet) -> RouterOut:
  return net.apply({"params": params}, inputs, rng)


def loss_fn(params, inputs: RouterInputs, rng: jax.Array, choices: Choices, task_labels: jax.Array,
            utility: jax.Array, *, net: RouterNet) -> jax.Array:
  """The loss of sampled systems: the forward pass replays `choices` with the sampling pass's key, so the
  VAE noise and every probability are the ones the systems were drawn from."""
  return router_loss(net.apply({"params": params}, inputs, rng, choices), task_labels, utility)


@functools.partial(jax.jit, static_argnames=("net",))
def replay(params, inputs: RouterInputs, rng: jax.Array, choices: Choices, *, net: RouterNet) -> RouterOut:
  """The forward pass with given choices (what the loss differentiates)."""
  return net.apply({"params": params}, inputs, rng, choices)


@functools.partial(jax.jit, static_argnames=("net",))
def init_params(rng: jax.Array, inputs: RouterInputs, *, net: RouterNet):
  # Jitted: eager Flax init compiles op by op (tens of seconds for the unrolled cascade on 2 cores).
  return net.init(rng, inputs, rng)["params"]


@functools.partial(jax.jit, static_argnames=("net", "lr"))
def train_step(state, inputs: RouterInputs, rng: jax.Array, choices: Choices, task_labels: jax.Array,
               utility: jax.Array, *, net: RouterNet, lr: float):
  """One Adam update of {"params", "opt_state", "step"}; returns (state, loss)."""
  loss, grads = jax.value_and_grad(loss_fn)(state["params"], inputs, rng, choices, task_labels, utility, net=net)
  updates, opt_state = optax.adam(lr).update(grads, state["opt_state"], state["params"])
  return {"params": optax.apply_updates(state["params"], updates), "opt_state": opt_state,
          "step": state["step"] + 1}, loss

"""GDesigner (Zhang et al. 2024): a GCN designs each query's communication topology; REINFORCE trains it.

  model.py   the topology net (jraph GCN over the role graph -> edge probabilities), edge sampling, loss
  method.py  the `GDesigner` method: fit (REINFORCE on real rollouts), load, solve (3 rounds of agents)
"""

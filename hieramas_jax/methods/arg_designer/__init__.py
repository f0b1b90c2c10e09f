"""ARG-Designer (Li et al., AAAI 2026): a query-conditioned autoregressive generator of agent graphs.

  model.py   the Flax generator (node- and edge-level GRUs), its BCE likelihood loss, graph encoding, sampling
  method.py  the `ARGDesigner` method: fit (cold start, pretrain, finetune data, finetune), load, solve
"""

"""MASRouter (Yue et al. 2025): a cascaded controller routes each query to a collaboration mode, a number
of agents, their roles and their LLMs; REINFORCE on utility minus a cost penalty trains it.

  model.py   the controller (Flax), its multinomial log-probability and the reference's loss
  method.py  the `MASRouter` method: fit, load, solve (the routed system run by `mas.rounds`)
"""

"""MaAS (Zhang et al. 2025, arXiv 2502.04180; code bingreeky/MaAS): a query-conditioned controller samples a
multi-agent system per query from an agentic supernet of operator layers, trained with a cost-aware REINFORCE.

  controller.py  the controller (Flax), the threshold sampling rule, the cost-aware loss and its Adam step
  supernet.py    the operators per benchmark (AFlow's where shared), MaAS's prompts, running an architecture
  method.py      the `MaAS` method: fit (REINFORCE over the training queries), load, solve
"""

"""The embedded simulated LLM pool (docs/simulator.md, its "Principles").

  server.py               OpenAI-compatible aiohttp server: SimConfig, make_app, start_sim_in_thread,
                          start_sim_subprocess
  serve.py                the command line, `python -m hieramas_jax.sim.serve` (absl flags, one per SimConfig field)
  model.py                the behaviour model (competence, correlated draws, context votes, tokens)
  reading.py              how a request is read: item recognition, role, kind, other agents' blocks
  render.py               reply texts in each benchmark's format
  params.py               every named parameter of the model; the aggregation profiles (low, fitted, high)
  mechanism.py            the aggregation mechanism vectorised on synthetic populations (for its fit)
  calibration_targets.py  Base-accuracy targets per model and benchmark, with sources
  truncation.py           `python -m hieramas_jax.sim.truncation`: mean completion tokens and share cut at a cap
  fit_theta.py, build_math_wrong.py, build_mutants.py   offline builders of hieramas_jax/data/sim/

Results made against this server come from a *simulated pool* and must say so.
"""

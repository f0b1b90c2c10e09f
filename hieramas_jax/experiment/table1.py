"""Run-directory helpers under their old import path.

The Table 1 runner is `experiment/runner.py` and these helpers live in `experiment/rundir.py`; the
calibration module still imports them from here.
"""

from hieramas_jax.experiment.rundir import RunConfigMismatchError, prepare_run_dir, safe_name

__all__ = ["RunConfigMismatchError", "prepare_run_dir", "safe_name"]

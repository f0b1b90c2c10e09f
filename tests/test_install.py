"""A fresh install is quiet: every folder of the package (the data folders too) is listed, so setuptools
prints no "importable but absent from the packages configuration" wall, and the data ships."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import zipfile

REPO = pathlib.Path(__file__).resolve().parents[1]


def test_building_the_package_prints_no_setuptools_warning_and_ships_the_data(tmp_path):
  src = tmp_path / "src"
  tracked = subprocess.run(["git", "ls-files", "-z", "--", "setup.cfg", "pyproject.toml", "README.md", "hieramas_jax"],
                           cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
  for name in filter(None, tracked):
    (src / name).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO / name, src / name)
  (src / "hieramas_jax" / "__pycache__").mkdir(exist_ok=True)  # as a used checkout has: not a package
  proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                         "-w", str(tmp_path / "wheel"), str(src)], capture_output=True, text=True, timeout=240,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  output = proc.stdout + proc.stderr
  assert "Warning" not in output and "absent from the `packages`" not in output, output[-3000:]
  (wheel,) = (tmp_path / "wheel").glob("*.whl")
  names = zipfile.ZipFile(wheel).namelist()
  assert "hieramas_jax/data/splits/math.json" in names and "hieramas_jax/experiment/runner.py" in names
  assert not any("__pycache__" in n for n in names)

"""The ISA pin's bytes and cost: embeddings and a fitted scorer's digests at each level, natively and on an
emulated AMD AVX2 CPU (QEMU user mode, when installed); writes results/bench.json key `isa`.

  python experiments/bench_isa.py            # every level natively, and avx2 + native under QEMU's EPYC-Rome
  python experiments/bench_isa.py --noemulate --reps=3

What is probed and why: `hieramas_jax.bench.isa`; what the pin sets: `hieramas_jax/isa.py`.
"""

from __future__ import annotations

from absl import flags

from hieramas_jax.bench import isa
from hieramas_jax.bench.results import BENCH_FILE
from hieramas_jax.experiment import cli
from hieramas_jax.experiment.cli import selected_flags

FLAGS = flags.FLAGS
flags.DEFINE_bool("emulate", True, "Also probe under QEMU's emulated AMD EPYC-Rome (apt-get install qemu-user).")
flags.DEFINE_bool("emulate_fit", True, "Also fit the scorer under emulation (about 45 s of fitting after 85 s of "
                  "embedding on a 2-core AMD EPYC host; --noemulate_fit: the embeddings only).")
flags.DEFINE_integer("reps", 1, "Native probes per level (timings: the median).", lower_bound=1)
flags.DEFINE_string("out", str(BENCH_FILE), "Results file (key `isa`).")


def main():
  record = isa.run(out=FLAGS.out, flags=selected_flags(FLAGS, ("emulate", "emulate_fit", "reps")),
                   emulate=FLAGS.emulate, emulate_fit=FLAGS.emulate_fit, reps=FLAGS.reps)
  print(f"pinned equal across CPUs: {record['pinned_equal_across_cpus']}; unpinned: "
        f"{record['unpinned_equal_across_cpus']}; pin cost (x native time): {record['pin_cost']}")


if __name__ == "__main__":
  cli.run(main)

"""Start-up time of the command line: every ``--help`` must answer in under 1 s.

Usage: ``python benchmarks/bench_cli.py [--repeats N]``. Runs each help command
in a fresh interpreter (as a user would) and prints the median and worst wall
time next to the 1-second target.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = [
    ["--help"],
    ["validate", "--help"],
    ["tournament", "--help"],
    ["train", "--help"],
    ["evaluate", "--help"],
    ["reproduce", "--help"],
    ["report", "--help"],
    ["sweep", "--help"],
    ["ui", "--help"],
    ["doctor", "--help"],
    ["kuhn", "--help"],
    ["kuhn", "analyze", "--help"],
]
TARGET_S = 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{'command':32} {'median s':>9} {'max s':>7}  target <= {TARGET_S:.1f} s")
    for argv in COMMANDS:
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "mage_core", *argv], capture_output=True, check=True)
            times.append(time.perf_counter() - start)
        verdict = "ok" if max(times) <= TARGET_S else "SLOW"
        print(f"mage {' '.join(argv):27} {statistics.median(times):9.3f} {max(times):7.3f}  {verdict}")


if __name__ == "__main__":
    main()

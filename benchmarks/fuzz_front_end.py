"""The front end's mutation fuzzer (tests/test_fuzz.py) from the command line: how many mutants, what they came
to, how long it took.

    python benchmarks/fuzz_front_end.py [--mutants 1000] [--seed 12] [--show 5]

Each mutant of the repository's programs goes through what ``liftpy check`` does (parse, elaborate, type
check); the outcomes are counted by the stage that ended it and the error's class. Exits 1 if a mutant broke
the contract (a Python exception, or a liftpy error without a line and column), printing a few of them with
their mutations; ``mutant(seed, index)`` in tests/test_fuzz.py rebuilds any one of them.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_fuzz import SEED, fuzz  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--show", type=int, default=5, help="how many contract breakers to print")
    args = parser.parse_args()
    result = fuzz(args.mutants, args.seed)
    print(f"seed {args.seed}: {result.summary(args.show)}")
    return 1 if result.escapes else 0


if __name__ == "__main__":
    sys.exit(main())

"""Count the places outside the primitive table that test a primitive's name instead of asking the primitive.

    python scripts/name_tests.py [ROOT]      # ROOT: a checkout (default: this one)

Counts, in the Python files of ``liftpy/`` and ``rewrites/`` (``liftpy/primitives.py`` excepted), with the
standard library's ``ast``: comparisons of a ``.name`` with a primitive's name (``node.name == "map"``,
``name in ("zip", "pad")``), and literal tables or lists holding two or more primitive names. The printer and
the front end (``pretty.py``, ``elaborate.py``) spell the language's syntax and are counted apart.
"""

import ast
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from liftpy.primitives import PRIMITIVES  # noqa: E402

NAMES = set(PRIMITIVES)
SYNTAX = {"pretty.py", "elaborate.py"}


def _names_in(node) -> int:
    if isinstance(node, ast.Constant) and node.value in NAMES:
        return 1
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return sum(_names_in(e) for e in node.elts)
    return 0


def count(path: Path) -> int:
    tree = ast.parse(path.read_text())
    found = 0
    in_compare = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Attribute) and s.attr == "name" or isinstance(s, ast.Name) and s.id == "name"
                   for s in sides) and any(_names_in(s) for s in sides):
                found += 1
                in_compare.update(id(s) for s in sides)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and id(node) not in in_compare and _names_in(node) >= 2:
            found += 1
        elif isinstance(node, ast.Dict) and sum(_names_in(k) for k in node.keys if k is not None) >= 2:
            found += 1
    return found


def main():
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    files = sorted([*(root / "liftpy").rglob("*.py"), *(root / "rewrites").glob("*.py")])
    per_file = Counter()
    for path in files:
        if path.name == "primitives.py" and path.parent.name == "liftpy":
            continue
        n = count(path)
        if n:
            per_file[str(path.relative_to(root))] = n
    syntax = sum(n for f, n in per_file.items() if Path(f).name in SYNTAX)
    for f, n in per_file.most_common():
        print(f"{n:4d}  {f}")
    print(f"total {sum(per_file.values())}: {sum(per_file.values()) - syntax} outside the printer and the front end, "
          f"{syntax} in them")


if __name__ == "__main__":
    main()

"""The ``liftpy rewrite`` and ``liftpy explore`` commands (wired into :mod:`liftpy.cli` by ``add_commands``).

Strategies on the command line are written as in Python, with Elevate's spellings accepted too::

    liftpy rewrite examples/stencil2d.lift --strategy "topDown(tile2D(4, 4)) >> lower_to_opencl"
    liftpy rewrite examples/conv_layer.lift -s "normalize(mapFusion) ; try(topDown(splitJoin(4)))"
    liftpy explore examples/conv_layer.lift --depth 3 --rules "splitJoin(4), mapFusion, mapFission"

``s1 >> s2`` or ``s1 ; s2`` sequence, ``s1 | s2`` or ``s1 <+ s2`` left choice; combinators ``topDown``,
``bottomUp``, ``normalize``, ``repeat``, ``try``, ``all``, ``one``, ``some``, ``position((0, 1), s)``, ``id``,
``fail``; named strategies ``lower_to_opencl``, ``simplify``, and with parameters ``split_sum(ω)``,
``relayout("weights")`` and ``copy_padding`` (``rewrites/*.py``; an input's name quoted, ``?`` or nothing for a
tuning parameter); every rule of the catalogue, with its parameters (``tile2D(4, 4)``; ``?`` or nothing for a fresh
tuning parameter); and the rules of each ``--rule-file`` and the strategies of the module beside it (the
derivations of ``examples/derivations/``: ``--rule-file examples/derivations/direct.rules`` offers ``direct(σ, κ,
v)``). The strategy text is read with Python's parser and only these names are allowed: nothing is evaluated.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys

from ..cli import nonnegative_int, positive_int
from ..errors import RewriteError
from ..ir import Program
from . import strategies as st
from .rules import Catalogue, Rule, RuleFamily, catalogue

COMBINATORS = {
    "seq": st.seq,
    "left_choice": st.left_choice,
    "try_": st.try_,
    "repeat": st.repeat,
    "all_": st.all_,
    "one": st.one,
    "some": st.some,
    "topDown": st.topDown,
    "bottomUp": st.bottomUp,
    "normalize": st.normalize,
    "function_arg": st.function_arg,
}
CONSTANTS = {"id_": st.id_, "fail": st.fail, **st.NAMED}


def parse_strategy(text: str, book: Catalogue | None = None) -> st.Strategy:
    """A strategy from its text (see the module docstring); RewriteError for a mistake."""
    book = book or catalogue()
    named = {**st.parametric(), **book.strategies}
    source = text.replace(";", ">>").replace("<+", "|").replace("?", "None")
    source = re.sub(r"\btry\s*\(", "try_(", source)
    source = re.sub(r"\ball\s*\(", "all_(", source)
    source = re.sub(r"\bid\b", "id_", source)
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as e:
        raise RewriteError(f"--strategy: cannot read {text!r} ({e.msg})") from None

    def value(node):
        if isinstance(node, ast.Constant) and (node.value is None or type(node.value) in (int, str)):
            return node.value  # a size, a tuning parameter (None), or a name: relayout("weights")
        if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)
                and type(node.operand.value) is int):
            return -node.operand.value
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(value(e) for e in node.elts)
        return strategy(node)

    def strategy(node) -> st.Strategy:
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.RShift, ast.BitOr)):
            a, b = strategy(node.left), strategy(node.right)
            return a >> b if isinstance(node.op, ast.RShift) else a | b
        if isinstance(node, ast.Name):
            if node.id in CONSTANTS:
                return CONSTANTS[node.id]
            if node.id in named:
                return named[node.id]()
            if node.id in book:
                return book[node.id]
            if node.id in COMBINATORS or node.id == "position":
                raise RewriteError(f"--strategy: {node.id} needs an argument, as in {node.id}(mapFusion)")
            raise _unknown(node.id, book)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            name = node.func.id
            args = [value(a) for a in node.args]
            if name == "position":
                if len(args) != 2 or not isinstance(args[0], tuple):
                    raise RewriteError("--strategy: position takes a path and a strategy: position((0, 1), s)")
                return st.position(args[0], args[1])
            if name in COMBINATORS:
                combinator = COMBINATORS[name]
                if not all(isinstance(a, st.Strategy) for a in args):
                    raise RewriteError(f"--strategy: {name} takes strategies")
                signature = inspect.signature(combinator)
                try:
                    signature.bind(*args)  # the arity, checked before the call: a TypeError inside is a bug
                except TypeError:
                    wanted = len(signature.parameters)
                    raise RewriteError(f"--strategy: {name} takes {wanted} strateg{'y' if wanted == 1 else 'ies'}, "
                                       f"got {len(args)}") from None
                return combinator(*args)
            if name in named:
                if any(isinstance(a, (st.Strategy, tuple)) for a in args):
                    raise RewriteError(f"--strategy: {name} takes sizes (integers, or ? for a tuning parameter)")
                try:
                    return named[name](*args)
                except TypeError as e:
                    raise RewriteError(f"--strategy: {name}: {e}") from None
            if any(isinstance(a, str) for a in args):  # names are for the named strategies only
                raise RewriteError(f"--strategy: cannot read {ast.unparse(node)!r}: only a named strategy takes a "
                                   f"quoted name, as relayout(\"weights\")")
            if name in book:
                return book[name].instance(*args)
            raise _unknown(name, book)
        raise RewriteError(f"--strategy: cannot read {ast.unparse(node)!r}: write rules, combinators, >> and |")

    return strategy(tree.body)


def _unknown(name: str, book: Catalogue) -> RewriteError:
    """The error for a name that is nothing known: the rule it may be a misspelling of, and where more come from."""
    try:
        book[name]
    except RewriteError as e:  # no rule named ... (did you mean ...?)
        missing = e.message
    return RewriteError(f"--strategy: unknown name {name!r}: not a combinator or a named strategy, and {missing}; more "
                        f"rules and strategies come with --rule-file FILE.rules (the derivations of the paper's "
                        f"hand-written pipelines: examples/derivations/)")


def parse_rule_list(text: str, book: Catalogue | None = None) -> list:
    """``"splitJoin(4), mapFusion"`` -> the rules (a name alone: its default, with symbolic parameters)."""
    book = book or catalogue()
    out = []
    depth, start = 0, 0
    pieces = []
    for i, c in enumerate(text + ","):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            pieces.append(text[start:i].strip())
            start = i + 1
    for piece in filter(None, pieces):
        s = parse_strategy(piece, book)
        if not isinstance(s, (RuleFamily, Rule)):
            raise RewriteError(f"--rules: {piece!r} is not a rule")
        out.append(s)
    if not out:
        raise RewriteError(f"--rules: no rule in {text!r}")
    return out


def _header(program: Program, steps) -> str:
    lines = []
    if steps:
        lines.append("// rewritten by: " + " ; ".join(map(str, steps)))
    for a in program.assumptions:
        lines.append(f"// requires: {a.text}    ({a.reason})")
    return "\n".join(lines) + ("\n" if lines else "")


def cmd_rewrite(args) -> int:
    from .. import load, pretty

    book = catalogue(*(args.rule_file or ()))
    strategy = parse_strategy(args.strategy, book)
    program = load(args.file)
    result = strategy(program)
    if not result:
        raise RewriteError(f"{args.strategy}: {result.reason}")
    print(_header(result.program, result.steps) + pretty(result.program), end="")
    return 0


def cmd_explore(args) -> int:
    from .. import load, pretty
    from .explore import explore

    book = catalogue(*(args.rule_file or ()))
    chosen = parse_rule_list(args.rules, book) if args.rules is not None else None
    program = load(args.file)
    variants = explore(program, chosen, args.depth, method=args.method, walks=args.walks, seed=args.seed,
                       limit=args.limit, progress=not args.quiet and sys.stderr.isatty())
    shown = variants if args.show is None else variants[: args.show]
    for i, v in enumerate(shown, 1):
        print(f"// variant {i} (depth {v.depth}): {v.describe()}")
        print(_header(v.program, ()) + pretty(v.program))
    s = variants.stats
    rate = s["rewrites"] / s["seconds"] if s["seconds"] else 0.0
    print(f"explore: {len(variants)} variants ({s['duplicates']} duplicates, {s['filtered']} filtered) from "
          f"{s['rewrites']} rewrites in {s['seconds']:.2f} s ({rate:.0f} rewrites/s)", file=sys.stderr)
    return 0


def add_commands(subparsers) -> None:
    """Add ``rewrite`` and ``explore`` to an argparse subparsers object (each sets ``fn=``)."""
    help_ = "apply a rewrite strategy to a .lift file; print the program it gives"
    p = subparsers.add_parser("rewrite", help=help_, description=help_ + ". " + __doc__.split("\n\n")[1])
    p.set_defaults(fn=cmd_rewrite)
    p.add_argument("file")
    p.add_argument("-s", "--strategy", required=True,
                   help='for example "topDown(tile2D(4, 4)) >> lower_to_opencl" (rules, combinators, >> and |)')
    p.add_argument("--rule-file", action="append", metavar="FILE.rules",
                   help="more rules to use, and the strategies of the module beside the file (repeatable)")

    help_ = "enumerate the programs rewrite rules reach from a .lift file; print each with its rule path"
    p = subparsers.add_parser("explore", help=help_, description=help_)
    p.set_defaults(fn=cmd_explore)
    p.add_argument("file")
    p.add_argument("--depth", type=positive_int, default=3, help="rule applications per variant at most (default 3)")
    p.add_argument("--rules", metavar="RULES",
                   help='comma-separated rules, e.g. "splitJoin(4), mapFusion" (default: the algorithmic, fusion, '
                        'interchange and simplification rules)')
    p.add_argument("--rule-file", action="append", metavar="FILE.rules", help="more rules to use (repeatable)")
    p.add_argument("--method", choices=("bfs", "random"), default="bfs", help="breadth-first (default) or random walks")
    p.add_argument("--walks", type=positive_int, default=100, help="random walks (with --method random)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="random seed (with --method random)")
    p.add_argument("--limit", type=positive_int, help="stop after this many variants")
    p.add_argument("--show", type=nonnegative_int, metavar="N", help="print only the first N variants")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")

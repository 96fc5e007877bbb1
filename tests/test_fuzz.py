"""The front end under a mutation fuzzer: whatever text it is given, ``liftpy check`` either succeeds or reports
a liftpy error with a line and a column -- never a Python exception of its own (IndexError, KeyError,
RecursionError, an unwrapped lark exception) and never an error without a place.

Mutants are made from every program kept in the repository (:mod:`tests.lift_files`) by one to three
mutations: a token dropped, duplicated, swapped with its neighbour or with any other, replaced by or inserted
as another token of the language (most often one of its own kind: a primitive by a primitive, a number by a
number, ``_2`` by ``_5``), wrapped thousands of times in brackets, operators or calls, projected on a tuple
component (``kernel._5``, ``_9._1``), the text cut short, or stray characters (control characters, bytes that
are no UTF-8, odd Unicode) inserted or written over the text. Mutant ``i`` of seed ``s`` is made from its own
random generator, so ``mutant(s, i)`` rebuilds any one of them alone; a failure names its file and mutations.
Outcomes are counted by the stage that ended the mutant and the class of its error.

``benchmarks/fuzz_front_end.py`` runs the fuzzer from the command line and prints its outcomes.
"""

from __future__ import annotations

import random
import re
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

import pytest

from liftpy.cli import check_report, main
from liftpy.elaborate import elaborate
from liftpy.errors import LiftError
from liftpy.primitives import INDEX_FUNS, PRIMITIVES, SCALAR_OPS
from liftpy.syntax import parse_file_syntax

from .lift_files import LIFT_FILES, short_name

SEED = 12

# A token is a comment, a name, a number, a string, a two-character operator, or any other single character;
# whitespace runs are tokens too, so that the tokens of a text join back into it.
TOKEN = re.compile(
    r"""\s+ | //[^\n]* | /\*.*?\*/ | [^\W\d]\w* | \d+\.?\d*(?:[eE][+-]?\d+)?[fF]? | "[^"\n]*"
      | -> | <= | >= | == | != | && | \|\| | .""",
    re.S | re.X,
)


def tokenize(text: str) -> list[str]:
    return TOKEN.findall(text)


def _is_space(token: str) -> bool:
    return token.isspace() or token.startswith(("//", "/*"))


KEYWORDS = ["def", "val", "param", "true", "false"]
PUNCTUATION = list("()[]{},;:=._+-*/%<>!\"") + ["->", "<=", ">=", "==", "!=", "&&", "||", "/*", "*/", "//"]
NUMBERS = ["0", "1", "2", "3", "4", "16", "-1", "0.0f", "1.5", "2.0f", "1e3f", "1e999f", "99999999999999999999",
           "_0", "_1", "_2", "_5", "_999999999999", "007"]
TYPES = ["float", "int", "bool", "float4", "float16", "float3", "float_v", "int_n", "bool4", "float_", "[float]_n"]
STRINGS = ['"tile size"', '""', '"']
# control characters, bytes that are no UTF-8 (as Python reads them with surrogateescape), latin-1 letters,
# and Unicode a careless lexer trips on: a BOM, zero-width and right-to-left marks, a combining accent, θ
STRAY = (
    [chr(c) for c in range(0, 32)]
    + ["\x7f", "\x80", "\x9f", "\xa0", "\xff", "é", "\udc80", "\udcff", "\udce9", "\ufeff", "\u200b", "\u202e",
       "\u0301", "\ufffd", "θ", "κ", "\U0001F600", "\u2028", "\x85"]
)


COMPONENTS = (0, 1, 2, 3, 5, 9)  # what the "project" mutation projects on
# what the "nest" mutation wraps a token in, many times over
NESTINGS = [("(", ")"), ("{ ", " }"), ("-", ""), ("!", ""), ("", "._1"), ("", " + 1"), ("id(", ")"), ("[", "]_n"),
            ("x -> ", ""), ("(x, ", ")"), ("map(x -> ", ", xs)"), ("{ val a = 1; ", " }"), ("join(split(2, ", "))")]


@lru_cache(maxsize=1)
def sources() -> tuple[tuple[str, str], ...]:
    """(name, text) of every program the mutants are made from."""
    return tuple((short_name(p), p.read_text(encoding="utf-8")) for p in LIFT_FILES)


@lru_cache(maxsize=1)
def token_pool() -> tuple[str, ...]:
    """Tokens of the language: its keywords, punctuation, primitive and operator names, type names and numbers,
    and every name written in the programs the mutants come from."""
    names = {t for _, text in sources() for t in tokenize(text) if re.fullmatch(r"[^\W\d]\w*", t)}
    pool = set(KEYWORDS + PUNCTUATION + NUMBERS + TYPES + STRINGS)
    pool |= set(PRIMITIVES) | {op for op in SCALAR_OPS if op.isidentifier()} | set(INDEX_FUNS) | names
    return tuple(sorted(pool))


def _token_class(token: str) -> str:
    if re.fullmatch(r"_\d+", token):
        return "projection"
    if token in PRIMITIVES or token in SCALAR_OPS or token in INDEX_FUNS:
        return "primitive"
    if token in TYPES:
        return "type"
    if re.fullmatch(r"[^\W\d]\w*", token):
        return "name"
    if re.fullmatch(r"-?\d[\w.]*", token):
        return "number"
    return "punctuation" if len(token) <= 2 else "other"


@lru_cache(maxsize=None)
def alike_tokens(token: str) -> tuple[str, ...]:
    """The tokens of the pool of the same class as ``token``: primitives, types, other names, numbers,
    tuple components, punctuation."""
    kind = _token_class(token)
    return tuple(t for t in token_pool() if _token_class(t) == kind) or token_pool()


@dataclass(frozen=True)
class Mutant:
    seed: int
    index: int
    source: str  # the file it was made from
    mutations: tuple[str, ...]  # what was done, in order, to reproduce it by hand
    text: str

    def describe(self) -> str:
        return f"mutant({self.seed}, {self.index}) of {self.source}: " + "; ".join(self.mutations)


def mutant(seed: int, index: int) -> Mutant:
    """Mutant ``index`` of ``seed``: one to three mutations of one of the programs."""
    rng = random.Random(f"{seed}/{index}")  # a string seed is hashed the same way in every run
    name, text = rng.choice(sources())
    done = []
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
        text, what = _mutate(rng, text)
        done.append(what)
    return Mutant(seed, index, name, tuple(done), text)


def _mutate(rng: random.Random, text: str) -> tuple[str, str]:
    tokens = tokenize(text)
    solid = [i for i, t in enumerate(tokens) if not _is_space(t)] or [0]
    if not tokens:
        tokens = [""]
    # a token replaced by one of its own class (a name by a name, a number by a number) mostly still parses,
    # and so tests the elaborator and the type checker rather than the parser: it is drawn most often
    kind = rng.choice(["drop", "duplicate", "swap-adjacent", "swap", "replace", "insert", "truncate", "stray-insert",
                       "stray-replace", "nest", "project", "replace-alike", "replace-alike", "replace-alike",
                       "replace-alike"])
    if kind == "replace-alike":  # names and numbers: punctuation by other punctuation seldom parses
        solid = [i for i in solid if _token_class(tokens[i]) not in ("punctuation", "other")] or solid
    elif kind == "project":
        solid = [i for i in solid if _token_class(tokens[i]) in ("name", "projection")] or solid
    i = rng.choice(solid)
    at = f"token {i} {tokens[i]!r}"
    if kind == "drop":
        del tokens[i]
    elif kind == "duplicate":
        tokens.insert(i, tokens[i])
    elif kind == "swap-adjacent":
        k = solid.index(i)
        j = solid[k + 1] if k + 1 < len(solid) else solid[k - 1] if k > 0 else i
        tokens[i], tokens[j] = tokens[j], tokens[i]
        at += f" with token {j} {tokens[i]!r}"
    elif kind == "swap":
        j = rng.choice(solid)
        tokens[i], tokens[j] = tokens[j], tokens[i]
        at += f" with token {j} {tokens[i]!r}"
    elif kind in ("replace", "replace-alike", "insert"):
        pool = token_pool() if kind != "replace-alike" else alike_tokens(tokens[i])
        new = rng.choice(pool)
        if kind == "insert":
            tokens.insert(i, new + rng.choice(("", " ")))
            at += f": {new!r} before it"
        else:
            tokens[i] = new
            at += f" by {new!r}"
    elif kind == "nest":  # deep nesting, which the stages' recursion must survive: up to 2,048 levels
        before, after = rng.choice(NESTINGS)
        depth = int(2 ** rng.uniform(1, 11))
        tokens[i] = before * depth + tokens[i] + after * depth
        at += f" wrapped {depth} times in {before!r}...{after!r}"
    elif kind == "project":  # tuple components, nested and out of range: x._5, kernel._0._2
        first, second = rng.choice(COMPONENTS), rng.choice(COMPONENTS)
        new = f"_{first}._{second}" if _token_class(tokens[i]) == "projection" else f"{tokens[i]}._{first}"
        tokens[i] = new
        at += f" by {new!r}"
    elif kind == "truncate":
        cut = rng.randrange(len(text) + 1)
        return text[:cut], f"truncate at character {cut}"
    else:
        pos = rng.randrange(len(text) + 1)
        stray = "".join(rng.choice(STRAY) for _ in range(rng.randint(1, 3)))
        if kind == "stray-insert":
            return text[:pos] + stray + text[pos:], f"insert {stray!r} at character {pos}"
        return text[:pos] + stray + text[pos + len(stray):], f"overwrite with {stray!r} at character {pos}"
    return "".join(tokens), f"{kind} {at}"


# ------------------------------------------------------------------------------------------------ the contract
STAGES = (
    ("parse", parse_file_syntax),
    ("elaborate", elaborate),
    ("type check", lambda program: check_report(program, {})),
)


def check(text: str, filename: str, progress: list[str] | None = None) -> list[str]:
    """What ``liftpy check FILE`` does with the file's text, in process: ``liftpy.parse`` (the parser, then the
    elaborator) and the type check with the lines it prints. ``progress`` collects the stages begun."""
    value = text
    for stage, run in STAGES:
        if progress is not None:
            progress.append(stage)
        value = run(value, filename) if stage == "parse" else run(value)
    return value


@dataclass
class Outcomes:
    """What the mutants came to: ``ok`` or an error class per mutant, and the mutants that broke the contract."""

    tried: int = 0
    counts: Counter = field(default_factory=Counter)
    escapes: list[tuple[Mutant, str]] = field(default_factory=list)
    seconds: float = 0.0
    slowest: tuple[float, str] = (0.0, "")

    def summary(self, shown: int = 5) -> str:
        lines = [f"{self.tried} mutants in {self.seconds:.1f} s; slowest {self.slowest[0] * 1000:.0f} ms ({self.slowest[1]})"]
        lines += [f"  {n:6}  {what}" for what, n in self.counts.most_common()]
        if self.escapes:
            lines.append(f"{len(self.escapes)} broke the contract, for example:")
            for m, why in self.escapes[:shown]:
                lines.append(f"  {m.describe()}\n    -> {why}")
        return "\n".join(lines)


def outcome(m: Mutant) -> tuple[str, str | None]:
    """``("ok", None)``, ``(error class, None)`` for a located liftpy error, or ``(what, why)`` when the mutant
    broke the contract."""
    stages: list[str] = []
    try:
        check(m.text, m.source, stages)
    except LiftError as e:
        kind = f"{stages[-1]}: {type(e).__name__}"
        span = e.span
        if span is None or span.line < 1 or span.column < 1:
            return f"{kind} without a location", f"{kind}: {e.message} (span {span!r})"
        e.render()  # what the command line prints must not fail either
        return kind, None
    except Exception as e:  # noqa: BLE001 -- the fuzzer's job is to catch what escapes
        where = traceback.extract_tb(e.__traceback__)[-1]
        return f"{stages[-1]}: escaped {type(e).__name__}", f"{type(e).__name__}: {e} (at {where.filename}:{where.lineno})"
    return "ok", None


def fuzz(count: int, seed: int = SEED) -> Outcomes:
    """Run ``count`` mutants of ``seed`` through the front end and tally the outcomes."""
    result = Outcomes()
    start = time.perf_counter()
    for index in range(count):
        m = mutant(seed, index)
        t0 = time.perf_counter()
        kind, why = outcome(m)
        spent = time.perf_counter() - t0
        if spent > result.slowest[0]:
            result.slowest = (spent, m.describe())
        result.tried += 1
        result.counts[kind] += 1
        if why is not None:
            result.escapes.append((m, why))
    result.seconds = time.perf_counter() - start
    return result


# ------------------------------------------------------------------------------------------------ tests
def test_tokens_join_back_into_the_text():
    for _, text in sources():
        assert "".join(tokenize(text)) == text


def test_mutants_are_reproducible_one_by_one():
    assert mutant(SEED, 17) == mutant(SEED, 17)
    assert {mutant(SEED, i).text for i in range(20)} != {mutant(SEED + 1, i).text for i in range(20)}


def test_every_unmutated_program_checks():
    for name, text in sources():
        check(text, name)


def test_front_end_survives_1000_mutants():
    result = fuzz(1000)
    print(result.summary())
    assert not result.escapes, result.summary()
    # the mutants reach past the parser: some type errors, some programs that still check
    assert result.counts["ok"] > 0 and result.counts["type check: LiftTypeError"] > 0


@pytest.mark.slow
def test_front_end_survives_10000_mutants():
    result = fuzz(10_000, seed=SEED + 1)
    print(result.summary())
    assert not result.escapes, result.summary()


def test_the_check_command_reports_mutants_as_located_errors(tmp_path, capsys):
    """The real command on files: exit 0, or exit 1 with ``file:line:col: error:`` first -- no traceback."""
    failures, exits = [], Counter()
    for index in range(200):
        m = mutant(SEED, index)
        try:
            data = m.text.encode("utf-8")
        except UnicodeEncodeError:
            continue  # bytes that are no UTF-8: test_the_check_command_refuses_a_file_that_is_no_utf8
        path = tmp_path / f"mutant{index}.lift"
        path.write_bytes(data)
        try:
            status = main(["check", str(path)])
        except Exception as e:  # noqa: BLE001 -- collected, to report every mutant that escapes
            failures.append(f"{m.describe()}: {type(e).__name__}: {e}")
            continue
        err = capsys.readouterr().err
        exits[status] += 1
        located = re.match(rf"{re.escape(str(path))}:\d+:\d+: error: ", err)
        if status not in (0, 1) or (status == 1) != bool(located) or "Traceback" in err:
            failures.append(f"{m.describe()}: exit {status}, stderr {err[:300]!r}")
        if sum(exits.values()) == 40:
            break
    assert not failures, "\n".join(failures[:5])
    assert exits[1] > 0 and exits[0] > 0


def test_the_check_command_refuses_a_file_that_is_no_utf8(tmp_path, capsys):
    path = tmp_path / "latin1.lift"
    path.write_bytes("def f(xs: [float]_n) = map(x -> x, xs) // é".encode("latin-1"))
    assert main(["check", str(path)]) == 1
    assert re.match(rf"{re.escape(str(path))}(:\d+:\d+)?: error: not UTF-8", capsys.readouterr().err)


# ------------------------------------------------------------------------------------------------ what it found
# Each escape the fuzzer found, kept as a plain test: the text, and where the error must point.
FOUND = [
    # a lambda parameter that is no pattern: the builder's LiftSyntaxError came out wrapped in lark's VisitError
    ("def f(xs: [float]_n) = map((x + 1) -> x, xs)", 1, 29, "a lambda's parameter must be a name"),
    # a component out of range of a nested tuple of sizes: an IndexError
    ("def f(k: ((int, int), int), xs: [float]_(k._5._1)) = xs", 1, 42, "._5 out of range for a tuple of 2 sizes"),
    ("def f(k: ((int, int), int), xs: [float]_n) = split(k._0._1, xs)", 1, 52, "._0 out of range"),
    # deep nesting: RecursionError in the parse tree's builder, the elaborator or the type checker; the error
    # points at the first level too deep (the 199th '-', the 100th id: two levels of the parse tree each)
    ("def f(x: float) = " + "-" * 3000 + "x", 1, 19 + 198, "nests deeper than 200 levels"),
    ("def f(xs: [float]_n) = " + "id(" * 1000 + "xs" + ")" * 1000, 1, 24 + 3 * 99, "nests deeper than 200 levels"),
    # 1,000 vals in a row are 1,000 nested Lets: the value of the 119th is too deep
    ("def f(x: float) = {" + "val a = x; " * 1000 + "a }", 1, 20 + 11 * 118 + 8, "deeper than 120 levels here"),
    # macros nest deeper than the text: each h is 3 g's of 4 id's; the 5th h (of 40) is too deep
    ("def g(a) = id(id(id(id(a))))\ndef h(a) = g(g(g(a)))\ndef f(xs: [float]_n) = " + "h(" * 40 + "xs" + ")" * 40,
     3, 24 + 3 * 4, "its macros expanded"),
    # not escapes, but errors that said too little: ._0 read as get(-1), a float no float holds
    ("def f(xs: (float, float)) = xs._0", 1, 29, "tuple components are numbered from 1"),
    ("def f(x: float) = x * 1e999f", 1, 23, "too large for a float"),
]


@pytest.mark.parametrize("text, line, column, message", FOUND, ids=range(len(FOUND)))
def test_what_the_fuzzer_found_is_a_located_error(text, line, column, message):
    with pytest.raises(LiftError) as caught:
        check(text, "found.lift")
    error = caught.value
    assert message in error.message
    assert (error.span.line, error.span.column) == (line, column), error.render()


# ------------------------------------------------------------------------------------------------ issue 12, more
def test_the_check_command_places_the_first_byte_that_is_no_utf8(tmp_path, capsys):
    path = tmp_path / "latin1.lift"
    path.write_bytes("def f(xs: [float]_n) =\r\n  // θ κ é\n  xs\n".encode("utf-8").replace("é".encode("utf-8"), b"\xe9"))
    assert main(["check", str(path)]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == f"{path}:2:10: error: not UTF-8 text (byte 0xe9: invalid continuation byte)"
    assert lines[2].index("^") == lines[1].index("\ufffd")  # the caret under the byte, shown replaced


def _blow_up(links: int, nested: bool, width: int) -> str:
    """A chain of macros, the first a tuple of ``width`` copies of its argument, each other using the one before
    twice: (m(a), m(a)) or m(m(a)). A short text, nesting little, that expands to width*2^(links-1) copies
    (nested) or width^(2^(links-1)) (composed)."""
    body = "(m{0}(a), m{0}(a))" if nested else "m{0}(m{0}(a))"
    lines = [f"def m1(a) = ({', '.join(['a'] * width)})"]
    lines += [f"def m{i}(a) = " + body.format(i - 1) for i in range(2, links + 1)]
    return "\n".join(lines) + f"\ndef f(xs: [float]_n) =\n  id(m{links}(xs))\n"


@pytest.mark.timeout(30)  # without the bound, elaboration runs for hours
@pytest.mark.parametrize("links, nested, width", [(25, True, 2), (5, False, 4)])
def test_macros_that_blow_up_fail_fast_at_the_call(links, nested, width):
    start = time.perf_counter()
    with pytest.raises(LiftError) as caught:
        check(_blow_up(links, nested, width), "blow-up.lift")
    assert time.perf_counter() - start < 2.0
    error = caught.value
    assert "this call's macros expand to more than 100,000 nodes" in error.message
    assert (error.span.line, error.span.column) == (links + 2, 6), error.render()

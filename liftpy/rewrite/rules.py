"""Rewrite rules as data: the rule-file reader, rule application, and the catalogue in ``rewrites/`` (the package
``liftpy.catalogue``).

A rule file (``*.rules``) holds macros and rules written in the language's own syntax::

    // a comment
    def untile2D(tiles) = map(join, join(map(transpose, tiles)))    // a macro, for the rules below it

    /// splitJoin(n): map(f) == join o map(map(f)) o split(n)          <- documentation (required)
    rule splitJoin(n):
        map(f, xs)
     => join(map(map(f), split(n, xs)))

    /// slideTiling(u): slide(n, s) == join o map(slide(n, s)) o slide(u+n-s, u)
    rule slideTiling(u):
        slide(n, s, xs) => join(map(tile -> slide(n, s, tile), slide(u + n - s, u, xs)))
      where xs: [T]_len, u % s == 0, (len - n + s) % u == 0

A rule is ``rule NAME(PARAMS): PATTERN => REPLACEMENT`` followed by ``where`` conditions. Names that nothing
binds are pattern variables (see :mod:`liftpy.rewrite.match` for how they match); the parameters are sizes
or OpenCL dimensions given when the rule is used (``rules.splitJoin(4)``), or left symbolic
(``rules.splitJoin()``): each application then introduces a fresh tuning parameter. Conditions, separated by
commas or further ``where``\\ s:

* ``xs: TYPE`` -- the type of what ``xs`` matched fits ``TYPE``, binding the size and type names in it;
* a size comparison, ``a % b == 0`` (b divides a), ``a == b``, ``a >= b``, ``a <= b``, ``a > b``, ``a < b``:
  decided when the sizes allow; otherwise (tuning parameters, symbolic input sizes) the application
  succeeds and the condition becomes one of the program's assumptions, which the type checker records;
* ``name(x, ...)`` -- a predicate from :data:`PREDICATES` (``nontrivial(G)``, ``unplaced(z)``...).

Rules whose replacement needs computation the syntax cannot say are Python functions decorated with
:func:`python_rule` in a module beside the rule file (``memory.py`` beside ``memory.rules``); the module's
``STRATEGIES`` dict names the strategies built from its rules (``liftpy rewrite --strategy`` offers them).

Every application is checked: the replacement must not let a variable escape its binder, must type-check
where it stands, and must have the type of what it replaces (sizes that cannot be compared yet become
assumptions). A failed check is a failure of that application, never an exception.

The catalogue: ``rules.splitJoin(4)``, ``rules.mapFusion``, ``rules.catalogue()`` (every rule, by group). More rule
files are loaded on demand, never by default: ``rules.catalogue("more.rules")`` is the catalogue and their rules
(the worked derivations of ``examples/derivations/`` load theirs so; ``liftpy rewrite --rule-file`` too).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping

from .. import arith
from ..arith import Expr
from ..errors import RewriteError, Span
from ..ir import Node, Prim, Program
from .check import Candidate, finish
from .match import PREFIX, Instantiator, Matcher, match_type
from .predicates import PREDICATES, Predicate, predicate  # noqa: F401 (part of this module's interface)
from .reader import RuleSource, read_rules
from .strategies import Context, Failure, Strategy, Success, Step, Tree


class RuleFamily(Strategy):
    """A rule of the catalogue, not yet given its parameters. Call it with them (``rules.splitJoin(4)``,
    ``None`` or nothing for a fresh tuning parameter); used directly, its size parameters are symbolic."""

    def __init__(self, name: str, params: tuple[str, ...], doc: str, group: str, span: Span | None):
        self.rule_name = name
        self.params = params
        self.doc = doc
        self.group = group
        self.span = span
        self._instances: dict[tuple, Rule] = {}
        super().__init__(self._apply_default, name)

    @property
    def param_kinds(self) -> dict[str, str]:
        return {p: "size" for p in self.params}

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], (Node, Program, Success, Failure)):
            return super().__call__(args[0])  # used as a strategy: rules.mapFusion(program)
        return self.instance(*args, **kwargs)

    def instance(self, *args, **kwargs) -> "Rule":
        values = list(args) + [None] * (len(self.params) - len(args))
        if len(args) > len(self.params):
            raise RewriteError(f"rule {self.rule_name} takes {len(self.params)} parameter(s) ({', '.join(self.params)}), "
                               f"got {len(args)}")
        for k, v in kwargs.items():
            if k not in self.params:
                raise RewriteError(f"rule {self.rule_name} has no parameter {k} (it has: {', '.join(self.params) or 'none'})")
            values[self.params.index(k)] = v
        for p, v in zip(self.params, values):
            kind = self.param_kinds[p]
            if kind == "dim" and not (isinstance(v, int) and 0 <= v <= 2):
                raise RewriteError(f"rule {self.rule_name}: {p} is an OpenCL dimension, give 0, 1 or 2 (got {v!r})")
            if kind == "size" and not (v is None or isinstance(v, (int, Expr))):
                raise RewriteError(f"rule {self.rule_name}: {p} is a size, give an integer, a size expression or "
                                   f"None for a tuning parameter (got {v!r})")
            if kind == "size" and isinstance(v, int) and v < 1:
                raise RewriteError(f"rule {self.rule_name}: {p} must be at least 1 (got {v})")
        key = tuple(values)
        rule = self._instances.get(key)
        if rule is None:
            rule = self._instances[key] = Rule(self, key)
        return rule

    def _apply_default(self, tree, ctx):
        try:
            rule = self.instance()
        except RewriteError as e:
            return Failure(e.message)
        return rule.apply(tree, ctx)

    def candidates(self, node: Node, args: tuple, ctx: Context) -> Iterator[Candidate | Failure]:
        raise NotImplementedError

    def could_match(self, node: Node) -> bool:
        return True

    def __repr__(self) -> str:
        return self.rule_name


class Rule(Strategy):
    """A rule with its parameters: a strategy that rewrites the node it is applied to, or fails."""

    def __init__(self, family: RuleFamily, args: tuple):
        self.family = family
        self.args = args
        label = Step(family.rule_name, args).label
        super().__init__(self._apply, label)

    @property
    def label(self) -> str:
        return self.name

    def alternatives(self, node: Tree, ctx: Context) -> Iterator[Success | Failure]:
        """Every successful application at ``node`` (rules with higher-order patterns may have several),
        interleaved with the failures met on the way."""
        if not isinstance(node, Node) or not self.family.could_match(node):
            return
        index = 0
        candidates = self.family.candidates(node, self.args, ctx)
        while True:
            before = set(ctx.names.taken)  # the names a candidate's new binders must not clash with
            c = next(candidates, None)
            if c is None:
                return
            if isinstance(c, Failure):
                yield c
                continue
            r = finish(self, node, c, ctx, index, before)
            if r:
                index += 1
            yield r

    def _apply(self, tree, ctx):
        if not isinstance(tree, Node):
            return Failure(f"{self.label} rewrites expressions; apply it with topDown(...) or position(...)")
        best = None
        for r in self.alternatives(tree, ctx):
            if r:
                return r
            if best is None or (r.near and not best.near):
                best = r
        return best if best is not None else Failure(f"{self.label} does not match")

    def alternative(self, index: int) -> Strategy:
        """The strategy applying this rule's ``index``-th successful match (for replaying an exploration)."""

        def go(tree, ctx):
            seen = 0
            for r in self.alternatives(tree, ctx):
                if r:
                    if seen == index:
                        return r
                    seen += 1
            return Failure(f"{self.label} has no match #{index} here")

        return Strategy(go, f"{self.label}#{index}")


# ================================================================================================ text rules
class TextRule(RuleFamily):
    """A rule written in a rule file: a pattern, a replacement and conditions."""

    def __init__(self, source: RuleSource, group: str):
        super().__init__(source.name, source.params, source.doc, group, source.span)
        self.lhs = source.lhs
        self.rhs = source.rhs
        self.conditions = source.conditions
        self.kinds = source.kinds
        self.shared_binders = source.shared_binders
        data_and_functions = {k: v for k, v in source.kinds.items() if v in ("data", "fun")}
        self.matcher = Matcher(data_and_functions, source.pattern_binders)
        lhs = source.lhs
        self.head = (type(lhs), lhs.name) if isinstance(lhs, Prim) else (type(lhs), lhs.op) if hasattr(lhs, "op") else None

    @property
    def param_kinds(self) -> dict[str, str]:
        return {p: self.kinds.get(PREFIX + p, "size") for p in self.params}

    def could_match(self, node: Node) -> bool:
        if self.head is None:
            return True
        cls, name = self.head
        return type(node) is cls and getattr(node, "name", getattr(node, "op", None)) == name

    def candidates(self, node, args, ctx):
        b0: dict = {}
        for p, v in zip(self.params, args):
            key = PREFIX + p
            if self.param_kinds[p] == "dim":
                b0[key] = v
            else:
                b0[key] = arith.Var(key) if v is None else arith.as_expr(v)
        label = Step(self.rule_name, args).label
        for b in self.matcher.match(self.lhs, node, b0):
            b, assumptions, failure = self._conditions(b, label)
            if failure is not None:
                yield failure
                continue
            builder = Instantiator(b, self.shared_binders, ctx.names)
            yield Candidate(builder.build(self.rhs), assumptions)

    def _conditions(self, b: dict, label: str):
        assumptions = []
        for c in self.conditions:
            if c.kind == "type":
                node = b.get(c.var)
                if node is None or node.type is None:
                    return b, (), Failure(f"{label}: {c.var[1:]} has no type to check `{c.text}` against", True)
                b2 = match_type(c.type, node.type, b)
                if b2 is None:
                    return b, (), Failure(f"{label}: {c.var[1:]} has type {node.type}, not `{c.text.split(':', 1)[1].strip()}`", True)
                b = b2
            elif c.kind == "predicate":
                if not c.predicate.fn(*(b[a] for a in c.args)):
                    return b, (), Failure(f"{label}: the condition {c.text} does not hold", True)
            else:
                names = c.constraint.var_names()
                mapping = {n: b[n] for n in names if n.startswith(PREFIX) and n in b}
                concrete = c.constraint.subs(mapping)
                verdict = concrete.decide()
                if verdict is False:
                    return b, (), Failure(f"{label}: the condition {c.text} does not hold ({concrete.text})", True)
                if verdict is None:
                    assumptions.append(dataclasses.replace(concrete, reason=f"{label} needs {c.text}", origin=label))
        return b, tuple(assumptions), None


# ================================================================================================ python rules
@dataclass(frozen=True)
class PythonRuleSpec:
    name: str
    params: tuple[str, ...]
    doc: str


def python_rule(name: str, params: Iterable[str] = ()):
    """Declare a rule written in Python, in a module beside a rule file. The function takes the node, the
    :class:`~liftpy.rewrite.match.Names` in use (for fresh binders) and the rule's parameters, and yields
    replacement nodes; the engine checks each one as it checks text rules. Its docstring documents it."""

    def mark(fn):
        fn.__lift_rule__ = PythonRuleSpec(name, tuple(params), inspect.getdoc(fn) or "")
        return fn

    return mark


class PythonRule(RuleFamily):
    def __init__(self, spec: PythonRuleSpec, fn, group: str, span: Span | None):
        super().__init__(spec.name, spec.params, spec.doc, group, span)
        self.function = fn

    def candidates(self, node, args, ctx):
        args = tuple(arith.Var(PREFIX + p) if v is None else v for p, v in zip(self.params, args))
        for new in self.function(node, ctx.names, *args):
            if isinstance(new, Failure):
                yield new
            else:
                yield Candidate(new)


# ================================================================================================ catalogue
class Catalogue(Mapping[str, RuleFamily]):
    """Rules by name, and their names by group (the file they come from: ``algorithmic``, ``lowering``...)."""

    def __init__(self, families: Iterable[RuleFamily] = ()):
        self._rules: dict[str, RuleFamily] = {}
        self.groups: dict[str, list[str]] = {}
        #: named strategies with parameters, from the ``STRATEGIES`` of the modules beside the rule files
        self.strategies: dict[str, Callable[..., Strategy]] = {}
        for f in families:
            self.add(f)

    def merge(self, other: "Catalogue") -> None:
        """Add ``other``'s rules (after this catalogue's, group by group) and strategies."""
        for family in other.values():
            self.add(family)
        self.strategies.update(other.strategies)

    def add(self, family: RuleFamily):
        if family.rule_name in self._rules:
            other = self._rules[family.rule_name]
            where = f" (also at {other.span})" if other.span else ""
            raise RewriteError(f"rule {family.rule_name} is defined twice{where}", family.span)
        self._rules[family.rule_name] = family
        self.groups.setdefault(family.group, []).append(family.rule_name)

    def __getitem__(self, name: str) -> RuleFamily:
        try:
            return self._rules[name]
        except KeyError:
            import difflib

            close = difflib.get_close_matches(name, list(self._rules), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise RewriteError(f"no rule named {name}{hint}") from None

    def __contains__(self, name) -> bool:
        return name in self._rules

    def __iter__(self):
        return iter(self._rules)

    def __len__(self):
        return len(self._rules)

    def __getattr__(self, name: str) -> RuleFamily:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except RewriteError as e:
            raise AttributeError(e.message) from None

    def markdown(self) -> str:
        """The catalogue as a Markdown document: each group, each rule with its equation and documentation."""
        lines = ["# The rewrite rule catalogue", "",
                 "Generated from the rule files by `liftpy.rewrite.rules.catalogue().markdown()`.", ""]
        for group, names in self.groups.items():
            lines += [f"## {group}", ""]
            for n in names:
                f = self._rules[n]
                params = f"({', '.join(f.params)})" if f.params else ""
                where = f" ({Path(f.span.filename).name}:{f.span.line})" if f.span else ""
                first, _, rest = f.doc.strip().partition("\n")
                equation = first.split(": ", 1)[1] if ": " in first else first
                lines += [f"### `{n}{params}`{where}", "", f"`{equation}`", ""]
                if rest.strip():
                    lines += [rest.strip(), ""]
        return "\n".join(lines)


def load_text(text: str, filename: str = "<rules>", group: str | None = None) -> Catalogue:
    """Read rules from text (the format in this module's docstring)."""
    return _of_sources(read_rules(text, filename), group or Path(filename).stem)


def _of_sources(sources, group: str) -> Catalogue:
    """The catalogue of rules read (:func:`read_rules`), in ``group``."""
    return Catalogue(TextRule(source, group) for source in sources)


def load_file(path: str | Path) -> Catalogue:
    """Read a rule file, and the Python rules and ``STRATEGIES`` of the module beside it (``x.py`` beside
    ``x.rules``). What the file's text elaborates to is kept in liftpy's disk cache (:mod:`liftpy._cache`),
    which a new process reads about ten times faster than it elaborates the rules again."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise RewriteError(f"cannot read the rule file ({e.strerror})", Span(str(path), 0, 0)) from None
    from .._cache import remembered

    sources = remembered("rules", f"{path}\n{text}", lambda: read_rules(text, str(path)))
    catalogue = _of_sources(sources, path.stem)
    beside = path.with_suffix(".py")
    if beside.exists():
        module = _module(beside)
        for family in _python_rules(module, beside, path.stem):
            catalogue.add(family)
        catalogue.strategies.update(getattr(module, "STRATEGIES", {}))
    return catalogue


def _import(path: Path):
    """The module of the Python file ``path``: the catalogue's own by its name in ``liftpy.catalogue``; a module
    imported already (a derivation imported by its package) as it is; a module of a package folder inside a
    package of its own, so that it may import its neighbours relatively; any other file on its own."""
    from .._paths import data_dir

    folder = path.parent.resolve()
    if Path(str(data_dir("rewrites"))).resolve() == folder:
        return importlib.import_module(f"liftpy.catalogue.{path.stem}")
    resolved = path.resolve()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve() == resolved:
            return module
    if (folder / "__init__.py").exists():
        package = f"liftpy_rules_{folder.name}_{abs(hash(str(folder)))}"
        if package not in sys.modules:
            spec = importlib.util.spec_from_file_location(package, folder / "__init__.py",
                                                          submodule_search_locations=[str(folder)])
            sys.modules[package] = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(sys.modules[package])
        return importlib.import_module(f"{package}.{path.stem}")
    spec = importlib.util.spec_from_file_location(f"liftpy_rules_{path.stem}_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _module(path: Path):
    """:func:`_import`, its errors reported where they are."""
    try:
        return _import(path)
    except SyntaxError as e:
        raise RewriteError(f"Python rules: {e.msg}", Span(str(path), e.lineno or 0, e.offset or 0)) from None
    except Exception as e:  # the module's own error, reported where it is
        raise RewriteError(f"Python rules do not load: {type(e).__name__}: {e}", Span(str(path), 0, 0)) from None


def _python_rules(module, path: Path, group: str) -> list[PythonRule]:
    out = []
    for obj in vars(module).values():
        spec = getattr(obj, "__lift_rule__", None)
        if spec is None:
            continue
        line = inspect.getsourcelines(obj)[1]
        if not spec.doc:
            raise RewriteError(f"rule {spec.name} has no documentation (a docstring)", Span(str(path), line, 1))
        out.append(PythonRule(spec, obj, group, Span(str(path), line, 1)))
    return out


#: the rule files of the catalogue, in the order they are documented
GROUPS = ("algorithmic", "fusion", "interchange", "reduction", "simplification", "tiling", "vectorisation",
          "lowering", "memory")


def catalogue(*extra: str | Path) -> Catalogue:
    """Every rule in ``rewrites/``; with ``extra`` rule files, those files' rules too, after them (each file with
    the Python rules and strategies of the module beside it). Loaded once for each list of files; the rules of
    ``rewrites/`` are the same objects in every one. Nothing but ``rewrites/`` is loaded unless asked for: this
    is how the worked derivations of ``examples/derivations/`` load their rules."""
    return _catalogue(tuple(str(Path(p).resolve()) for p in extra))


@lru_cache(maxsize=None)
def _catalogue(extra: tuple[str, ...]) -> Catalogue:
    from .._paths import data_dir

    out = Catalogue()
    if extra:
        out.merge(_catalogue(()))
        for path in extra:
            out.merge(load_file(path))
        return out
    folder = Path(str(data_dir("rewrites")))
    files = sorted(folder.glob("*.rules"), key=lambda p: (GROUPS.index(p.stem) if p.stem in GROUPS else len(GROUPS), p.stem))
    for path in files:
        out.merge(load_file(path))
    return out


def __getattr__(name: str):
    """``rules.splitJoin`` and friends: the catalogue's rules as attributes of this module."""
    if name.startswith("_"):
        raise AttributeError(name)
    try:
        return catalogue()[name]
    except RewriteError as e:
        raise AttributeError(e.message) from None


def __dir__():
    return sorted(list(globals()) + list(catalogue()))

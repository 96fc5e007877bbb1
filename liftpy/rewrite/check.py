"""Checking a rule's proposed replacement before it enters the program.

A replacement gets fresh names for the binders that would clash, must not move a variable out of its
binder's scope, must type-check where it stands (in the environment of what it replaces) and must have the
same type. Sizes the type comparison cannot decide are discharged with Z3 from what the program already
requires, or else become assumptions of the program. Checking reuses the types of the subtrees a rewrite
kept, so its cost follows the size of what is new.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Iterable

from .. import arith
from ..arith import Expr
from ..constraints import Constraint
from ..errors import LiftError
from ..ir import Lambda, Let, Node, Prim, ScalarOp, Var, map_sizes, walk
from ..primitives import PRIMITIVES, infer_scalar_op
from ..typecheck import Checker
from ..types import ArrayType, FunType, TupleType, Type, VectorType
from .match import PREFIX, binders, free_vars, freshen, is_function, static_size_names
from .strategies import Context, Failure, Step, Success

if TYPE_CHECKING:
    from .rules import Rule


@dataclass(frozen=True)
class Candidate:
    """A replacement a rule proposes, before the engine checks it."""

    node: Node
    assumptions: tuple[Constraint, ...] = ()


def finish(rule: Rule, old: Node, c: Candidate, ctx: Context, index: int, before: set[str]) -> Success | Failure:
    """Check a proposed replacement: fresh binders, no escaping variable, well-typed, same type."""
    label = rule.label
    new, assumptions, tuning, docs = c.node, c.assumptions, (), ()
    placeholders = {}
    for p, v in zip(rule.family.params, rule.args):
        if v is None and rule.family.param_kinds[p] == "size":
            name = PREFIX + p
            if _mentions_size(new, name) or any(name in a.var_names() for a in assumptions):
                fresh = ctx.names.fresh(p)
                placeholders[name] = arith.Var(fresh)
                tuning += (fresh,)
                docs += ((fresh, f"{p} of {label}"),)
    for v in rule.args:  # a size expression given by the user: its new names are tuning parameters
        if isinstance(v, Expr):
            tuning += tuple(n for n in sorted(v.var_names()) if n not in before)
    if placeholders:
        new = map_sizes(new, lambda e: e.subs(placeholders))
        assumptions = tuple(a.subs(placeholders) for a in assumptions)
    taken = before - binders(old)
    new = freshen(new, taken, ctx.names)
    escaped = free_vars(new) - free_vars(old)
    if escaped:
        return Failure(f"{label} would move {', '.join(sorted(escaped))} out of its scope", True)
    if old.type is None:
        return Failure(f"{label}: the expression has no type (rewrite a type-checked program)", True)
    env = {}
    for n in walk(old):
        if isinstance(n, Var) and n.name in free_vars(old):
            if n.type is None:
                return Failure(f"{label}: {n.name} has no type (rewrite a type-checked program)", True)
            env[n.name] = n.type
    checker = _ReusingChecker()
    try:
        if isinstance(old, Lambda):
            if not is_function(new):
                return Failure(f"{label} replaced a function by a value", True)
            typed = checker.fun(new, old.type.param, env, new)
            new_type, old_type = typed.type.result, old.type.result
        else:
            if is_function(new):
                return Failure(f"{label} replaced a value by a function", True)
            typed = checker.check(new, env)
            new_type, old_type = typed.type, old.type
    except LiftError as e:
        return Failure(f"{label} gives an ill-typed expression: {e.message}", True)
    pairs = _size_pairs(new_type, old_type)
    if pairs is None:
        return Failure(f"{label} changes the type from {old_type} to {new_type}", True)
    premises = None
    for a, b in pairs:
        same = Constraint("equal", a, b, f"{label} keeps the type: {a} == {b}", old.span, label)
        verdict = same.decide()
        if verdict is False:
            return Failure(f"{label} changes the type from {old_type} to {new_type}", True)
        if verdict is None:
            if premises is None:
                # Premises: the replacement's own constraints (split's divisibility...), which the type checker
                # records for the new program, and those of what it replaces, which held wherever the original
                # program was valid -- the rewrite need only agree there.
                premises = assumptions + subtree_constraints(typed) + subtree_constraints(old)
            if not implied(same, premises):
                assumptions += (same,)
    ctx.names.taken.update(binders(typed))
    step = Step(rule.family.rule_name, rule.args, ctx.position, index)
    return Success(typed, (step,), tuple(dict.fromkeys(assumptions)), tuning, docs)


class _ReusingChecker(Checker):
    """The type checker, reusing the types of subtrees a rewrite kept: a typed node whose free variables have
    the types they had when it was checked has the same type again (types depend on nothing else)."""

    def check(self, node, env):
        if node.type is not None and _same_env(node, env):
            return node
        return super().check(node, env)

    def fun(self, fun, arg_type, env, at):
        t = fun.type
        if isinstance(t, FunType) and t.param == arg_type and isinstance(fun, Lambda) and _same_env(fun, env):
            return fun
        return super().fun(fun, arg_type, env, at)


def subtree_constraints(node: Node) -> tuple[Constraint, ...]:
    """The size constraints the type rules of a typed subtree's nodes impose; cached on the (immutable) nodes,
    so subtrees that rewrites share are looked at once."""
    cached = node.__dict__.get("_constraints")
    if cached is not None:
        return cached
    own: list[Constraint] = []
    env = _free_var_types(node)
    if env is not None and node.type is not None and isinstance(node, (Prim, ScalarOp)):
        checker = _ReusingChecker()  # children keep their types: only this node's own rule runs
        try:
            if isinstance(node, Prim):
                PRIMITIVES[node.name].infer(checker, node, env)
            else:
                infer_scalar_op(checker, node, env)
            own = checker.constraints
        except LiftError:
            own = []
    out = tuple(own)
    for child in node.children():
        out += subtree_constraints(child)
    object.__setattr__(node, "_constraints", out)
    return out


def _same_env(node: Node, env) -> bool:
    types = _free_var_types(node)
    return types is not None and all(env.get(name) == t for name, t in types.items())


def _free_var_types(node: Node) -> dict | None:
    """The types a typed node's free variables had when it was checked (None if one is unknown); cached."""
    cached = node.__dict__.get("_free_types", False)
    if cached is not False:
        return cached
    free = free_vars(node)
    out: dict | None = {}
    for n in walk(node):
        if isinstance(n, Var) and n.name in free:
            if n.type is None:
                out = None
                break
            out[n.name] = n.type
    object.__setattr__(node, "_free_types", out)
    return out


def implied(goal: Constraint, assumptions: Iterable[Constraint]) -> bool:
    """Whether ``goal`` follows from ``assumptions`` (and the variables' ranges), by Z3; False when unsure."""
    assumptions = tuple(assumptions)
    if not assumptions:
        return False
    key = lambda c: (c.kind, c.lhs, c.rhs)
    return _implied(key(goal), frozenset(map(key, assumptions)))


@lru_cache(maxsize=4096)
def _implied(goal: tuple, assumptions: frozenset, timeout_ms: int = 300) -> bool:
    """``implied`` on (kind, lhs, rhs) triples, cached: explorations meet the same questions again and again."""
    import z3

    from ..arith import to_z3

    goal = Constraint(*goal, "")
    assumptions = tuple(Constraint(*a, "") for a in sorted(assumptions, key=str))
    env: dict = {}

    def term(c: Constraint):
        lhs, rhs = to_z3(c.lhs, env), to_z3(c.rhs, env)
        if c.kind == "divides":
            return z3.And(lhs != 0, rhs % lhs == 0)
        return lhs == rhs if c.kind == "equal" else lhs >= rhs

    try:
        solver = z3.Solver()
        solver.set("timeout", timeout_ms)
        facts = [term(c) for c in assumptions]
        negated = z3.Not(term(goal))
        variables = set()
        for c in assumptions + (goal,):
            variables |= c.lhs.free_vars() | c.rhs.free_vars()
        for v in variables:
            if v.range.lo is not None:
                solver.add(to_z3(v, env) >= to_z3(v.range.lo, env))
            if v.range.hi is not None:
                solver.add(to_z3(v, env) <= to_z3(v.range.hi, env))
        solver.add(*facts)
        solver.add(negated)
        return solver.check() == z3.unsat
    except (TypeError, z3.Z3Exception):  # a term Z3 does not take, or an error inside Z3 (an internal assertion,
        return False                     # met once after a timeout): unsure


def _mentions_size(node: Node, name: str) -> bool:
    for n in walk(node):
        if isinstance(n, Prim) and any(name in static_size_names(p) for p in n.params):
            return True
        if isinstance(n, Let) and n.declared is not None and name in n.declared.size_names():
            return True
    return False


def _size_pairs(a: Type, b: Type) -> list | None:
    """The pairs of sizes two types of the same shape have in the same places (None if the shapes differ)."""
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        rest = _size_pairs(a.elem, b.elem)
        return None if rest is None else ([(a.size, b.size)] if a.size != b.size else []) + rest
    if isinstance(a, VectorType) and isinstance(b, VectorType):
        return None if a.scalar != b.scalar else ([(a.width, b.width)] if a.width != b.width else [])
    if isinstance(a, TupleType) and isinstance(b, TupleType):
        if len(a.elems) != len(b.elems):
            return None
        out = []
        for x, y in zip(a.elems, b.elems):
            sub = _size_pairs(x, y)
            if sub is None:
                return None
            out += sub
        return out
    if isinstance(a, FunType) and isinstance(b, FunType):
        p, r = _size_pairs(a.param, b.param), _size_pairs(a.result, b.result)
        return None if p is None or r is None else p + r
    return [] if a == b else None

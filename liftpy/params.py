"""Tuning parameters: the space of valid configurations of a parametric program (paper sections 5.2-5.3).

A program with symbolic tuning parameters (``param θ, κ`` or the fresh parameters of a rewrite rule) is valid
only for some values of them. :func:`parameters` collects the constraints:

* from the types, as the type checker records them once the input sizes are bound: ``split`` and
  ``asVector`` divisibility, slide windows that fit, equal lengths where a zip or a declared type needs them;
* vector widths in {1, 2, 4, 8, 16};
* from the device (a live PyOpenCL device or a named target profile): work-group and work-item sizes, local
  memory, the largest buffer, and a budget of private values per work-item;
* constraints users add by hand, by name (``require``).

Every constraint is a named Z3 term (through :func:`liftpy.arith.to_z3`): Z3 decides whether any configuration
exists and explains an empty space with an unsat core (:meth:`ParameterSpace.explain_unsat`). Sampling follows
the paper: parameters in dependency order (a topological sort of the constraint graph, random among equals),
each value drawn at random among those still feasible given the choices so far -- a depth-first search over
arc-consistent finite domains with forward checking and backtracking, on constraints compiled to Python --
with no duplicates, reproducibly from a seed. (Asking Z3 for every feasible value instead was measured at 88 s
for one parameter of VGG-16 layer 2, far from the 10 s budget for a thousand samples.)
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from importlib import resources
from typing import Iterable, Mapping

from . import arith
from .codegen.launch import parallel_maps
from .codegen.memory import placements, scalar_count
from .constraints import Constraint
from .device import Device
from .errors import ConstraintError, SizeError
from .ir import Prim, Program, walk
from .primitives import primitive_of
from .typecheck import size_bindings, specialize, typecheck

VECTOR_WIDTHS = (1, 2, 4, 8, 16)


# ------------------------------------------------------------------------------------------------ devices
def target_profiles() -> dict[str, Device]:
    """The device profiles shipped with liftpy (``liftpy/targets.json``)."""
    data = json.loads(resources.files("liftpy").joinpath("targets.json").read_text())
    out = {}
    for key, d in data.items():
        if key.startswith("_"):
            continue
        out[key] = Device(**{**d, "max_work_item_sizes": tuple(d["max_work_item_sizes"])})
    return out


def resolve_device(device) -> Device:
    """A device description from a profile name, a Device, a pyopencl device, a device spec, or None (default)."""
    if isinstance(device, Device):
        return device
    if isinstance(device, str) and device in target_profiles():
        return target_profiles()[device]
    from .runtime import device_info, get_device

    return device_info(get_device(device))


# ------------------------------------------------------------------------------------------------ the space
@dataclass(frozen=True)
class Parameter:
    name: str
    low: int
    high: int
    doc: str = ""

    def __str__(self) -> str:
        doc = f": {self.doc}" if self.doc else ""
        return f"{self.name} in [{self.low}, {self.high}]{doc}"


@dataclass(frozen=True)
class NamedConstraint:
    """A constraint with a unique name, its reason and where it comes from."""

    name: str
    constraint: Constraint | None  # None for a membership constraint
    members: tuple[int, ...] = ()  # for "var in {...}"
    var: str = ""

    @property
    def text(self) -> str:
        if self.constraint is None:
            return f"{self.var} in {{{', '.join(map(str, self.members))}}}"
        return self.constraint.text

    @property
    def reason(self) -> str:
        if self.constraint is None:
            return f"OpenCL vector widths: {self.var} must be one of {', '.join(map(str, self.members))}"
        return self.constraint.reason

    def var_names(self) -> frozenset[str]:
        return frozenset({self.var}) if self.constraint is None else self.constraint.var_names()

    def holds(self, config: Mapping[str, int]) -> bool:
        """Evaluate with every variable bound (compiled: the sampler calls this very often)."""
        if self.constraint is None:
            return config[self.var] in self.members
        check = self.__dict__.get("_compiled")
        if check is None:
            check = _compile(self.constraint)
            object.__setattr__(self, "_compiled", check)
        try:
            return check(config)
        except ZeroDivisionError:  # a division by zero means the configuration is invalid here
            return False

    def z3(self, variables):
        import z3

        if self.constraint is None:
            v = variables[self.var]
            return z3.Or(*[v == m for m in self.members])
        c = self.constraint
        lhs, rhs = arith.to_z3(c.lhs, variables), arith.to_z3(c.rhs, variables)
        if c.kind == "divides":
            return z3.And(lhs != 0, rhs % lhs == 0)
        if c.kind == "equal":
            return lhs == rhs
        return lhs >= rhs

    def __str__(self) -> str:
        return f"{self.name}: {self.text}  ({self.reason})"


@dataclass(frozen=True)
class Count:
    value: int
    exact: bool

    def __str__(self) -> str:
        return f"{self.value}" if self.exact else f"about {self.value} (estimated)"


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    violated: tuple[NamedConstraint, ...] = ()

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if self.ok:
            return "ok"
        return "violates " + "; ".join(str(c) for c in self.violated)


@dataclass
class ParameterSpace:
    """The valid configurations of a program's tuning parameters for given sizes and device."""

    program: Program
    sizes: dict[str, int]
    device: Device
    parameters: list[Parameter]
    constraints: list[NamedConstraint]
    _domains: dict[str, list[int]] | None = field(default=None, repr=False)

    # -------------------------------------------------------------------------------- user constraints
    def require(self, name: str, condition: str, reason: str = "") -> "ParameterSpace":
        """Add a named constraint by hand: ``space.require("tiles", "θ % 2 == 0")``; returns the space."""
        constraint = _parse_condition(condition, reason or f"required: {condition}")
        parameter_names = [p.name for p in self.parameters]
        unknown = sorted(constraint.var_names() - set(parameter_names) - set(self.sizes))
        if unknown:  # refused here: the solver and the sampler would meet a variable with no value
            label = f"requirement {name!r} ({condition})" if name else f"requirement {condition!r}"
            raise ConstraintError(
                f"{label} names {', '.join(unknown)}, neither a tuning parameter nor a size "
                f"(tuning parameters: {', '.join(parameter_names) or 'none'}; sizes: {', '.join(self.sizes) or 'none'})")
        self.constraints.append(NamedConstraint(name, constraint))
        self._domains = None
        return self

    # -------------------------------------------------------------------------------- checking
    def check(self, config: Mapping[str, int]) -> CheckResult:
        """Every constraint evaluated on a full configuration; the violated ones by name."""
        names = [p.name for p in self.parameters]
        missing = [n for n in names if n not in config]
        unknown = sorted(set(config) - set(names))
        if unknown:  # first: a misspelt name is the mistake, the parameter it leaves missing follows from it
            also = f"; the configuration also lacks {', '.join(missing)}" if missing else ""
            raise ConstraintError(f"unknown tuning parameter(s) {', '.join(unknown)} "
                                  f"(parameters: {', '.join(names) or 'none'}){also}")
        if missing:
            raise ConstraintError(f"the configuration lacks {', '.join(missing)}")
        values = {**self.sizes, **{k: int(v) for k, v in config.items()}}
        bad = [c for c in self._all_constraints() if not c.holds(values)]
        return CheckResult(not bad, tuple(bad))

    def _range_constraints(self) -> list[NamedConstraint]:
        out = []
        for p in self.parameters:
            out.append(NamedConstraint(f"range.{p.name}.low", Constraint("at_least", arith.Var(p.name), p.low,
                                                                          f"{p.name} is at least {p.low}")))
            out.append(NamedConstraint(f"range.{p.name}.high", Constraint("at_least", p.high, arith.Var(p.name),
                                                                           f"{p.name} is at most {p.high}")))
        return out

    def _all_constraints(self) -> list[NamedConstraint]:
        return self._range_constraints() + self.constraints

    # -------------------------------------------------------------------------------- Z3
    def _solver(self, track: bool = False):
        import z3

        solver = z3.Solver()
        solver.set("timeout", 20000)
        variables = {p.name: z3.Int(p.name) for p in self.parameters}
        for c in self._all_constraints():
            term = c.z3(variables)
            if track:
                solver.assert_and_track(term, z3.Bool(c.name))
            else:
                solver.add(term)
        return solver, variables

    def satisfiable(self) -> bool:
        import z3

        if not self.parameters:
            return all(c.holds(self.sizes) for c in self.constraints)
        solver, _ = self._solver()
        return solver.check() == z3.sat

    def explain_unsat(self) -> list[NamedConstraint]:
        """When no configuration is valid: a minimal set of conflicting constraints (Z3's unsat core)."""
        import z3

        if not self.parameters:
            return [c for c in self.constraints if not c.holds(self.sizes)]
        solver, _ = self._solver(track=True)
        solver.set("core.minimize", True)
        if solver.check() != z3.unsat:
            return []
        names = {str(b) for b in solver.unsat_core()}
        return [c for c in self._all_constraints() if c.name in names]

    def domains(self) -> dict[str, list[int]]:
        """Each parameter's candidate values: its range filtered by the constraints on it alone, then made
        arc-consistent with every constraint between two parameters (a value stays only if some value of the
        other parameter agrees with it)."""
        if self._domains is None:
            self._domains = self._consistent_domains()
        return self._domains

    def _consistent_domains(self) -> dict[str, list[int]]:
        names = {p.name for p in self.parameters}
        domains: dict[str, list[int]] = {}
        for p in self.parameters:
            unary = [c for c in self._all_constraints() if c.var_names() & names <= {p.name}]
            values = dict(self.sizes)
            keep = []
            for v in range(p.low, p.high + 1):
                values[p.name] = v
                if all(c.holds(values) for c in unary):
                    keep.append(v)
            domains[p.name] = keep
        binary = [c for c in self.constraints if len(c.var_names() & names) == 2]
        changed = True
        while changed:  # AC-3, small enough to sweep until nothing changes
            changed = False
            for c in binary:
                a, b = sorted(c.var_names() & names)
                for x, y in ((a, b), (b, a)):
                    values = dict(self.sizes)
                    keep = []
                    for vx in domains[x]:
                        values[x] = vx
                        for vy in domains[y]:
                            values[y] = vy
                            if c.holds(values):
                                keep.append(vx)
                                break
                    if len(keep) != len(domains[x]):
                        domains[x] = keep
                        changed = True
        return domains

    # -------------------------------------------------------------------------------- enumeration and sampling
    def order(self, rng: random.Random | None = None) -> list[str]:
        """The parameters in dependency order (the paper's topological sort of the constraint graph): in
        ``d | n`` the parameters of n come before those of d; parameters not ordered by any constraint come
        in random order (or by name without ``rng``); a cycle is broken at its most constrained parameter."""
        names = [p.name for p in self.parameters]
        before: dict[str, set[str]] = {n: set() for n in names}
        for c in self.constraints:
            if c.constraint is not None and c.constraint.kind == "divides":
                for a in c.constraint.rhs.var_names() & set(names):
                    for b in c.constraint.lhs.var_names() & set(names):
                        if a != b:
                            before[b].add(a)
        domains = self.domains()
        order: list[str] = []
        remaining = list(names)
        while remaining:
            ready = [n for n in remaining if not (before[n] & set(remaining))]
            if not ready:  # a cycle: start with the most constrained
                ready = [min(remaining, key=lambda n: len(domains[n]))]
            if rng is not None:
                rng.shuffle(ready)
            else:
                ready.sort()
            chosen = ready[0]
            order.append(chosen)
            remaining.remove(chosen)
        return order

    def _search(self, order: list[str], rng: random.Random | None, limit: int | None):
        """Depth-first over the domains in ``order``: a constraint is checked once its parameters are all
        chosen, and a domain is filtered as soon as a constraint leaves it the only unchosen parameter."""
        names = set(order)
        involving: dict[str, list[tuple[NamedConstraint, frozenset]]] = {n: [] for n in order}
        for c in self.constraints:
            vars_ = c.var_names() & names
            for v in vars_:
                involving[v].append((c, vars_))
        values = dict(self.sizes)
        found = 0

        def go(level: int, domains: dict[str, list[int]]):
            nonlocal found
            if level == len(order):
                found += 1
                yield {n: values[n] for n in order}
                return
            name = order[level]
            candidates = list(domains[name])
            if rng is not None:
                rng.shuffle(candidates)
            bound = set(order[:level + 1])
            for v in candidates:
                values[name] = v
                narrowed = dict(domains)
                ok = True
                for c, vars_ in involving[name]:
                    free = vars_ - bound
                    if not free:
                        if not c.holds(values):
                            ok = False
                            break
                    elif len(free) == 1:
                        (u,) = free
                        keep = []
                        for w in narrowed[u]:
                            values[u] = w
                            if c.holds(values):
                                keep.append(w)
                        values.pop(u, None)
                        if not keep:
                            ok = False
                            break
                        narrowed[u] = keep
                if ok:
                    yield from go(level + 1, narrowed)
                    if limit is not None and found >= limit:
                        return
            values.pop(name, None)

        yield from go(0, self.domains())

    def enumerate(self, limit: int | None = None) -> Iterable[dict[str, int]]:
        """Every valid configuration (in a fixed order), up to ``limit``."""
        if not self.parameters:
            if self.satisfiable():
                yield {}
            return
        yield from self._search(self.order(), None, limit)

    def count(self, exact_limit: int = 2_000_000) -> Count:
        """The number of valid configurations: exact by enumeration when there are at most ``exact_limit``,
        otherwise estimated by sampling full assignments of the candidate values (and said so)."""
        if not self.parameters:
            return Count(1 if self.satisfiable() else 0, True)
        total = 0
        for _ in self.enumerate(limit=exact_limit + 1):
            total += 1
        if total <= exact_limit:
            return Count(total, True)
        domains = self.domains()
        product = math.prod(len(d) for d in domains.values())
        rng = random.Random(0)
        trials, hits = 20000, 0
        for _ in range(trials):
            config = {**self.sizes, **{n: rng.choice(d) for n, d in domains.items()}}
            hits += all(c.holds(config) for c in self.constraints)
        return Count(max(exact_limit, round(product * hits / trials)), False)

    def sample(self, n: int, seed: int = 0) -> list[dict[str, int]]:
        """Up to ``n`` distinct valid configurations, drawn at random (reproducible with ``seed``): each draw
        orders the parameters by dependency and picks every value at random among those still feasible."""
        if not self.parameters:
            return [{}] if self.satisfiable() else []
        if any(not d for d in self.domains().values()):
            return []
        rng = random.Random(seed)
        seen: set[tuple] = set()
        out: list[dict[str, int]] = []
        names = [p.name for p in self.parameters]
        misses = 0
        while len(out) < n and misses < 50 + 2 * n:
            config = next(self._search(self.order(rng), rng, 1), None)
            if config is None:
                break  # nothing is valid
            key = tuple(config[k] for k in names)
            if key in seen:
                misses += 1
                continue
            seen.add(key)
            out.append({k: config[k] for k in names})
        if len(out) < n:
            # few configurations exist (or random draws keep repeating): take the rest in order
            for config in self.enumerate():
                key = tuple(config[k] for k in names)
                if key not in seen:
                    seen.add(key)
                    out.append({k: config[k] for k in names})
                if len(out) >= n:
                    break
        return out

    def specialize(self, config: Mapping[str, int], program: Program | None = None) -> Program:
        """The program (or ``program``, another with the same tuning parameters) with the sizes and a valid
        configuration substituted (refused with the violations)."""
        result = self.check(config)
        if not result:
            raise ConstraintError(f"invalid configuration {dict(config)}: {result}")
        return specialize(program or self.program, {**self.sizes, **config})

    def describe(self) -> str:
        lines = [f"tuning parameters of {self.program.main.name} for {self.device.name}:"]
        lines += [f"  {p}" for p in self.parameters]
        lines.append("constraints:")
        lines += [f"  {c}" for c in self.constraints]
        return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ inference
def parameters(
    program: Program,
    sizes: Mapping[str, object] | None = None,
    device=None,
    ranges: Mapping[str, tuple[int, int]] | None = None,
    function: str | None = None,
) -> ParameterSpace:
    """The parameter space of ``program`` for concrete input ``sizes`` on ``device`` (a target profile name
    such as ``"mali-g72"``, a pyopencl device, or None for the default device)."""
    profile = resolve_device(device)
    bound = size_bindings(program, dict(sizes or {}))
    tuning = [t for t in program.tuning_params if t not in bound]
    fun = program.function(function)
    missing = _missing_sizes(program, fun, bound, tuning)
    if missing:
        raise SizeError(f"give values for the sizes {', '.join(missing)} (tuning parameters are free: "
                        f"{', '.join(tuning) or 'none'})")
    typed = typecheck(program, bound)
    typed_fun = typed.program.function(fun.name)
    named: list[NamedConstraint] = []
    used_names: dict[str, int] = {}

    def add(base: str, constraint: Constraint | None, **kw):
        used_names[base] = used_names.get(base, 0) + 1
        name = base if used_names[base] == 1 else f"{base}#{used_names[base]}"
        named.append(NamedConstraint(name, constraint, **kw))

    for c in typed.constraints:
        if not c.var_names():
            continue
        where = f"@{c.span.filename.rsplit('/', 1)[-1]}:{c.span.line}:{c.span.column}" if c.span else ""
        add(f"{c.origin}{where}", c)
    for v in _vector_width_params(typed_fun.body, tuning):
        add(f"vector_width.{v}", None, members=VECTOR_WIDTHS, var=v)
    for base, c in _device_constraints(typed_fun.body, profile):
        if c.var_names() or c.decide() is False:
            add(base, c)
    cap = 2 * max([v for v in bound.values()] + [8])
    docs = dict(program.param_docs)
    params = []
    for t in tuning:
        low, high = (ranges or {}).get(t, (1, cap))
        params.append(Parameter(t, low, high, docs.get(t, "")))
    return ParameterSpace(program, bound, profile, params, named)


def _missing_sizes(program, fun, bound, tuning) -> list[str]:
    names: list[str] = []
    for p in fun.params:
        if p.is_size:
            from .types import TupleType

            names += [p.name] if not isinstance(p.type, TupleType) else [
                f"{p.name}._{i}" for i in range(1, len(p.type.elems) + 1)]
        else:
            names += sorted(p.type.size_names())
    return [n for n in dict.fromkeys(names) if n not in bound and n not in tuning]


def _vector_width_params(body, tuning) -> list[str]:
    out = []
    for node in walk(body):
        if isinstance(node, Prim) and primitive_of(node).sets_vector_width:
            width = node.params[0]
            if isinstance(width, arith.Var) and width.name in tuning and width.name not in out:
                out.append(width.name)
    return out


def _device_constraints(body, device: Device) -> list[tuple[str, Constraint]]:
    """Resources the program needs, as expressions of its parameters, against the device's limits."""
    out: list[tuple[str, Constraint]] = []

    # work-groups: the parallel maps the code generator makes the launch of, one work-item per mapLcl element
    for parallel in parallel_maps(body):
        if parallel.level != "local" or parallel.stages:  # a copy to local memory is walked in strides
            continue
        d, n, node = parallel.dim, parallel.extent, parallel.node
        limit = device.max_work_item_sizes[d] if d < len(device.max_work_item_sizes) else 1
        out.append((f"device.work_item_size.{d}", Constraint(
            "at_least", limit, n, f"mapLcl({d}) over {n} work-items: the device allows {limit} in dimension {d}",
            node.span, "device")))
        group = arith.Const(1)
        for x in parallel.group:
            group = group * x
        out.append(("device.work_group_size", Constraint(
            "at_least", device.max_work_group_size, group,
            f"a work-group of {group} work-items: the device allows {device.max_work_group_size}",
            node.span, "device")))
    # private and local memory: the code generator's own memory plan, sizes still symbolic
    for placed in placements(body):
        words = placed.elements
        if placed.space == "private":
            out.append(("device.private_memory", Constraint(
                "at_least", device.private_mem_budget, words,
                f"{words} private values per work-item: the budget is {device.private_mem_budget}",
                placed.node.span, "device")))
        elif placed.space == "local":
            out.append(("device.local_memory", Constraint(
                "at_least", device.local_mem_size // 4, words,
                f"{words} floats in local memory: the device has {device.local_mem_size // 4}", placed.node.span,
                "device")))
        elif placed.space == "global":  # a kernel's result (a padded copy, a split sum's chunks' sums): one buffer
            out.append(("device.max_allocation", Constraint(
                "at_least", device.max_mem_alloc_size // 4, words,
                f"{words} floats in one buffer: the device allocates at most {device.max_mem_alloc_size // 4}",
                placed.node.span, "device")))
    total = scalar_count(body.type)
    out.append(("device.max_allocation", Constraint(
        "at_least", device.max_mem_alloc_size // 4, total,
        f"an output of {total} floats: the device allocates at most {device.max_mem_alloc_size // 4}",
        body.span, "device")))
    return out


def _compile(c: Constraint):
    from .arith.fast import compile_expr

    lhs, rhs = compile_expr(c.lhs), compile_expr(c.rhs)
    if c.kind == "divides":
        return lambda v: (d := lhs(v)) != 0 and rhs(v) % d == 0
    if c.kind == "equal":
        return lambda v: lhs(v) == rhs(v)
    return lambda v: lhs(v) >= rhs(v)


def _parse_condition(text: str, reason: str) -> Constraint:
    """``"a % b == 0"``, ``"a == b"``, ``"a >= b"``, ``"a <= b"`` over sizes and parameters."""
    from .elaborate import Elaborator, Scope, SizeB
    from .syntax import SName, SOp, parse_expression_syntax

    class Sizes(Elaborator):
        def unbound(self, name, kind, ast, scope):
            return arith.Var(name)

        def size_component(self, ast, scope):
            if isinstance(ast.expr, SName):  # a component of a tuple size, named as the space names it
                return SizeB(arith.Var(f"{ast.expr.name}._{ast.index}"))
            return super().size_component(ast, scope)

    ast = parse_expression_syntax(text, "<constraint>")
    el = Sizes()
    if not isinstance(ast, SOp) or ast.op not in ("==", ">=", "<=", ">", "<"):
        raise ConstraintError(f"a constraint is a comparison of sizes, got {text!r}")
    a, b = ast.args
    if ast.op == "==" and isinstance(a, SOp) and a.op == "%" and _is_zero(b):
        return Constraint("divides", el.size(a.args[1], Scope()), el.size(a.args[0], Scope()), reason)
    lhs, rhs = el.size(a, Scope()), el.size(b, Scope())
    if ast.op == "==":
        return Constraint("equal", lhs, rhs, reason)
    if ast.op == ">=":
        return Constraint("at_least", lhs, rhs, reason)
    if ast.op == "<=":
        return Constraint("at_least", rhs, lhs, reason)
    if ast.op == ">":
        return Constraint("at_least", lhs, rhs + 1, reason)
    return Constraint("at_least", rhs, lhs + 1, reason)


def _is_zero(ast) -> bool:
    from .syntax import SInt

    return isinstance(ast, SInt) and ast.value == 0

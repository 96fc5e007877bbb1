"""The pretty printer: IR back to the language's own syntax, so that ``parse(pretty(p)) == p``.

Primitive calls are written from their signatures; a lambda that only supplies a primitive's last argument is
written as the partial call it came from (``mapLcl(0, f)`` rather than ``x -> mapLcl(0, f, x)``); a ``Let`` is a
``val`` in a block. Long calls are broken over lines and indented.
"""

from __future__ import annotations

from .arith import Expr
from .ir import (
    Apply,
    Function,
    IndexFun,
    Lambda,
    Let,
    Literal,
    Node,
    Pattern,
    Prim,
    Program,
    PTuple,
    PVar,
    ScalarOp,
    Tuple,
    UserFun,
    Var,
    free_vars,
    walk,
)
from .primitives import PRIMITIVES, SCALAR_OPS
from .types import Type, render_type, size_text

WIDTH = 100
INDENT = "  "


def pretty(program: Program | Node) -> str:
    """The program (or expression) as liftpy source text."""
    if isinstance(program, Node):
        return pretty_expr(program)
    out: list[str] = []
    if program.tuning_params:
        docs = dict(program.param_docs)
        out.append("param " + ", ".join(f'{p} "{docs[p]}"' if docs.get(p) else p for p in program.tuning_params))
        out.append("")
    seen: dict[str, UserFun] = {}
    for fun in program.functions:
        for node in walk(fun.body):
            for uf in _user_funs(node):
                seen.setdefault(uf.name, uf)
    for uf in seen.values():
        out.append(_user_fun(uf))
        out.append("")
    for fun in program.functions:
        out.append(_function(fun))
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _user_funs(node: Node):
    if isinstance(node, UserFun):
        for inner in walk(node.body):
            yield from _user_funs(inner) if inner is not node else ()
        yield node
    elif isinstance(node, Apply) and isinstance(node.fun, UserFun):
        yield from _user_funs(node.fun)
    elif isinstance(node, Prim):
        for a in node.args:
            if isinstance(a, UserFun):
                yield from _user_funs(a)


def _user_fun(uf: UserFun) -> str:
    if isinstance(uf.param, PTuple):
        names = [p.name for p in uf.param.elems]
        types = list(uf.param_type.elems)
    else:
        names, types = [uf.param.name], [uf.param_type]
    params = ", ".join(f"{n}: {render_type(t)}" for n, t in zip(names, types))
    return f"def {uf.name}({params}): {render_type(uf.result_type)} = {pretty_expr(uf.body)}"


def _function(fun: Function) -> str:
    params = ",\n    ".join(f"{p.name}: {render_type(p.type)}" for p in fun.params)
    head = f"def {fun.name}(\n    {params})"
    if fun.result is not None:
        head += f"\n    : {render_type(fun.result)}"
    return f"{head} =\n{INDENT}" + _Printer().expr(fun.body, 1)


def pretty_expr(node: Node) -> str:
    return _Printer().expr(node, 0)


class _Printer:
    def expr(self, node: Node, indent: int, prec: int = 0) -> str:
        flat = self.flat(node, prec)
        if len(flat) + len(INDENT) * indent <= WIDTH or "\n" in flat:
            return flat
        return self.broken(node, indent, prec)

    # ------------------------------------------------------------------ one line
    def flat(self, node: Node, prec: int = 0) -> str:
        if isinstance(node, Var):
            return node.name
        if isinstance(node, Literal):
            return _literal(node)
        if isinstance(node, Tuple):
            return "(" + ", ".join(self.flat(e) for e in node.elems) + ")"
        if isinstance(node, Lambda):
            partial = self.partial(node)
            if partial is not None:
                return partial
            text = f"{_pattern(node.param)} -> {self.flat(node.body)}"
            return f"({text})" if prec > 0 else text
        if isinstance(node, Apply):
            fun = node.fun
            if isinstance(fun, UserFun):
                return f"{fun.name}({self.call_args(node.arg)})"
            return f"({self.flat(fun)})({self.flat(node.arg)})"
        if isinstance(node, Let):
            return "{ " + self.let_text(node, flat=True) + " }"
        if isinstance(node, ScalarOp):
            return self.scalar_op(node, prec)
        if isinstance(node, Prim):
            if node.name == "get":
                return f"{self.flat(node.args[0], 100)}._{node.params[0] + 1}"
            return f"{node.name}(" + ", ".join(self.prim_args(node)) + ")"
        if isinstance(node, UserFun):
            return node.name
        raise TypeError(f"cannot print {node!r}")

    def call_args(self, arg: Node) -> str:
        if isinstance(arg, Tuple):
            return ", ".join(self.flat(e) for e in arg.elems)
        return self.flat(arg)

    def let_text(self, node: Node, flat: bool, indent: int = 0) -> str:
        parts = []
        sep = "; " if flat else "\n" + INDENT * indent
        while isinstance(node, Let):
            declared = f": {render_type(node.declared)}" if node.declared is not None else ""
            value = self.flat(node.value) if flat else self.expr(node.value, indent)
            # the ';' keeps a next line that starts with '(' from reading as a call of this value
            parts.append(f"val {_pattern(node.pattern)}{declared} = {value}" + ("" if flat else ";"))
            node = node.body
        parts.append(self.flat(node) if flat else self.expr(node, indent))
        return sep.join(parts)

    def scalar_op(self, node: ScalarOp, prec: int) -> str:
        spec = SCALAR_OPS[node.op]
        if spec.infix:
            a, b = node.args
            left_prec = spec.precedence + 1 if spec.kind == "compare" else spec.precedence  # a < b < c is no syntax
            text = f"{self.flat(a, left_prec)} {spec.c} {self.flat(b, spec.precedence + 1)}"
            return f"({text})" if spec.precedence < prec else text
        if node.op in ("neg", "!"):
            symbol = "-" if node.op == "neg" else "!"
            text = f"{symbol}{self.flat(node.args[0], spec.precedence)}"
            return f"({text})" if spec.precedence < prec else text  # (-xs)._1: a projection binds tighter
        return f"{node.op}(" + ", ".join(self.flat(a) for a in node.args) + ")"

    def prim_args(self, node: Prim, printer=None) -> list[str]:
        printer = printer or (lambda n: self.flat(n))
        prim = PRIMITIVES[node.name]
        params, args = iter(node.params), iter(node.args)
        out = []
        if prim.variadic:
            return [printer(a) for a in node.args]
        for slot in prim.slots:
            if slot.static:
                out.append(_static(next(params)))
            else:
                out.append(printer(next(args)))
        return out

    def partial(self, lam: Lambda) -> str | None:
        """``x -> prim(..., x)`` written as ``prim(...)`` when x is used nowhere else."""
        if not isinstance(lam.param, PVar) or not isinstance(lam.body, (Prim, ScalarOp)):
            return None
        body = lam.body
        if isinstance(body, ScalarOp):
            spec = SCALAR_OPS[body.op]
            if spec.infix or spec.arity != 1 or not body.op.isidentifier():
                return None
            if not (isinstance(body.args[0], Var) and body.args[0].name == lam.param.name):
                return None
            return body.op
        if not body.args or body.name == "get":
            return None
        last = body.args[-1]
        if not (isinstance(last, Var) and last.name == lam.param.name):
            return None
        if any(lam.param.name in free_vars(a) for a in body.args[:-1]):
            return None
        prim = PRIMITIVES[body.name]
        if prim.variadic:
            return None
        shown = self.prim_args(body)[:-1]
        if not shown:
            return body.name
        return f"{body.name}(" + ", ".join(shown) + ")"

    # ------------------------------------------------------------------ several lines
    def broken(self, node: Node, indent: int, prec: int) -> str:
        """Too long for one line: static parameters stay after the name, other arguments one per line."""
        pad = INDENT * (indent + 1)
        if isinstance(node, Prim) and node.name != "get":
            return self.broken_call(node, indent, omit_last=False)
        if isinstance(node, Lambda) and self.partial(node) is not None and isinstance(node.body, Prim):
            return self.broken_call(node.body, indent, omit_last=True)
        if isinstance(node, Lambda) and self.partial(node) is None:
            text = f"{_pattern(node.param)} ->\n{pad}{self.expr(node.body, indent + 1)}"
            return f"({text})" if prec > 0 else text
        if isinstance(node, Let):
            return "{\n" + pad + self.let_text(node, flat=False, indent=indent + 1) + "\n" + INDENT * indent + "}"
        if isinstance(node, Tuple):
            return "(\n" + pad + f",\n{pad}".join(self.expr(e, indent + 1) for e in node.elems) + ")"
        if isinstance(node, Apply) and isinstance(node.fun, UserFun):
            elems = node.arg.elems if isinstance(node.arg, Tuple) else (node.arg,)
            return f"{node.fun.name}(\n{pad}" + f",\n{pad}".join(self.expr(e, indent + 1) for e in elems) + ")"
        return self.flat(node, prec)


    def broken_call(self, node: Prim, indent: int, omit_last: bool) -> str:
        pad = INDENT * (indent + 1)
        prim = PRIMITIVES[node.name]
        head: list[str] = []
        rest: list[str] = []
        if prim.variadic:
            rest = [self.expr(a, indent + 1) for a in node.args]
        else:
            params, args = iter(node.params), iter(node.args)
            for slot in prim.slots:
                if slot.static:
                    head.append(_static(next(params)))
                else:
                    rest.append(self.expr(next(args), indent + 1))
        if omit_last:
            rest = rest[:-1]
        first = f"{node.name}(" + ", ".join(head)
        if not rest:
            return first + ")"
        return first + ("," if head else "") + f"\n{pad}" + f",\n{pad}".join(rest) + ")"


def _static(p) -> str:
    if isinstance(p, Expr):
        return str(p)
    if isinstance(p, IndexFun):
        if not p.params:
            return p.name
        return f"{p.name}(" + ", ".join(str(x) for x in p.params) + ")"
    if isinstance(p, Type):
        return render_type(p)
    return str(p)


def _literal(node: Literal) -> str:
    if node.scalar == "float":
        text = repr(float(node.value))
        if "inf" in text or "nan" in text:
            raise ValueError(f"cannot print the float literal {text}")
        return text + "f"
    if node.scalar == "bool":
        return "true" if node.value else "false"
    return str(int(node.value))


def _pattern(p: Pattern) -> str:
    if isinstance(p, PVar):
        return p.name
    return "(" + ", ".join(_pattern(e) for e in p.elems) + ")"


__all__ = ["pretty", "pretty_expr", "size_text"]

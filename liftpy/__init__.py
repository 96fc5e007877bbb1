"""liftpy: a Lift-style functional array language compiled to specialised OpenCL kernels.

The route of a program through the compiler, one module per stage:
parse (:mod:`liftpy.syntax`, :mod:`liftpy.elaborate`) -> type (:mod:`liftpy.typecheck`) -> views, memory and
kernels (:mod:`liftpy.codegen`) -> run (:mod:`liftpy.runtime`); :mod:`liftpy.interpreter` gives every program
its meaning and :mod:`liftpy.pretty` prints it back.
"""

from __future__ import annotations

from pathlib import Path

from .errors import InputError, LiftError, Span
from .interpreter import evaluate
from .ir import Program
from .pretty import pretty
from .typecheck import TypedProgram, typecheck

__version__ = "0.1.0"


def parse(text: str, filename: str = "<string>") -> Program:
    """Parse and elaborate liftpy source text into a program (raises LiftError with file:line:col)."""
    from .elaborate import elaborate
    from .syntax import parse_file_syntax

    return elaborate(parse_file_syntax(text, filename))


#: the largest program file read (a program is a few KiB; a larger file is most likely not a program)
MAX_PROGRAM_BYTES = 16 * 2**20


def load(path: str | Path) -> Program:
    """Read a .lift file: a regular file (not a FIFO, a device or a directory, whose reading could hang or never
    end) of at most MAX_PROGRAM_BYTES, UTF-8, defining at least one function."""
    path = Path(path)
    where = Span(str(path), 0, 0)
    try:
        data = _read_program_file(path)
    except FileNotFoundError:
        raise InputError("no such file", where) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a .lift file", where) from None
    except OSError as e:  # a file in the path, no permission...
        raise InputError(f"cannot read it ({e.strerror})", where) from None
    if not data.strip():
        raise InputError("the file is empty: a program defines at least one function (def name(...) = ...)",
                         Span(str(path), 1, 1, source=""))
    try:
        text = _text_lines(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        # the place of the first undecodable byte: everything before it decodes, so its column counts characters
        before = _text_lines(data[:e.start].decode("utf-8"))
        line, column = before.count("\n") + 1, len(before) - before.rfind("\n")
        span = Span(str(path), line, column, source=_text_lines(data.decode("utf-8", errors="replace")))
        raise InputError(f"not UTF-8 text (byte 0x{data[e.start]:02x}: {e.reason})", span) from None
    from .elaborate import elaborate
    from .syntax import parse_file_syntax

    syntax = parse_file_syntax(text, str(path))
    if not syntax.items:  # a file of macros alone (the prelude) has definitions, and is a program file
        raise InputError("no definition: a program defines at least one function (def name(...) = ...)",
                         Span(str(path), 1, 1, source=text))
    return elaborate(syntax)


def _read_program_file(path: Path) -> bytes:
    """The file's bytes, refused before a byte is read unless it is a regular file of at most MAX_PROGRAM_BYTES.
    Opened without blocking, so that a FIFO is refused rather than waited on, then asked what it is."""
    import os
    import stat

    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(descriptor, "rb") as file:
        info = os.fstat(file.fileno())
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(path)
        mode = info.st_mode
        if not stat.S_ISREG(mode):
            kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                    else "a socket" if stat.S_ISSOCK(mode) else "a special file")
            raise InputError(f"is {kind}, not a .lift file (a program is read from a regular file)",
                             Span(str(path), 0, 0))
        size = info.st_size
        if size <= MAX_PROGRAM_BYTES:  # it may grow after fstat: read no more than the limit either way
            data = file.read(MAX_PROGRAM_BYTES + 1)
            size = len(data)
    if size > MAX_PROGRAM_BYTES:
        raise InputError(f"is larger than {MAX_PROGRAM_BYTES // 2**20} MiB ({size} bytes): not a program file",
                         Span(str(path), 0, 0))
    return data


def _text_lines(text: str) -> str:
    """Line ends as a file read in text mode has them (universal newlines): \\r\\n and \\r become \\n."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def compile(program: Program, sizes=None, device=None, function: str | None = None):
    """Generate OpenCL kernels for a low-level program with every size bound (see liftpy.runtime.Executable):
    ``exe.sources``, ``exe.launch``, ``exe.buffers``, ``exe.run(inputs)``."""
    from .runtime import compile as compile_program

    return compile_program(program, sizes, device, function)


def parameters(program: Program, sizes=None, device=None, **options):
    """The tuning-parameter space of a program for concrete sizes on a device or target profile
    (see liftpy.params.parameters): space.parameters, .constraints, .count(), .sample(n), .check(config)."""
    from .params import parameters as space

    return space(program, sizes, device, **options)


def tune(subject, trials: int = 100, db="tuning.sqlite", device=None, seed: int = 0, sizes=None, **options):
    """Auto-tune through the automatic route a program file at ``sizes``, or a convolution layer (a name such as
    "vgg16.7", a ConvLayer, or make_layer's arguments as a dict: liftpy/nn/conv2d.lift at its sizes); returns
    the best (liftpy.tuning.Best: ``.program``, ``.config``, ``.time_ms``, ``.compile()``): see
    liftpy.tuning.tune_program and liftpy.nn.tune_layer. ``options``: liftpy.tuning.Tuner's (``repeat``: timing
    rounds, ``batch``, ``timeout``, ``runner``: a RayRunner to tune on a cluster...)."""
    from .nn.conv import tune_layer
    from .tuning import tune_program

    if isinstance(subject, Path) or (isinstance(subject, str) and subject.endswith(".lift")):
        if sizes is None:
            raise InputError(f"tune({str(subject)!r}): give the program's sizes, sizes={{'N': 1, ...}}")
        return tune_program(subject, sizes, trials=trials, db=db, device=device, seed=seed, **options)
    if sizes is not None:
        raise InputError("tune: sizes are for a program file (.lift); a layer's shape says its sizes")
    return tune_layer(subject, trials=trials, db=db, device=device, seed=seed, **options)


def __getattr__(name: str):
    """Subpackages on first use: ``liftpy.nn.conv2d`` works after a plain ``import liftpy``."""
    if name in ("nn", "rewrite", "params", "tuning", "runtime", "codegen", "arith", "onnx"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'liftpy' has no attribute {name!r}")


__all__ = [
    "parameters",
    "tune",
    "compile","parse", "load", "typecheck", "evaluate", "pretty", "Program", "TypedProgram", "LiftError", "__version__"]

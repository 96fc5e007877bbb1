"""One hierarchy for every error liftpy reports to a user.

Each error carries *where* (a :class:`Span` into a source file, when there is one) and *why* (the message).
The command line prints ``file:line:col: error: message`` followed by the source line and a caret, and exits 1;
a Python traceback is only ever shown for a bug in liftpy itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Span:
    """A region of a source file: 1-based line and column of its start (and end, when known)."""

    filename: str
    line: int
    column: int
    end_line: int | None = None
    end_column: int | None = None
    # the whole text of the file, to show the offending line; not part of a span's identity
    source: str | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        if self.line <= 0:  # a whole file (one that does not exist, say)
            return self.filename
        return f"{self.filename}:{self.line}:{self.column}"

    def source_line(self) -> str | None:
        if self.source is None:
            return None
        lines = self.source.splitlines()
        if 1 <= self.line <= len(lines):
            return lines[self.line - 1]
        return None

    def caret(self) -> str | None:
        """The offending source line with a caret (and tildes to the end of the span on that line) under it."""
        text = self.source_line()
        if text is None:
            return None
        start = max(self.column - 1, 0)
        width = 1
        if self.end_line == self.line and self.end_column is not None and self.end_column > self.column:
            width = self.end_column - self.column
        marker = "".join(c if c == "\t" else " " for c in text[:start]) + "^" + "~" * (width - 1)
        return f"  {text}\n  {marker}"


class LiftError(Exception):
    """Base of every error liftpy raises for a user's mistake (never for its own bugs)."""

    kind = "error"

    def __init__(self, message: str, span: Span | None = None, notes: tuple[str, ...] = ()):
        super().__init__(message)
        self.message = message
        self.span = span
        self.notes = tuple(notes)

    def with_span(self, span: Span | None) -> "LiftError":
        """Attach a location if the error does not have one yet (used by callers that know where)."""
        if self.span is None and span is not None:
            self.span = span
        return self

    def render(self, show_source: bool = True) -> str:
        """``file:line:col: error: message``, then the source line with a caret and any notes."""
        where = f"{self.span}: " if self.span is not None else ""
        out = [f"{where}error: {self.message}"]
        if show_source and self.span is not None:
            caret = self.span.caret()
            if caret:
                out.append(caret)
        out.extend(f"  note: {note}" for note in self.notes)
        return "\n".join(out)

    def __str__(self) -> str:
        return self.render(show_source=False)


class LiftSyntaxError(LiftError):
    """The text does not parse (unbalanced parentheses, unexpected token, unknown primitive, wrong arity)."""


class LiftTypeError(LiftError):
    """The program parses but is ill-typed (zip of unequal lengths, map over a scalar...)."""


class SizeError(LiftError):
    """A size is missing, or a concrete size breaks a constraint (split by a size that does not divide)."""


class ArithError(LiftError):
    """Symbolic arithmetic cannot do what was asked (division by zero, an unbound variable)."""


class ConstraintError(LiftError):
    """Tuning parameters admit no valid configuration, or a configuration violates a constraint."""


class RewriteError(LiftError):
    """A rewrite rule does not load, does not apply, or produced an ill-typed program."""


class CodegenError(LiftError):
    """The program cannot be turned into OpenCL (illegal nesting, unknown size at compile time...)."""


class DeviceError(LiftError):
    """OpenCL is missing, a kernel does not build, or a launch fails; carries the build log and source path."""


class InputError(LiftError):
    """Inputs given to a program (files, arrays, command-line values) do not fit what the program expects."""


class ResourceError(LiftError):
    """A program at its sizes needs more memory than the host or the device has: refused before any of it is
    allocated, naming the sizes, the bytes and the limit."""


class NoCorrectTrial(InputError):
    """A tuning found no configuration that computes the right result (every trial wrong, failed or timed out):
    the program cannot run tuned, and a choice among programs leaves it out."""


class DatabaseError(InputError):
    """The tuning database cannot be opened, read or written (damaged, read-only, locked, its disk full); the
    message names the file, the cause and where a trial that could not be stored was kept. An InputError: the
    file is one the user gave (``--db``), and callers that refuse a bad input refuse it the same way."""


class InternalError(Exception):
    """A bug in liftpy itself, met while it worked for a user: not their mistake, so not a :class:`LiftError`.
    The traceback is saved to ``path`` so that it can be reported; the message says where."""

    def __init__(self, message: str, path=None):
        super().__init__(message)
        self.message = message
        self.path = path

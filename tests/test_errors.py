"""Bad input, tried as a new user would: one clear error line with its place, exit status 1, no traceback."""

import re
import subprocess
import sys

import pytest

from liftpy.cli import main

BAD_PROGRAMS = [
    # (name, source, extra arguments, expected location, words the message must contain)
    ("unbalanced", "def f(xs: [float]_n) =\n  map(x -> x + 1.0f, xs\n", [], "2:6", ["'(' is never closed"]),
    ("unbalanced-brace", "def f(xs: [float]_n) = {\n  map(x -> x, xs)\n", [], "1:24", ["'{' is never closed"]),
    ("stray-token", "def f(xs: [float]_n) = map(x -> x +, xs)\n", [], "1:36", ["unexpected ','"]),
    ("unknown-primitive", "def f(xs: [float]_n) =\n  mapp(x -> x + 1.0f, xs)\n", [], "2:3", ["unknown", "mapp", "did you mean map"]),
    ("wrong-arity", "def f(xs: [float]_n) =\n  split(2, 3, xs)\n", [], "2:3", ["split takes 2 arguments", "got 3"]),
    ("too-few-arguments", "def f(xs: [float]_n) = slide(3, xs)\n", [], "1:24", ["slide takes 3 arguments"]),
    ("zip-unequal", "def f(xs: [float]_n, ys: [float]_(n+1)) =\n  zip(xs, ys)\n", [], "2:3",
     ["zip expects arrays of equal length, got [float]_n and [float]_(n+1)"]),
    ("map-over-scalar", "def f(xs: [float]_n) =\n  map(x -> map(y -> y, x), xs)\n", [], "2:12", ["map expects an array, got float"]),
    ("split-does-not-divide", "def f(xs: [float]_n) =\n  split(3, xs)\n", ["--size", "n=8"], "2:3",
     ["split by 3", "multiple of 3", "8"]),
    ("unknown-size", "def f(xs: [float]_n) = split(k, xs)\n", [], "1:30", ["unknown size 'k'"]),
    ("unknown-type", "def f(xs: [floot]_n) = xs\n", [], "1:12", ["unknown type 'floot'"]),
    ("accumulator-type", "def f(xs: [float]_n) = reduce(0, (a, x) -> a + x, xs)\n", [], "1:24",
     ["returns float but its accumulator is int"]),
    ("pattern-mismatch", "def f(xs: [float]_n) = map((a, b) -> a, xs)\n", [], "1:28", ["expects a tuple of 2, got float"]),
    ("value-as-function", "def f(xs: [float]_n) = xs(1)\n", [], "1:24", ["xs is a value, not a function"]),
    ("duplicate-binder", "def f(xs: [float]_n) = map((a, a) -> a, zip(xs, xs))\n", [], "1:32", ["a is bound twice"]),
    ("named-argument", "def f(xs: [float]_n) = split(size = 2, xs)\n", [], "1:30", ["split has no argument named size"]),
]


@pytest.mark.parametrize("name, source, extra, where, words", BAD_PROGRAMS, ids=[b[0] for b in BAD_PROGRAMS])
def test_bad_program_gives_one_clear_error(tmp_path, capsys, name, source, extra, where, words):
    path = tmp_path / f"{name}.lift"
    path.write_text(source)
    status = main(["check", str(path), *extra])
    err = capsys.readouterr().err
    assert status == 1
    first = err.splitlines()[0]
    assert re.match(rf"^{re.escape(str(path))}:{where}: error: ", first), first
    for w in words:
        assert w in first, (w, first)
    assert "Traceback" not in err
    # the offending line is shown with a caret under the place
    assert "^" in err.splitlines()[2]


def test_missing_file(capsys):
    assert main(["check", "does-not-exist.lift"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == "does-not-exist.lift: error: no such file"


def test_bad_size_option(tmp_path, capsys):
    path = tmp_path / "ok.lift"
    path.write_text("def f(xs: [float]_n) = xs\n")
    assert main(["check", str(path), "--size", "n=eight"]) == 1
    assert "--size n: expected an integer" in capsys.readouterr().err


def test_eval_reports_missing_sizes_and_bad_inputs(tmp_path, capsys):
    import numpy as np

    path = tmp_path / "p.lift"
    path.write_text("def f(xs: [[float]_m]_n) = join(xs)\n")
    assert main(["eval", str(path)]) == 1
    assert "no input given for xs" in capsys.readouterr().err
    np.save(tmp_path / "x.npy", np.zeros(5, np.float32))
    assert main(["eval", str(path), "--input", f"xs={tmp_path / 'x.npy'}"]) == 1
    err = capsys.readouterr().err
    assert "input xs has 1 dimension(s) (5,) but its type [[float]_m]_n has 2" in err
    assert main(["eval", str(path), "--input", f"xs={tmp_path / 'nope.npy'}"]) == 1
    assert "no such file" in capsys.readouterr().err


def test_console_script_prints_no_traceback(tmp_path):
    path = tmp_path / "bad.lift"
    path.write_text("def f(xs: [float]_n) =\n  split(3, xs)\n")
    result = subprocess.run(
        [sys.executable, "-m", "liftpy.cli", "check", str(path), "--size", "n=7"], capture_output=True, text=True
    )
    assert result.returncode == 1
    assert result.stderr.startswith(f"{path}:2:3: error: split by 3 needs the length 7 to be a multiple of 3")
    assert "Traceback" not in result.stderr


# ------------------------------------------------------------------------------------------------ issue 12, more
# Lengths and widths that no input can have, written or given: refused at the parameter (or the type) with a caret.
BAD_EXTENTS = [
    ("negative-length-given", "def f(xs: [float]_n) = map(x -> x, xs)\n", ["--size", "n=-3"], "1:7",
     ["parameter xs : [float]_n has an array length of -3 with these sizes ([float]_(-3))", "cannot be negative"]),
    ("negative-length-written", "def f(xs: [float]_(0-1)) = xs\n", [], "1:7",
     ["parameter xs : [float]_(-1) has an array length of -1", "cannot be negative"]),
    ("negative-inner-length", "def f(k: (int, int), ys: [float]_2, xs: [([float]_n, [float4]_(k._1))]_3) = xs\n",
     ["--size", "k=-1,2"], "1:37", ["parameter xs", "an array length of -1"]),
    ("vector-width-zero", "def f(xs: [float_0]_n) = xs\n", [], "1:12", ["float_0: a vector width must be at least 1, got 0"]),
    ("vector-width-negative", "def f(xs: [float]_n) = { val k = 0 - 2; Value(0.0f, [int_k]_3) }\n", [], "1:54",
     ["int_k: a vector width must be at least 1, got -2"]),
    ("vector-width-given-zero", "def f(xs: [float_v]_n) = xs\n", ["--size", "v=0"], "1:7",
     ["parameter xs : [float_v]_n has a vector width of 0", "at least 1"]),
]


@pytest.mark.parametrize("name, source, extra, where, words", BAD_EXTENTS, ids=[b[0] for b in BAD_EXTENTS])
def test_impossible_extents_give_one_clear_error(tmp_path, capsys, name, source, extra, where, words):
    test_bad_program_gives_one_clear_error(tmp_path, capsys, name, source, extra, where, words)


@pytest.mark.parametrize("source, extra", [
    ("def f(xs: [float]_n) = pad(-1, -2, 0.0f, xs)\n", ["--size", "n=8"]),  # pad crops with negative amounts
    ("def f(xs: [float]_n) = xs\n", ["--size", "n=0"]),  # an empty input is an input
    ("def f(xs: [float_v]_n) = xs\n", ["--size", "v=4"]),
])
def test_negative_amounts_and_empty_inputs_are_still_accepted(tmp_path, capsys, source, extra):
    path = tmp_path / "ok.lift"
    path.write_text(source)
    assert main(["check", str(path), *extra]) == 0, capsys.readouterr().err

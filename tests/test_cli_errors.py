"""Mistakes on the command line, tried as a user would type them: exit status 1 and one line ``error: ...`` on
stderr that names the argument and says why -- never a traceback, never argparse's usage block and status 2.
(Mistakes in a program's text, reported at their place with a caret, are tests/test_errors.py's.)"""

import subprocess
import sys

import pytest

from liftpy.cli import main
from liftpy.tuning import TuningDB

from .conftest import EXAMPLES
from .route_configs import example_config

STENCIL = str(EXAMPLES / "stencil2d.lift")
SIZES = ["--size", "width=8", "--size", "height=6"]
SMALL = ["--input", "8x12x12", "--kernels", "8x3x3", "--padding", "1"]

# (id, arguments, words the error line must contain). In the arguments and the words, {file} is an ordinary
# file, {dir} a directory, {notadb} a file that is not a database, {db} a tuning database holding a correct
# trial of the SMALL layer, {new} a path where nothing exists yet.
CASES = [
    ("compile-unknown-target", ["compile", STENCIL, *SIZES, "--target", "mali-g71", "-o", "{new}"],
     ["unknown target profile 'mali-g71'", "mali-g72"]),
    ("compile-target-and-device", ["compile", STENCIL, *SIZES, "--target", "mali-g72", "--device", "0:0", "-o", "{new}"],
     ["--target or --device"]),
    # output paths that cannot be written: the option, the path and the reason
    ("eval-o-missing-directory", ["eval", STENCIL, *SIZES, "--random", "0", "-o", "/nonexistent/dir/y.npy"],
     ["-o /nonexistent/dir/y.npy", "cannot write", "No such file or directory"]),
    ("eval-o-inside-a-file", ["eval", STENCIL, *SIZES, "--random", "0", "-o", "{file}/y.npy"],
     ["-o {file}/y.npy", "Not a directory"]),
    ("eval-o-in-proc", ["eval", STENCIL, *SIZES, "--random", "0", "-o", "/proc/y.npy"], ["-o /proc/y.npy", "cannot write"]),
    ("run-o-missing-directory", ["run", STENCIL, *SIZES, "--repeat", "1", "-o", "{new}/sub/y.npy"],
     ["-o {new}/sub/y.npy", "No such file or directory"]),
    ("compile-o-under-dev-null", ["compile", STENCIL, *SIZES, "-o", "/dev/null/out"], ["-o /dev/null/out", "Not a directory"]),
    ("compile-o-is-a-file", ["compile", STENCIL, *SIZES, "-o", "{file}"], ["-o {file}", "exists and is not a directory"]),
    ("compile-o-parent-is-a-file", ["compile", STENCIL, *SIZES, "-o", "{file}/out"], ["-o {file}/out", "Not a directory"]),
    ("compile-o-in-proc", ["compile", STENCIL, *SIZES, "-o", "/proc/out"], ["-o /proc/out", "cannot write"]),
    ("conv-o-is-a-file", ["conv", *SMALL, "-o", "{file}"], ["-o {file}", "exists and is not a directory"]),
    ("conv-o-under-dev-null", ["conv", *SMALL, "-o", "/dev/null/out"], ["-o /dev/null/out", "Not a directory"]),
    ("report-o-is-a-file", ["report", "--db", "{db}", *SMALL, "-o", "{file}"], ["-o {file}", "exists and is not a directory"]),
    ("report-o-under-dev-null", ["report", "--db", "{db}", *SMALL, "-o", "/dev/null/x"], ["-o /dev/null/x", "Not a directory"]),
    ("report-network-o-is-a-file", ["report", "--db", "{db}", "--network", "vgg16", "-o", "{file}"], ["-o {file}"]),
    ("export-o-is-a-file", ["export", "--db", "{db}", *SMALL, "-o", "{file}"], ["-o {file}", "exists and is not a directory"]),
    ("export-o-under-dev-null", ["export", "--db", "{db}", *SMALL, "-o", "/dev/null/x"], ["-o /dev/null/x", "Not a directory"]),
    # counts: runs, trials, images, seeds, seconds
    ("run-repeat-0", ["run", STENCIL, *SIZES, "--repeat", "0"], ["argument --repeat", "at least 1, got 0"]),
    ("run-repeat-negative", ["run", STENCIL, *SIZES, "--repeat", "-3"], ["argument --repeat", "at least 1, got -3"]),
    ("run-seed-negative", ["run", STENCIL, *SIZES, "--seed", "-1"], ["argument --seed", "at least 0"]),
    ("eval-random-negative", ["eval", STENCIL, *SIZES, "--random", "-1"], ["argument --random", "at least 0"]),
    ("eval-random-not-a-number", ["eval", STENCIL, *SIZES, "--random", "x"], ["argument --random", "expected an integer"]),
    ("conv-repeat-0", ["conv", *SMALL, "--repeat", "0"], ["argument --repeat", "at least 1, got 0"]),
    ("conv-repeat-negative", ["conv", *SMALL, "--repeat", "-2"], ["argument --repeat", "at least 1"]),
    ("conv-seed-negative", ["conv", *SMALL, "--seed", "-1"], ["argument --seed", "at least 0"]),
    ("conv-layer-batch-0", ["conv", "--layer", "vgg16.2", "--batch", "0"], ["argument --batch", "at least 1, got 0"]),
    ("conv-batch-negative", ["conv", *SMALL, "--batch", "-1"], ["argument --batch", "at least 1"]),
    ("tune-repeat-negative", ["tune", *SMALL, "--db", "{new}", "--repeat", "-1"], ["argument --repeat", "at least 1"]),
    ("tune-trials-0", ["tune", *SMALL, "--db", "{new}", "--trials", "0"], ["argument --trials", "at least 1, got 0"]),
    ("tune-trials-negative", ["tune", *SMALL, "--db", "{new}", "--trials", "-5"], ["argument --trials", "at least 1"]),
    ("tune-trials-not-a-number", ["tune", *SMALL, "--db", "{new}", "--trials", "abc"], ["argument --trials", "'abc'"]),
    ("tune-timeout-0", ["tune", *SMALL, "--db", "{new}", "--timeout", "0"], ["argument --timeout", "above 0"]),
    ("tune-timeout-negative", ["tune", *SMALL, "--db", "{new}", "--timeout", "-1"], ["argument --timeout", "above 0"]),
    ("tune-timeout-nan", ["tune", *SMALL, "--db", "{new}", "--timeout", "nan"], ["argument --timeout", "above 0"]),
    ("tune-timeout-not-a-number", ["tune", *SMALL, "--db", "{new}", "--timeout", "x"], ["argument --timeout", "seconds"]),
    ("tune-seed-negative", ["tune", *SMALL, "--db", "{new}", "--seed", "-1"], ["argument --seed", "at least 0"]),
    ("tune-layer-batch-0", ["tune", "--layer", "vgg16.2", "--batch", "0", "--db", "{new}"], ["argument --batch", "at least 1"]),
    ("report-layer-batch-0", ["report", "--db", "{db}", "--layer", "vgg16.2", "--batch", "0"], ["argument --batch"]),
    ("export-layer-batch-0", ["export", "--db", "{db}", "--layer", "vgg16.2", "--batch", "0"], ["argument --batch"]),
    ("params-sample-negative", ["params", STENCIL, "--size", "width=64", "--size", "height=64", "--sample", "-1"],
     ["argument --sample", "at least 0"]),
    ("params-seed-negative", ["params", STENCIL, "--size", "width=64", "--size", "height=64", "--seed", "-1"],
     ["argument --seed"]),
    ("explore-depth-0", ["explore", STENCIL, "--depth", "0"], ["argument --depth", "at least 1, got 0"]),
    ("explore-depth-negative", ["explore", STENCIL, "--depth", "-1"], ["argument --depth", "at least 1"]),
    ("explore-walks-0", ["explore", STENCIL, "--method", "random", "--walks", "0"], ["argument --walks", "at least 1"]),
    ("explore-seed-negative", ["explore", STENCIL, "--method", "random", "--seed", "-1"], ["argument --seed"]),
    ("explore-limit-0", ["explore", STENCIL, "--limit", "0"], ["argument --limit", "at least 1"]),
    ("explore-show-negative", ["explore", STENCIL, "--show", "-1"], ["argument --show", "at least 0"]),
    # sizes
    ("size-without-value", ["eval", STENCIL, "--size", "width", "--random", "0"], ["--size", "NAME=VALUE", "'width'"]),
    ("size-empty-value", ["eval", STENCIL, "--size", "width=", "--random", "0"], ["--size width", "expected an integer"]),
    ("size-not-a-number", ["eval", STENCIL, "--size", "width=abc", "--random", "0"], ["--size width", "'abc'"]),
    ("size-without-name", ["eval", STENCIL, "--size", "=3", "--random", "0"], ["--size", "'=3'"]),
    ("size-unknown-name-check", ["check", STENCIL, "--size", "bogus=3"], ["--size bogus", "no size 'bogus'", "height, width"]),
    ("size-unknown-name-eval", ["eval", STENCIL, *SIZES, "--size", "widht=8", "--random", "0"], ["--size widht"]),
    ("size-unknown-name-compile", ["compile", STENCIL, *SIZES, "--size", "bogus=3", "-o", "{new}"], ["--size bogus"]),
    ("size-unknown-name-run", ["run", STENCIL, *SIZES, "--size", "bogus=3"], ["--size bogus"]),
    ("size-unknown-name-params", ["params", STENCIL, *SIZES, "--size", "bogus=3"], ["--size bogus"]),
    ("size-negative-length", ["eval", STENCIL, "--size", "width=-8", "--size", "height=6", "--random", "0"],
     ["--size", "inputData", "(6, -8)", "cannot be negative"]),
    # input arrays
    ("input-is-a-directory", ["eval", STENCIL, *SIZES, "--random", "0", "--input", "inputData={dir}"],
     ["--input inputData", "{dir}", "Is a directory"]),
    ("input-not-npy", ["eval", STENCIL, *SIZES, "--random", "0", "--input", "inputData={file}"],
     ["--input inputData", "{file}", "not a .npy file"]),
    ("input-missing", ["eval", STENCIL, *SIZES, "--random", "0", "--input", "inputData={new}"],
     ["--input inputData", "no such file"]),
    ("input-without-path", ["eval", STENCIL, *SIZES, "--random", "0", "--input", "inputData="],
     ["--input", "NAME=FILE.npy", "'inputData='"]),
    # layers and shapes
    ("layer-unknown", ["conv", "--layer", "vgg16.99"], ["unknown layer 'vgg16.99'"]),
    ("input-two-dimensions", ["conv", "--input", "8x12", "--kernels", "8x3x3"], ["--input", "'8x12'"]),
    ("input-not-numbers", ["conv", "--input", "axbxc", "--kernels", "8x3x3"], ["--input", "'axbxc'"]),
    ("input-zero-channels", ["conv", "--input", "0x3x3", "--kernels", "8x3x3"], ["at least 1", "input (0, 3, 3)"]),
    ("input-negative", ["conv", "--input", "-8x12x12", "--kernels", "8x3x3"], ["argument --input", "expected one argument"]),
    ("padding-two-values", ["conv", *SMALL[:4], "--padding", "1,2"], ["--padding", "'1,2'"]),
    ("stride-zero", ["conv", *SMALL, "--stride", "0"], ["stride", "at least 1"]),
    # tuning databases
    ("tune-repeat-0", ["tune", *SMALL, "--db", "{new}", "--repeat", "0"], ["argument --repeat", "at least 1, got 0"]),
    ("tune-db-is-a-directory", ["tune", *SMALL, "--db", "{dir}"], ["--db {dir}", "is a directory"]),
    ("tune-db-not-a-database", ["tune", *SMALL, "--db", "{notadb}"], ["--db {notadb}", "not a liftpy tuning database"]),
    ("tune-db-parent-is-a-file", ["tune", *SMALL, "--db", "{file}/t.sqlite"], ["--db {file}/t.sqlite", "not a directory"]),
    ("tune-db-grandparent-is-a-file", ["tune", *SMALL, "--db", "{file}/sub/t.sqlite"],
     ["--db {file}/sub/t.sqlite", "Not a directory"]),
    ("tune-algorithm-retired-pipeline", ["tune", *SMALL, "--db", "{new}", "--algorithm", "direct-chw"],
     ["argument --algorithm", "invalid choice: 'direct-chw'", "'auto', 'direct', 'winograd'"]),
    ("tune-winograd-stride-2", ["tune", *SMALL, "--stride", "2", "--db", "{new}", "--algorithm", "winograd"],
     ["algorithm 'winograd'", "stride (2, 2)", "runs 'auto' or 'direct'", "3x3 convolutions of stride 1"]),
    ("tune-algorithm-of-a-file", ["tune", STENCIL, *SIZES, "--db", "{new}", "--algorithm", "direct"],
     ["--algorithm direct", "a layer's programs", "stencil2d.lift"]),
    ("tune-device-unknown", ["tune", *SMALL, "--db", "{new}", "--device", "9:9"], ["no OpenCL device '9:9'"]),
    ("report-db-missing", ["report", "--db", "{new}", *SMALL], ["--db {new}", "no such tuning database"]),
    ("report-db-is-a-directory", ["report", "--db", "{dir}", *SMALL], ["--db {dir}", "is a directory"]),
    ("report-db-not-a-database", ["report", "--db", "{notadb}", *SMALL], ["--db {notadb}", "not a liftpy tuning database"]),
    ("export-db-is-a-directory", ["export", "--db", "{dir}", *SMALL], ["--db {dir}", "is a directory"]),
    # strategies and rules
    ("strategy-combinator-arity", ["rewrite", STENCIL, "-s", "topDown(mapFusion, mapFusion)"],
     ["--strategy", "topDown takes 1 strategy, got 2"]),
    ("strategy-minus-text", ["rewrite", STENCIL, "-s", "splitJoin(-'a')"], ["--strategy", "cannot read"]),
    ("strategy-minus-tuning-parameter", ["rewrite", STENCIL, "-s", "splitJoin(-?)"], ["--strategy", "cannot read"]),
    ("rules-empty", ["explore", STENCIL, "--rules", ","], ["--rules", "no rule"]),
    # argparse's own complaints, as one line and status 1
    ("no-command", [], ["required: COMMAND", "liftpy --help"]),
    ("unknown-command", ["chek", STENCIL], ["argument COMMAND", "invalid choice: 'chek'"]),
    ("unknown-option", ["check", STENCIL, "--bogus"], ["unrecognized arguments: --bogus", "liftpy check --help"]),
    ("missing-strategy", ["rewrite", STENCIL], ["required: -s/--strategy", "liftpy rewrite --help"]),
    ("bad-choice", ["explore", STENCIL, "--method", "dfs"], ["argument --method", "invalid choice: 'dfs'"]),
]


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    """The paths the cases name: an ordinary file, a directory, a non-database, a database with one trial."""
    root = tmp_path_factory.mktemp("cli-errors")
    (root / "a-file").write_text("just text\n")
    (root / "a-dir").mkdir()
    (root / "not-a-db.sqlite").write_text("not a database\n")
    db = TuningDB(root / "tuning.sqlite")
    from liftpy.nn.conv import conv_space, make_layer, route_task

    layer = make_layer((8, 12, 12), (8, 3, 3), (1, 1), 1)
    db.record(route_task(layer), "route", example_config(conv_space(layer)),
              {"name": "test device", "driver": "1", "platform": "test"},
              {"status": "ok", "time_ms": 0.01, "memory_bytes": 2**20, "max_error": 1e-6})
    db.close()
    return {"file": str(root / "a-file"), "dir": str(root / "a-dir"), "notadb": str(root / "not-a-db.sqlite"),
            "db": str(root / "tuning.sqlite"), "root": root}


def run_cli(argv):
    """main's status, or the code of a SystemExit it raised."""
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


@pytest.mark.parametrize("argv, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_mistake_is_one_error_line(places, tmp_path, capsys, argv, words):
    fill = {**{k: v for k, v in places.items() if k != "root"}, "new": str(tmp_path / "new")}
    status = run_cli([a.format(**fill) for a in argv])
    out, err = capsys.readouterr()
    assert status == 1, err
    assert "Traceback" not in out + err
    assert "usage:" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for word in words:
        assert word.format(**fill) in lines[0], (word, lines[0])


def test_tune_refuses_repeat_0_before_any_trial(tmp_path, capsys):
    """Every trial of `--repeat 0` used to 'crash' and tune still exited 0; now nothing runs, no database is made."""
    db = tmp_path / "t.sqlite"
    assert run_cli(["tune", *SMALL, "--trials", "3", "--repeat", "0", "--db", str(db)]) == 1
    assert capsys.readouterr().err.startswith("error: argument --repeat: must be at least 1, got 0")
    assert not db.exists()


def test_console_script_exits_1_for_an_argument_mistake(tmp_path):
    """Through the real entry point, argparse's mistakes exit 1 too (argparse's own status is 2)."""
    result = subprocess.run([sys.executable, "-m", "liftpy.cli", "conv", "--layer", "vgg16.2", "--batch", "0"],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: argument --batch: must be at least 1, got 0 (see `liftpy conv --help`)"]


@pytest.mark.parametrize("argv", [["--help"], ["tune", "--help"], ["explore", "--help"]])
def test_help_still_exits_0(capsys, argv):
    assert run_cli(argv) == 0
    assert "usage:" in capsys.readouterr().out


def test_eval_output_gets_the_npy_suffix_it_reports(tmp_path, capsys):
    assert run_cli(["eval", STENCIL, *SIZES, "--random", "0", "-o", str(tmp_path / "y")]) == 0
    assert f"wrote {tmp_path / 'y.npy'}" in capsys.readouterr().out
    assert (tmp_path / "y.npy").exists()


# ------------------------------------------------------------------------------------------------ issue 12, more
PARTIAL = str(EXAMPLES / "partial_conv.lift")
PARTIAL_SIZES = ["--size", "inputChannels=64", "--size", "kernelWidth=3", "--size", "kernelHeight=3",
                 "--size", "numKernels=128", "--size", "paddedInputWidth=58", "--size", "paddedInputHeight=58",
                 "--size", "kernelStride=1,1", "--target", "mali-g72"]
MORE_CASES = [
    # a requirement over a name that is neither a tuning parameter nor a size: was a KeyError in satisfiable()
    ("params-require-unknown-name", ["params", PARTIAL, *PARTIAL_SIZES, "--require", "bogus:x==3"],
     ["requirement 'bogus' (x==3)", "names x", "neither a tuning parameter nor a size", "θ, κ, σ, ω, v"]),
    ("params-require-unknown-component", ["params", PARTIAL, *PARTIAL_SIZES, "--require", "k:θ >= kernelStride._3"],
     ["names kernelStride._3", "kernelStride._1, kernelStride._2"]),
    ("params-require-no-parameters", ["params", STENCIL, "--size", "width=64", "--size", "height=64", "--require", ":v == 2"],
     ["requirement 'v == 2'", "names v", "tuning parameters: none"]),
    # the route's configuration names its choices, and a misspelt one
    ("conv-route-config-unknown-name", ["conv", *SMALL, "--config", "bogus=3"],
     ["not valid for layer", "has the choices", "block.kernelWeights", "got bogus"]),
    ("conv-groups-not-dividing", ["conv", "--input", "6x12x12", "--kernels", "8x3x3", "--groups", "4"],
     ["groups (4) must divide the input channels (6) and the kernels (8)"]),
    # a database that cannot be made is not "not a liftpy tuning database"
    ("tune-db-cannot-be-created", ["tune", *SMALL, "--db", "/proc/x.sqlite"], ["--db /proc/x.sqlite", "cannot open or create it"]),
]


@pytest.mark.parametrize("argv, words", [c[1:] for c in MORE_CASES], ids=[c[0] for c in MORE_CASES])
def test_more_mistakes_are_one_error_line(places, tmp_path, capsys, argv, words):
    test_a_mistake_is_one_error_line(places, tmp_path, capsys, argv, words)


def test_a_retired_pipelines_configuration_is_refused_naming_the_routes_choices(capsys):
    assert run_cli(["conv", *SMALL, "--config", "σ=2", "--config", "κ=8", "--config", "v=8"]) == 1
    err = capsys.readouterr().err
    assert "has the choices" in err and "block.kernelWeights" in err and "κ" in err.split("got", 1)[1]


def test_requirement_may_name_a_component_of_a_tuple_size(capsys):
    """The sizes the space lists (kernelStride._1) are names a requirement may use."""
    assert run_cli(["params", PARTIAL, *PARTIAL_SIZES, "--require", "k:θ >= kernelStride._1 + 20"]) == 0
    assert "k: θ >= kernelStride._1+20" in capsys.readouterr().out


def test_a_file_that_is_no_database_is_still_not_a_database(places):
    from liftpy.errors import InputError

    with pytest.raises(InputError, match="not a liftpy tuning database"):
        TuningDB(places["notadb"])
    with pytest.raises(InputError, match="cannot open or create it"):
        TuningDB("/proc/x.sqlite")

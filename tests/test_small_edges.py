"""The smaller edges of issue 47, each a clear refusal or a named result: program files that are empty, hold no
definition, are not regular files or are too large; ``-o`` naming a directory; a layer too large for the
device; the plan cache's bound."""

import os
import threading
from collections import OrderedDict
from types import SimpleNamespace

import numpy as np
import pytest

import liftpy
from liftpy.cli import main
from liftpy.nn import conv

from .conftest import EXAMPLES

STENCIL = str(EXAMPLES / "stencil2d.lift")
SIZES = ["--size", "width=8", "--size", "height=6"]


def _one_error_line(capsys, argv) -> str:
    """``liftpy argv``'s one error line (status 1, no traceback), run in a thread that must end in seconds."""
    status = []
    thread = threading.Thread(target=lambda: status.append(main(argv)), daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), f"liftpy {' '.join(argv)} did not end"
    out, err = capsys.readouterr()
    assert status == [1] and "Traceback" not in out + err, (status, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_an_empty_program_file_is_refused(tmp_path, capsys):
    path = tmp_path / "empty.lift"
    path.write_text("\n  \n")
    assert _one_error_line(capsys, ["check", str(path)]) == (
        f"{path}:1:1: error: the file is empty: a program defines at least one function (def name(...) = ...)")


def test_a_program_file_without_a_definition_is_refused(tmp_path, capsys):
    """Located at its first line, which the message shows with a caret, as every located error."""
    path = tmp_path / "comments.lift"
    path.write_text("// nothing but a comment\n")
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[0] == (
        f"{path}:1:1: error: no definition: a program defines at least one function (def name(...) = ...)")
    assert "Traceback" not in err and err.count("error:") == 1


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_program_file_that_is_not_a_regular_file_is_refused_before_it_is_read(tmp_path, capsys, kind):
    if kind == "fifo":
        path, said = tmp_path / "pipe.lift", "is a FIFO, not a .lift file (a program is read from a regular file)"
        os.mkfifo(path)  # nobody writes it: reading would wait for ever
    elif kind == "device":
        path, said = "/dev/zero", "is a device, not a .lift file (a program is read from a regular file)"
    else:
        path, said = tmp_path, "is a directory, not a .lift file"
    assert _one_error_line(capsys, ["check", str(path)]) == f"{path}: error: {said}"


def test_a_program_file_over_16_mib_is_refused_unread(tmp_path, capsys):
    path = tmp_path / "huge.lift"
    with open(path, "wb") as file:
        file.truncate(16 * 2**20 + 1)  # sparse: nothing written
    assert _one_error_line(capsys, ["check", str(path)]) == (
        f"{path}: error: is larger than 16 MiB ({16 * 2**20 + 1} bytes): not a program file")


def test_eval_o_naming_a_directory_writes_the_functions_file_in_it(tmp_path, capsys):
    assert main(["eval", STENCIL, *SIZES, "--random", "0", "-o", str(tmp_path)]) == 0
    assert f"wrote {tmp_path / 'stencil2D.npy'}" in capsys.readouterr().out
    assert np.load(tmp_path / "stencil2D.npy").shape == (4, 6)
    assert not (tmp_path / ".npy").exists()
    assert main(["eval", STENCIL, *SIZES, "--random", "0", "-o", f"{tmp_path}/"]) == 0  # the same, slash or not
    capsys.readouterr()


def test_eval_o_naming_a_missing_directory_is_refused(tmp_path, capsys):
    line = _one_error_line(capsys, ["eval", STENCIL, *SIZES, "--random", "0", "-o", f"{tmp_path}/nothing/"])
    assert line == (f"error: -o {tmp_path}/nothing/: cannot write {tmp_path}/nothing/stencil2D.npy "
                    f"(No such file or directory)")


def test_a_layer_larger_than_the_device_allocates_is_refused_naming_the_size(capsys):
    from liftpy.runtime import get_device

    limit = get_device(None).max_mem_alloc_size
    height = int((limit // 4 // 512) ** 0.5) + 2  # 512 channels of height x height floats: over the limit
    line = _one_error_line(capsys, ["conv", "--input", f"512x{height}x{height}", "--kernels", "4x1x1"])
    assert f"its input (1x512x{height}x{height} floats" in line and "largest buffer the device allocates" in line


# ------------------------------------------------------------------------------------------------ plan cache
@pytest.fixture
def stub_plans(monkeypatch):
    """plan() with compiling stubbed out (a plan is an object that names its layer) on an empty cache of 16."""
    monkeypatch.setattr(conv, "_PLANS", OrderedDict())
    monkeypatch.setattr(conv, "PLAN_CACHE_SIZE", 16)
    monkeypatch.setattr(conv, "_route_plan", lambda layer, config, device: SimpleNamespace(layer=layer))


def _layer(width):
    return conv.make_layer((1, 4, width), (1, 1, 1))


def test_the_plan_cache_keeps_16_and_drops_the_least_recently_used(stub_plans):
    config = {"join_rows": 0}
    first = [conv.plan(_layer(w), config) for w in range(1, 17)]
    assert conv.plan(_layer(1), config) is first[0]  # used again: now the most recent
    conv.plan(_layer(17), config)  # the 17th layer
    kept = [p.layer.width for p in conv._PLANS.values()]
    assert len(kept) == 16 and 2 not in kept and 1 in kept and kept[-1] == 17
    conv.set_plan_cache_size(4)
    assert [p.layer.width for p in conv._PLANS.values()] == [15, 16, 1, 17]
    with pytest.raises(liftpy.LiftError, match="positive integer"):
        conv.set_plan_cache_size(0)


def test_a_conv2d_layer_keeps_the_bindings_of_its_16_last_shapes(stub_plans, monkeypatch):
    class Bound:
        checked, plan = True, SimpleNamespace(config={})

        def run(self, x, check, weights):
            return SimpleNamespace(output=x, times=None, max_error=None)

    monkeypatch.setattr(conv, "plan", lambda layer, *args, **kw: SimpleNamespace(bind=lambda w, b: Bound()))
    layer = conv.Conv2d(np.ones((1, 1, 1, 1), np.float32))
    for width in [1, *range(2, 17), 1, 17]:  # shape 1 used again before the 17th
        layer(np.zeros((1, 1, 1, width), np.float32))
    widths = [shape[3] for shape in layer._bound]
    assert len(widths) == 16 and 2 not in widths and widths[-2:] == [1, 17]

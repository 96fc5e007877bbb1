"""Huge sizes (issue 47): memory known before it is spent, indices that fit, sizes given once. The huge cases ask
for terabytes, so that the refusal is certain on any machine, and each is refused before anything is allocated:
the tests are fast and allocate nothing."""

import tracemalloc

import numpy as np
import pytest

import liftpy
from liftpy.cli import main
from liftpy.codegen import passes
from liftpy.codegen.program import generate
from liftpy.device import Device
from liftpy.errors import CodegenError, DeviceError, ResourceError, SizeError
from liftpy.interpreter import evaluate
from liftpy.runtime import check_device_memory, get_device
from liftpy.tuning.program import ProgramTask

from .conftest import EXAMPLES

STENCIL = str(EXAMPLES / "stencil2d.lift")
MATMUL = str(EXAMPLES / "programs" / "matmul.lift")
HUGE_STENCIL = ["--size", "width=2000000", "--size", "height=2000000"]  # 16 TB an image
HUGE_MATMUL = ["--size", "n=200000", "--size", "k=200000", "--size", "m=200000"]  # 160 GB a matrix


def one_error_line(argv, capsys) -> str:
    """The one ``error:`` line ``liftpy argv`` prints, exiting 1 (no traceback)."""
    try:
        status = main(argv)
    except SystemExit as e:
        status = e.code
    out, err = capsys.readouterr()
    assert status == 1, out + err
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def opencl_device():
    try:
        return get_device()
    except DeviceError:
        return None


# ------------------------------------------------------------------------------------------------ memory
@pytest.mark.parametrize("command", [["eval", STENCIL, *HUGE_STENCIL, "--random", "0"],
                                     ["run", STENCIL, *HUGE_STENCIL, "--repeat", "1"]], ids=["eval", "run"])
def test_a_stencil_of_terabytes_is_refused_before_its_inputs_are_drawn(command, capsys):
    if command[0] == "run" and opencl_device() is None:
        pytest.skip("no OpenCL device")
    tracemalloc.start()
    try:
        line = one_error_line(command, capsys)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "random inputs of stencil2D at width=2000000, height=2000000 needs" in line, line
    assert "host memory" in line and "inputData" in line and "available (MemAvailable)" in line, line
    assert peak < 2**28, peak  # nothing of the terabytes was allocated


def test_evaluating_a_terabyte_output_is_refused_before_it_is_allocated():
    program = liftpy.load(STENCIL)
    image = np.broadcast_to(np.float32(1), (2_000_000, 2_000_000))  # a view: 16 TB that take no memory
    weights = np.ones((3, 3), np.float32)
    with pytest.raises(ResourceError, match=r"evaluating stencil2D at .*width=2000000.* needs \d+ bytes .*output"):
        evaluate(program, {"weights": weights, "inputData": image})


@pytest.mark.parametrize("command", [["tune", MATMUL, *HUGE_MATMUL, "--trials", "1", "--db", "{db}"],
                                     ["eval", MATMUL, *HUGE_MATMUL, "--random", "0"]], ids=["tune", "eval"])
def test_a_matmul_of_terabytes_is_refused_by_tune_and_eval(command, capsys, tmp_path):
    if command[0] == "tune" and opencl_device() is None:
        pytest.skip("no OpenCL device")
    line = one_error_line([a.format(db=tmp_path / "t.sqlite") for a in command], capsys)
    assert "matmul at" in line and "n=200000" in line and "needs" in line and "host memory" in line, line


def test_a_task_checks_its_sizes_without_drawing_its_inputs():
    tracemalloc.start()
    try:
        task = ProgramTask.make(MATMUL, {"n": 200000, "k": 200000, "m": 200000})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**28, peak
    with pytest.raises(ResourceError, match="tuning matmul at k=200000, m=200000, n=200000 needs"):
        task.check_memory(Device(max_mem_alloc_size=2**60, global_mem_size=2**60))


def test_buffers_past_the_devices_limits_are_refused_naming_buffer_bytes_and_limit():
    device = Device(name="small GPU", global_mem_size=2**32, max_mem_alloc_size=2**30)
    with pytest.raises(ResourceError, match=r"buffer x \[32768, 32768\] needs 4294967296 bytes .*small GPU allocates "
                                            r"at most 1073741824 bytes .*max_mem_alloc_size"):
        check_device_memory("running f", None, [("x [32768, 32768]", 2**32)], device)
    with pytest.raises(ResourceError, match=r"at n=3: its buffers need 6442450944 bytes .*4294967296 bytes .*"
                                            r"global_mem_size"):
        check_device_memory("running f", {"n": 3}, [("x", 2**30), ("y", 2**30), ("z", 2**32)],
                            Device(global_mem_size=2**32, max_mem_alloc_size=2**32))


def test_the_interpreter_reads_windows_as_views():
    """A 3x3 stencil over 2000 x 2000 (16 MB an image): its windows joined and read by the reduction without a
    copy of the nine neighbours of every pixel, each step's accumulator freed at the next (three images at the
    most, where the nine neighbours' copies and the accumulators kept took 44)."""
    program = liftpy.load(STENCIL)
    rng = np.random.default_rng(0)
    image = rng.standard_normal((2000, 2000)).astype(np.float32)
    weights = rng.standard_normal((3, 3)).astype(np.float32)
    tracemalloc.start()
    try:
        result = evaluate(program, {"weights": weights, "inputData": image})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 * image.nbytes, f"{peak / image.nbytes:.1f} images"
    windows = np.lib.stride_tricks.sliding_window_view(image[:40, :40].astype(np.float64), (3, 3))
    expected = np.einsum("ijkl,kl->ij", windows, weights.astype(np.float64))
    np.testing.assert_allclose(result[:38, :38], expected, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------------------------ indices
def kernel_source(argv, capsys, tmp_path) -> str:
    status = main(["compile", *argv, "-o", str(tmp_path / "out")])
    assert status == 0, capsys.readouterr().err
    return "\n".join(p.read_text() for p in sorted((tmp_path / "out").glob("*.cl")))


def test_sizes_past_32_bits_get_64_bit_indices(capsys, tmp_path):
    source = kernel_source([STENCIL, "--size", "width=3000000000", "--size", "height=8", "--target", "mali-g72"],
                           capsys, tmp_path)
    assert "long " in source and "2999999998" in source
    assert not any(f"int {v}" in source for v in ("lid", "gid", "wg", "i_", "j_")), source


def test_ordinary_sizes_keep_32_bit_indices(capsys, tmp_path):
    source = kernel_source([STENCIL, "--size", "width=300", "--size", "height=8", "--target", "mali-g72"],
                           capsys, tmp_path)
    assert "long " not in source


def test_64_bit_indices_compute_what_32_bit_ones_do(monkeypatch):
    """The 64-bit kernels, forced at small sizes, checked against the interpreter on the device."""
    device = opencl_device()
    if device is None:
        pytest.skip("no OpenCL device")
    monkeypatch.setattr(passes, "INT_INDEX_LIMIT", 0)
    program = liftpy.load(STENCIL)
    sizes = {"width": 19, "height": 11}
    try:
        executable = liftpy.compile(program, sizes)
    except CodegenError as e:  # a CPU's compiler and barriers: refused, as documented
        assert "64-bit" in e.message
        pytest.skip(e.message)
    assert all("long " in source for source in executable.sources.values())
    rng = np.random.default_rng(1)
    inputs = {"weights": rng.standard_normal((3, 3)).astype(np.float32),
              "inputData": rng.standard_normal((11, 19)).astype(np.float32)}
    got = executable.run(inputs, poison=True).output
    np.testing.assert_allclose(got, evaluate(program, inputs, sizes), rtol=1e-4, atol=1e-4)


def test_a_size_that_is_not_a_machine_integer_is_refused(capsys, tmp_path):
    line = one_error_line(["compile", STENCIL, "--size", "width=99999999999999999999999", "--size", "height=8",
                           "-o", str(tmp_path / "out")], capsys)
    assert "--size width: 99999999999999999999999 is not a machine integer" in line, line
    with pytest.raises(SizeError, match="size width = 99999999999999999999999 is not a machine integer"):
        generate(liftpy.load(STENCIL), {"width": 99999999999999999999999, "height": 8})


# ------------------------------------------------------------------------------------------------ sizes given once
def test_a_size_given_twice_is_refused(capsys):
    line = one_error_line(["eval", MATMUL, "--size", "n=2", "--size", "n=3", "--size", "k=2", "--size", "m=2",
                           "--random", "0"], capsys)
    assert "--size n given twice (2 and 3)" in line, line

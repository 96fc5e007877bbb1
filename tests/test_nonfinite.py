"""NaN and infinity are data, not faults (issue 47): every check against a reference compares them by position
and kind -- NaN with NaN, an infinity with the same-signed one -- and the numbers within a tolerance computed
from the finite values; a wrong kernel is still caught."""

import dataclasses

import numpy as np
import pytest

from liftpy import nn
from liftpy.cli import main
from liftpy.errors import LiftError
from liftpy.nn.reference import conv2d_compare, conv2d_error, conv2d_reference
from liftpy.tuning.program import close_to

from .conftest import EXAMPLES
from .faults import _body_start, _edit_output_kernel
from .reference import conv2d_nchw, conv2d_windows
from .conftest import QUIET

STRIDE, PADDING = (1, 1), (1, 1, 1, 1)


def _layer_data():
    """A small layer's images holding a NaN, a +inf and a -inf (in different windows, and one window with both
    infinities), weights and biases; float32."""
    rng = np.random.default_rng(47)
    x = rng.standard_normal((1, 4, 10, 10)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    x[0, 1, 7, 2] = np.nan
    x[0, 2, 2, 7] = np.inf
    x[0, 0, 7, 8] = np.inf
    x[0, 3, 8, 8] = -np.inf
    return x, w, b


def _same_kinds(a, b):
    return all(np.array_equal(f(a), f(b)) for f in (np.isnan, np.isposinf, np.isneginf))


def test_a_first_call_on_nan_and_inf_returns_the_reference_in_kind_and_value():
    x, w, b = _layer_data()
    layer = nn.Conv2d(w, b, stride=STRIDE, padding=1)
    y = layer(x)  # the plan's first call: checked
    expected = conv2d_nchw(x, w, b, STRIDE, PADDING, reference=conv2d_windows)  # independent of liftpy
    assert np.isnan(expected).any() and np.isinf(expected).any() and np.isfinite(expected).any()
    assert _same_kinds(y, expected)
    finite = np.isfinite(expected)
    np.testing.assert_allclose(y[finite], expected[finite], rtol=1e-4, atol=1e-4)
    assert layer.last_run.max_error is not None and layer.last_run.max_error <= 1


def test_a_planted_nan_where_the_reference_has_a_number_is_caught():
    """The first work-item of the output kernel returns at once (tests/faults.py): its outputs stay the NaN the
    checked run filled the buffer with, where the reference has numbers; the data's own NaNs excuse nothing."""
    from liftpy.runtime import Executable

    x, w, b = _layer_data()
    layer = nn.make_layer((4, 10, 10), (6, 3, 3), STRIDE, 1)
    sound = nn.plan(layer)

    def first_returns(source):
        at = _body_start(source)
        first = " && ".join(f"get_global_id({d}) == 0" for d in range(3))
        return source[:at] + f"\n    if ({first}) return;" + source[at:]

    generated = _edit_output_kernel(sound.config, sound.executable.generated, first_returns, every=True)
    broken = dataclasses.replace(sound, executable=Executable(generated, sound.executable.device), checked=False)
    with pytest.raises(LiftError, match=r"differs from the reference: output\[0, \d+, \d+, \d+\] is NaN where the "
                                        r"reference is -?\d"):
        broken.run(x, w, b)


def test_kinds_are_compared_by_position():
    x, w, b = _layer_data()
    reference = conv2d_reference(x, w, b, STRIDE, PADDING)
    output = reference.astype(np.float32)
    assert conv2d_error(output, x, w, b, STRIDE, PADDING) <= 1
    number = tuple(np.argwhere(np.isfinite(reference))[0])
    nan = tuple(np.argwhere(np.isnan(reference))[0])
    inf = tuple(np.argwhere(np.isinf(reference))[0])
    for where, value in [(number, np.nan), (nan, 0.5), (inf, -reference[inf]), (number, np.inf)]:
        wrong = output.copy()
        wrong[where] = value
        compared = conv2d_compare(wrong, x, w, b, STRIDE, PADDING)
        assert compared.error == np.inf and f"output[{', '.join(map(str, where))}]" in compared.mismatch


def test_the_tolerance_is_the_finite_values():
    """A NaN in the input leaves the tolerance of the outputs it does not reach as it was: an error planted
    there of 4 times the rounding of the finite input's check is still caught."""
    x, w, b = _layer_data()
    finite_x = np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)
    reference = conv2d_reference(x, w, b, STRIDE, PADDING)
    output = reference.copy()
    where = tuple(np.argwhere(np.isfinite(reference))[0])
    from liftpy.nn.reference import conv2d_tolerance

    output[where] += 4 * conv2d_tolerance(finite_x, w, b, STRIDE, PADDING)[where]
    assert 3.9 < conv2d_error(output, x, w, b, STRIDE, PADDING) < 4.1


def test_winograds_blocks_may_spread_a_nonfinite_input_and_no_further():
    """Winograd's transforms multiply every element of a tile: a NaN input may make its whole 2x2 block of
    outputs NaN (block (2, 2)), never an output of another block."""
    x, w, b = _layer_data()
    reference = conv2d_reference(x, w, b, STRIDE, PADDING)
    spread = reference.copy()
    nan_rows, nan_cols = np.nonzero(np.isnan(reference[0, 0]))
    rows, cols = nan_rows[0] // 2 * 2, nan_cols[0] // 2 * 2
    spread[:, :, rows:rows + 2, cols:cols + 2] = np.nan
    assert conv2d_compare(spread, x, w, b, STRIDE, PADDING, block=(2, 2)).error <= 1
    assert conv2d_compare(spread, x, w, b, STRIDE, PADDING).error == np.inf  # the direct sum does not spread
    far = reference.copy()
    far[0, 0, 0, 0] = np.nan
    assert conv2d_compare(far, x, w, b, STRIDE, PADDING, block=(2, 2)).error == np.inf


def test_float32_may_overflow_where_the_terms_exceed_its_range():
    x = np.full((1, 1, 3, 3), 3e38, np.float32)
    w = np.ones((1, 1, 3, 3), np.float32)
    output = np.full((1, 1, 1, 1), np.inf, np.float32)  # the float64 reference: 2.7e39, beyond float32
    assert conv2d_error(output, x, w, None, (1, 1), (0, 0, 0, 0)) <= 1


def test_close_to_compares_kinds_and_scales_by_the_finite_values():
    assert close_to(np.array([np.nan, np.inf, 1.0]), np.array([np.nan, np.inf, 1.0])) == 0
    assert close_to(np.array([np.nan, 1.0]), np.array([0.0, 1.0])) == np.inf
    assert close_to(np.array([np.inf]), np.array([-np.inf])) == np.inf
    assert close_to(np.array([1.0]), np.array([np.nan])) == np.inf
    assert close_to(np.array([np.inf, 1.5]), np.array([np.inf, 1.0])) > 1  # inf does not widen the tolerance


def test_liftpy_run_with_a_nan_input_agrees_with_the_interpreter(tmp_path, capsys):
    image = np.random.default_rng(0).standard_normal((6, 8)).astype(np.float32)
    image[2, 3], image[4, 6] = np.nan, np.inf
    np.save(tmp_path / "image.npy", image)
    status = main(["run", str(EXAMPLES / "stencil2d.lift"), "--size", "width=8", "--size", "height=6",
                   "--repeat", "1", "--input", f"inputData={tmp_path / 'image.npy'}"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "max error against the interpreter" in out and "error:" not in err


def test_max_is_opencls_fmax_in_the_interpreter_and_the_kernel(tmp_path, capsys):
    """A ReLU written ``max(x, 0.0f)`` runs as OpenCL's fmax: a NaN gives the other operand, in the kernel and in
    the interpreter alike (numpy's maximum would give NaN, and the two would disagree)."""
    program = tmp_path / "relu.lift"
    program.write_text("def relu(xs: [float]_n) = mapGlb(0)(x -> toGlobal(id, max(x, 0.0f)), xs)\n")
    xs = np.array([1.5, np.nan, -2.0, np.inf, -np.inf, 0.25, np.nan, 3.0], dtype=np.float32)
    np.save(tmp_path / "xs.npy", xs)
    status = main(["run", str(program), "--size", "n=8", "--repeat", "1", "--input", f"xs={tmp_path / 'xs.npy'}",
                   "-o", str(tmp_path / "out.npy")])
    out, err = capsys.readouterr()
    assert status == 0, err
    expected = np.array([1.5, 0.0, 0.0, np.inf, 0.0, 0.25, 0.0, 3.0], dtype=np.float32)  # fmax(x, 0), by hand
    assert np.array_equal(np.load(tmp_path / "out.npy"), expected)


@pytest.mark.slow
def test_winograds_first_call_on_nan_and_inf_passes_its_spread_nans(tmp_path):
    """Winograd's program (its stages tuned briefly) spreads a NaN or an infinity over the 2x2 blocks whose
    4x4 input tiles hold it, and turns an infinity into NaN (inf - inf in the transforms): its first call passes
    the check, every output of another kind than the reference's in such a block, every other equal to the
    independent reference."""
    import liftpy
    from liftpy.nn import winograd
    from liftpy.nn.conv import WINOGRAD
    from liftpy.nn.reference import _block_reads_nonfinite

    layer = nn.make_layer((4, 8, 8), (6, 3, 3), 1, 1)
    task = winograd.winograd_task(layer)
    liftpy.tune(task.path, sizes=task.size_map, trials=2, db=tmp_path / "t.sqlite", function=task.function,
                constants=task.constants, repeat=1, **QUIET, confirm=0)
    x, w, b = _layer_data()
    x = np.ascontiguousarray(x[:, :, :8, :8])
    conv2d = nn.Conv2d(w, b, stride=1, padding=1, db=tmp_path / "t.sqlite")
    y = conv2d(x)
    assert conv2d.plans[0].algorithm == WINOGRAD
    expected = conv2d_nchw(x, w, b, STRIDE, PADDING, reference=conv2d_windows)
    spread = _block_reads_nonfinite(x, w, b, STRIDE, PADDING, (1, 1), (2, 2), expected.shape)
    assert not _same_kinds(y, expected) and _same_kinds(y[~spread], expected[~spread])
    finite = np.isfinite(expected) & np.isfinite(y)
    np.testing.assert_allclose(y[finite], expected[finite], rtol=1e-4, atol=1e-4)

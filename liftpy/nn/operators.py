"""A network's operators: each a program of ``liftpy/nn/programs/`` (or ``conv2d.lift``) at its sizes -- a tuning
task -- with the tensors it reads, its constant inputs, and an independent float64 reference.

A :class:`Step` is one call of one operator in a network (:mod:`liftpy.nn.network`); the functions below make
them (``conv``, ``max_pool``, ``gemm``...) from shapes and weights as ONNX and PyTorch give them. The activation
after a convolution, a fully connected layer, a sum or a batch normalisation is a clamp to [low, high] in the
same program (ReLU: [0, inf], ReLU6: [0, 6]). A step's reference (:meth:`Step.expected`) is numpy in float64 on
the inputs the device read, with the float32 error bound of its sums as the tolerance, as a convolution's
first call is checked (:func:`liftpy.nn.reference.conv2d_tolerance`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Mapping

import numpy as np

from ..tuning import ProgramTask
from .conv import DIRECT, WINOGRAD, make_layer  # a step's algorithms, a layer's
from .reference import FLOAT32_UNIT_ROUNDOFF, conv2d_reference, conv2d_tolerance, output_size

#: no clamp: the bounds of an operator without an activation
UNBOUNDED = (-np.inf, np.inf)

#: the lowest float: what max pooling pads with (the program's literal)
LOWEST = -3.402823e38


def _library(name: str) -> str:
    return str(resources.files("liftpy.nn").joinpath(name))


@dataclass(frozen=True)
class Step:
    """One operator call of a network: ``task`` (its program at its sizes), ``reads`` ((the program's input,
    the tensor it reads) for each activation it reads), ``constants`` (the program's inputs fixed at load:
    weights, bounds), ``output`` (the tensor it writes, of ``shape``), ``name`` (the source's nodes it
    computes, joined by '+') and ``op`` (their operators)."""

    name: str
    op: str
    task: ProgramTask
    reads: tuple[tuple[str, str], ...]
    output: str
    shape: tuple[int, ...]
    constants: Mapping[str, object] = field(default_factory=dict, compare=False, repr=False)
    #: other programs computing the same (a 3x3 convolution's Winograd program): (algorithm, task, the constant
    #: inputs it takes beside ``constants``)
    alternatives: tuple[tuple[str, ProgramTask, Mapping[str, object]], ...] = field(default=(), compare=False,
                                                                                    repr=False)

    @property
    def function(self) -> str:
        return self.task.function

    @property
    def programs(self) -> tuple[tuple[str, ProgramTask], ...]:
        """(algorithm, task) of each program computing the step, the direct one (``task``) first."""
        return ((DIRECT, self.task),) + tuple((name, task) for name, task, _ in self.alternatives)

    def constants_of(self, algorithm: str) -> dict[str, object]:
        """The constant inputs of the step's program ``algorithm``."""
        extra = next((more for name, _, more in self.alternatives if name == algorithm), {})
        return {**self.constants, **extra}

    @property
    def sizes(self) -> dict[str, object]:
        return self.task.size_map

    def expected(self, inputs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The float64 reference of the output (of ``shape``) for the program's activation inputs (by the
        program's names, each a tensor in its own shape), and the tolerance of each element."""
        values = {**{k: np.asarray(v, np.float64) for k, v in self.constants.items()},
                  **{k: np.asarray(v, np.float64) for k, v in inputs.items()}}
        expected, tolerance = _REFERENCES[self.function](values, self.sizes)
        return expected.reshape(self.shape), np.broadcast_to(tolerance, expected.shape).reshape(self.shape)


def _task(file: str, function: str, sizes: Mapping[str, object], constants: Mapping[str, object]) -> ProgramTask:
    """The task of a library program; its trials are checked at the step's scalar constants (clamp bounds)."""
    values = tuple(sorted((name, float(value)) for name, value in constants.items() if np.ndim(value) == 0))
    return ProgramTask(_library(file), tuple(sorted(sizes.items())), function, tuple(sorted(constants)),
                       values=values, cold=True)


def _step(name: str, op: str, program: str, function: str, sizes: Mapping[str, object], reads, output: str,
          shape, constants: Mapping[str, object] | None = None) -> Step:
    """A step of ``programs/<program>.lift``'s ``function`` at ``sizes``."""
    constants = dict(constants or {})
    return Step(name, op, _task(f"programs/{program}.lift", function, sizes, constants), tuple(reads), output,
                tuple(shape), constants)


def _bounds(clamp) -> dict[str, np.float32]:
    low, high = clamp
    return {"low": np.float32(low), "high": np.float32(high)}


# ------------------------------------------------------------------------------------------------ the operators
def conv(name: str, op: str, x: str, x_shape, w: np.ndarray, b: np.ndarray | None, output: str, stride=(1, 1),
         padding=(0, 0, 0, 0), dilation=(1, 1), groups: int = 1, clamp=UNBOUNDED, residual: str | None = None) -> Step:
    """A convolution (x NCHW, w OIHW, padding (top, bottom, left, right)), plus ``residual`` (a tensor of the
    output's shape) where given, clamped: conv2d.lift's ``conv2d`` without either (the task a layer of
    :mod:`liftpy.nn` tunes), else ``conv2dClip`` or ``conv2dAddClip``."""
    n, c, h, wd = (int(v) for v in x_shape)
    k, _, kh, kw = w.shape
    out_h, out_w = output_size(h, wd, kh, kw, tuple(stride), tuple(padding), tuple(dilation))
    sizes = dict(N=n, C=c, H=h, W=wd, K=int(k), groups=int(groups), kernelHeight=int(kh), kernelWidth=int(kw),
                 padSize=tuple(int(p) for p in padding), stride=tuple(int(s) for s in stride),
                 dilation=tuple(int(d) for d in dilation))
    constants = {"weights": np.ascontiguousarray(w, np.float32),
                 "biases": np.zeros(k, np.float32) if b is None else np.ascontiguousarray(b, np.float32)}
    reads = (("input", x),)
    if residual is not None:
        function, file = "conv2dAddClip", "programs/conv2d_add_clip.lift"
        sizes.update(outHeight=out_h, outWidth=out_w)
        constants.update(_bounds(clamp))
        reads += (("residual", residual),)
    elif tuple(clamp) != UNBOUNDED:
        function, file = "conv2dClip", "programs/conv2d_clip.lift"
        constants.update(_bounds(clamp))
    else:
        function, file = "conv2d", "conv2d.lift"
    alternatives = _winograd(make_layer((c, h, wd), (int(k), int(kh), int(kw)), tuple(stride), tuple(padding), n,
                                        dilation=tuple(dilation), groups=int(groups)), clamp, constants,
                             residual is not None)
    return Step(name, op, _task(file, function, sizes, constants), reads, output, (n, int(k), out_h, out_w),
                constants, alternatives)


def _winograd(layer, clamp, constants, residual: bool = False) -> tuple:
    """The step's Winograd program where F(2x2, 3x3) applies: conv2d_winograd.lift's (the task a layer of
    :mod:`liftpy.nn` tunes), with a clamp ``programs/conv2d_winograd_clip.lift``'s, with a ``residual``
    ``programs/conv2d_winograd_add_clip.lift``'s."""
    from . import winograd

    if not winograd.applies(layer):
        return ()
    extra = winograd.transforms()
    task = replace(winograd.winograd_task(layer), cold=True)
    if residual:
        task = _task("programs/conv2d_winograd_add_clip.lift", "conv2dWinogradAddClip",
                     {**task.size_map, "outHeight": layer.out_height, "outWidth": layer.out_width},
                     {**constants, **extra})
    elif tuple(clamp) != UNBOUNDED:
        task = _task("programs/conv2d_winograd_clip.lift", "conv2dWinogradClip", task.size_map,
                     {**constants, **extra})
    return ((WINOGRAD, task, extra),)


def max_pool(name: str, x: str, x_shape, output: str, window, stride, padding) -> Step:
    """Max pooling of ``window`` (rows, columns) moved by ``stride``; ``padding`` (top, bottom, left, right) is
    never chosen."""
    n, c, h, w = (int(v) for v in x_shape)
    out_h, out_w = output_size(h, w, window[0], window[1], tuple(stride), tuple(padding), (1, 1))
    sizes = dict(N=n, C=c, H=h, W=w, poolSize=tuple(window), padSize=tuple(padding), stride=tuple(stride))
    return _step(name, "MaxPool", "max_pool", "maxPool2d", sizes, [("input", x)], output, (n, c, out_h, out_w))


def avg_pool(name: str, x: str, x_shape, output: str, window, stride, padding) -> Step:
    """Average pooling, the padding counted as zeros (ONNX's count_include_pad = 1)."""
    n, c, h, w = (int(v) for v in x_shape)
    out_h, out_w = output_size(h, w, window[0], window[1], tuple(stride), tuple(padding), (1, 1))
    sizes = dict(N=n, C=c, H=h, W=w, poolSize=tuple(window), padSize=tuple(padding), stride=tuple(stride))
    constants = {"scale": np.float32(1.0 / (window[0] * window[1]))}
    return _step(name, "AveragePool", "avg_pool", "avgPool2d", sizes, [("input", x)], output, (n, c, out_h, out_w),
                 constants)


def global_avg_pool(name: str, x: str, x_shape, output: str) -> Step:
    n, c, h, w = (int(v) for v in x_shape)
    constants = {"scale": np.float32(1.0 / (h * w))}
    return _step(name, "GlobalAveragePool", "global_avg_pool", "globalAvgPool", dict(N=n, C=c, H=h, W=w),
                 [("input", x)], output, (n, c, 1, 1), constants)


def gemm(name: str, op: str, a: str, a_shape, weights: np.ndarray, biases: np.ndarray | None, output: str,
         clamp=UNBOUNDED) -> Step:
    """``a @ weights.T + biases``, clamped: a is n x k, weights m x k (PyTorch's Linear)."""
    n, k = (int(v) for v in a_shape)
    m = int(weights.shape[0])
    constants = {"weights": np.ascontiguousarray(weights, np.float32),
                 "biases": np.zeros(m, np.float32) if biases is None else np.ascontiguousarray(biases, np.float32),
                 **_bounds(clamp)}
    return _step(name, op, "gemm_clip", "gemmClip", dict(n=n, k=k, m=m), [("a", a)], output, (n, m), constants)


def clip(name: str, op: str, x: str, shape, output: str, clamp) -> Step:
    constants = _bounds(clamp)
    n = int(np.prod(shape))
    return _step(name, op, "clip", "clip", dict(n=n), [("input", x)], output, shape, constants)


def add(name: str, op: str, a: str, b: str, shape, output: str, clamp=UNBOUNDED) -> Step:
    constants = _bounds(clamp)
    n = int(np.prod(shape))
    return _step(name, op, "add_clip", "addClip", dict(n=n), [("a", a), ("b", b)], output, shape, constants)


def scale_shift(name: str, op: str, x: str, x_shape, scale: np.ndarray, shift: np.ndarray, output: str,
                clamp=UNBOUNDED) -> Step:
    """Per channel ``x * scale + shift``, clamped: a batch normalisation with no convolution to fold into."""
    n, c, h, w = (int(v) for v in x_shape)
    constants = {"scale": np.ascontiguousarray(scale, np.float32), "shift": np.ascontiguousarray(shift, np.float32),
                 **_bounds(clamp)}
    return _step(name, op, "scale_shift_clip", "scaleShiftClip", dict(N=n, C=c, H=h, W=w), [("input", x)], output,
                 (n, c, h, w), constants)


def concat(name: str, a: str, a_shape, b: str, b_shape, output: str) -> Step:
    """Two NCHW tensors joined along the channels."""
    n, c1, h, w = (int(v) for v in a_shape)
    c2 = int(b_shape[1])
    return _step(name, "Concat", "concat", "concat2", dict(N=n, C1=c1, C2=c2, H=h, W=w), [("a", a), ("b", b)], output,
                 (n, c1 + c2, h, w))


def softmax(name: str, x: str, shape, output: str) -> Step:
    """Softmax along the last axis of a matrix (rows x columns)."""
    n, m = (int(v) for v in shape)
    return _step(name, "Softmax", "softmax", "softmax", dict(n=n, m=m), [("input", x)], output, (n, m))


# ------------------------------------------------------------------------------------------------ references
def _gamma(terms: int) -> float:
    """Higham's γ_m for m rounded operations (``conv2d_tolerance`` says why)."""
    m = terms + 1
    return m * FLOAT32_UNIT_ROUNDOFF / (1 - m * FLOAT32_UNIT_ROUNDOFF)


def _clamped(value: np.ndarray, tolerance: np.ndarray, v) -> tuple[np.ndarray, np.ndarray]:
    """Clamp to [low, high] as OpenCL's max and min do (a NaN operand gives the other); clamping does not
    widen an error."""
    low, high = (float(v["low"]), float(v["high"])) if "low" in v else UNBOUNDED
    return np.fmin(np.fmax(value, low), high), tolerance


def _finite_abs(a: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(a), np.abs(a), 0.0)


def _conv_reference(v, s):
    args = (tuple(s["stride"]), tuple(s["padSize"]), tuple(s["dilation"]), int(s["groups"]))
    value = conv2d_reference(v["input"], v["weights"], v["biases"], *args)
    tolerance = conv2d_tolerance(v["input"], v["weights"], v["biases"], *args)
    if "residual" in v:  # one more term of the sum, in any order (conv2dAddClip starts the sum with it)
        value = value + v["residual"]
        weights = v["weights"]
        terms = int(np.prod(weights.shape[1:]))  # the window's products; the bias and the residual besides
        tolerance = (tolerance * (_gamma(terms + 1) / _gamma(terms))
                     + _gamma(terms + 1) * _finite_abs(np.asarray(v["residual"], np.float64)))
    return _clamped(value, tolerance, v)


def _pool_windows(x: np.ndarray, s, fill: float) -> np.ndarray:
    """The windows of each plane: (N, C, outH, outW, rows, columns)."""
    top, bottom, left, right = s["padSize"]
    padded = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=fill)
    rows, columns = s["poolSize"]
    windows = np.lib.stride_tricks.sliding_window_view(padded, (rows, columns), axis=(2, 3))
    return windows[:, :, ::s["stride"][0], ::s["stride"][1]]


def _max_pool_reference(v, s):
    windows = _pool_windows(v["input"], s, LOWEST)
    finite = np.where(np.isnan(windows), -np.inf, windows)  # OpenCL's max passes a NaN by
    value = finite.max(axis=(-2, -1))
    return value, np.zeros_like(value)  # a maximum is exact


def _sum_reference(windows: np.ndarray, scale: float, terms: int):
    value = windows.sum(axis=(-2, -1)) * scale
    magnitude = _finite_abs(windows).sum(axis=(-2, -1)) * abs(scale)
    return value, _gamma(terms + 1) * magnitude + 2.0 ** -126 * terms


def _avg_pool_reference(v, s):
    rows, columns = s["poolSize"]
    return _sum_reference(_pool_windows(v["input"], s, 0.0), float(v["scale"]), rows * columns)


def _global_avg_pool_reference(v, s):
    x = v["input"]
    return _sum_reference(x.reshape(*x.shape[:2], 1, -1), float(v["scale"]), x.shape[2] * x.shape[3])


def _gemm_reference(v, s):
    a, w, b = v["a"].reshape(s["n"], s["k"]), v["weights"], v["biases"]  # a flattened tensor's rows
    value = a @ w.T + b
    tolerance = _gamma(a.shape[1] + 1) * (_finite_abs(a) @ _finite_abs(w).T + _finite_abs(b)) + 2.0 ** -126 * a.shape[1]
    return _clamped(value, tolerance, v)


def _clip_reference(v, s):
    return _clamped(v["input"], np.zeros_like(v["input"]), v)


def _add_reference(v, s):
    value = v["a"] + v["b"]
    return _clamped(value, FLOAT32_UNIT_ROUNDOFF * (_finite_abs(v["a"]) + _finite_abs(v["b"])), v)


def _scale_shift_reference(v, s):
    scale, shift = v["scale"][None, :, None, None], v["shift"][None, :, None, None]
    value = v["input"] * scale + shift
    magnitude = _finite_abs(v["input"] * scale) + _finite_abs(shift)
    return _clamped(value, 2 * _gamma(2) * magnitude, v)


def _concat_reference(v, s):
    value = np.concatenate([v["a"], v["b"]], axis=1)
    return value, np.zeros_like(value)


def _softmax_reference(v, s):
    """Each value's error relative to it: the difference x - max rounded (u·|x - max| in the exponent), exp's
    (OpenCL allows 3 ulp: 6u), the row's sum of positive terms (γ_m) and the division (u)."""
    x = v["input"].reshape(s["n"], s["m"])  # the tensor as the program's matrix
    top = np.max(np.where(np.isnan(x), -np.inf, x), axis=1, keepdims=True)
    e = np.exp(x - top)
    value = e / e.sum(axis=1, keepdims=True)
    u = FLOAT32_UNIT_ROUNDOFF
    relative = u * _finite_abs(x - top) + 6 * u + _gamma(x.shape[1]) + u
    return value, relative * np.abs(value) + 2.0 ** -126


_REFERENCES = {"conv2d": _conv_reference, "conv2dClip": _conv_reference, "conv2dAddClip": _conv_reference,
               "maxPool2d": _max_pool_reference, "avgPool2d": _avg_pool_reference,
               "globalAvgPool": _global_avg_pool_reference, "gemmClip": _gemm_reference, "clip": _clip_reference,
               "addClip": _add_reference, "scaleShiftClip": _scale_shift_reference, "concat2": _concat_reference,
               "softmax": _softmax_reference}

__all__ = ["Step", "UNBOUNDED", "DIRECT", "WINOGRAD", "conv", "max_pool", "avg_pool", "global_avg_pool", "gemm",
           "clip", "add", "scale_shift", "concat", "softmax"]

"""Convolution layers with PyTorch's ``conv2d`` semantics, compiled by liftpy and run through PyOpenCL.

By default (``algorithm="route"``) a layer is the convolution written at the high level
(``liftpy/nn/conv2d.lift``: stride, padding, dilation, groups) compiled through the automatic route
(:mod:`liftpy.rewrite.route`): its configuration is the tuning database's best for the layer and device (``liftpy
tune --layer``), else the route's default; the weights are given as PyTorch has them (OIHW), and the layout
change the chosen program wants is a kernel of the program, run once when a layer is prepared.

The hand-written low-level pipelines (``liftpy/nn/*.lift``, :data:`ALGORITHMS`) are still there by name,
each with its parameter space (:func:`conv_space`) and its numpy weight layout (:data:`WEIGHT_LAYOUTS`):

* ``"paper"``: the paper's section 4.2 (``conv_pipeline.lift``): padding, partial convolution over tiles
  (θ, ρ, κ, σ, ω, v), summing the partial results (with the bias and the crop);
* ``"direct"``: an extension of the space for CPUs and wide vectors (``conv_direct.lift``): each work-item
  computes σ pixels x κ kernels over the whole window, vectorised over kernels; and their variants.

A configuration given by the user is checked first and refused with the reason. A plan's first run is
checked against a float64 numpy reference.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Callable, Mapping

import numpy as np

from ..errors import ConstraintError, InputError, LiftError
from ..params import ParameterSpace, parameters
from .layers import ConvLayer, layer as named_layer
from .reference import conv2d_error, im2col_bytes

#: how each pipeline wants the OIHW weights (numpy on the host, once per layer), with the text export notes give
WEIGHT_LAYOUTS = {
    "ohwi": "K x kh x kw x C: w.transpose(0, 2, 3, 1)",
    "grouped-hwc": "grouped for vector loads: [K/κ][kh*kw*C][κ], i.e. "
                   "w.transpose(0, 2, 3, 1).reshape(K // κ, κ, -1).transpose(0, 2, 1)",
    "grouped-chw": "grouped for broadcasts: [K/κ][C*kh*kw][κ], i.e. w.reshape(K // κ, κ, -1).transpose(0, 2, 1)",
}


def arrange_weights(layout: str, w: np.ndarray, config: Mapping[str, int]) -> np.ndarray:
    """OIHW weights rearranged into a pipeline's layout (see :data:`WEIGHT_LAYOUTS`)."""
    w = np.asarray(w, dtype=np.float32)
    if layout == "grouped-chw":
        kernels, kappa = w.shape[0], config["κ"]
        return np.ascontiguousarray(w.reshape(kernels // kappa, kappa, -1).transpose(0, 2, 1))
    ohwi = w.transpose(0, 2, 3, 1)
    if layout == "grouped-hwc":
        kernels, kappa = w.shape[0], config["κ"]
        return np.ascontiguousarray(ohwi.reshape(kernels // kappa, kappa, -1).transpose(0, 2, 1))
    return np.ascontiguousarray(ohwi)


def _derived_convolution():
    from liftpy.rewrites.convolution import convolution

    return convolution(square=False)  # θ x θw tiles: every layer shape


def _derived_direct():
    from liftpy.rewrites.direct import direct

    return direct()


def _inline_padding():
    from liftpy.rewrites.copies import inline_copies

    return inline_copies("padded")


@dataclass(frozen=True)
class Algorithm:
    """A pipeline: the program in ``file`` (``liftpy/nn/``), rewritten by the strategy ``derive()`` returns if it
    has one, every tuning parameter left symbolic."""

    name: str
    file: str
    doc: str
    weights: str  # a key of WEIGHT_LAYOUTS
    blocked: bool = False  # a space of σ x κ blocks per work-item (direct, rows and their variants)
    derive: Callable[[], object] | None = None  # the strategy applied to the file's program (built on first use)


ALGORITHMS = {
    "direct": Algorithm("direct", "conv_direct.lift", "σ pixels x κ kernels per work-item, vectorised over kernels",
                        "grouped-hwc", blocked=True),
    "direct-chw": Algorithm("direct-chw", "conv_direct_chw.lift",
                            "direct on an NCHW padded copy (no transposition), windows in channel-row-column order",
                            "grouped-chw", blocked=True),
    "rows": Algorithm("rows", "conv_rows.lift", "σ pixels x κ kernels per work-item, vectorised along output rows",
                      "grouped-chw", blocked=True),
    "paper": Algorithm("paper", "conv_pipeline.lift", "the paper's pipeline: tiles, partial sums over chunks", "ohwi"),
    "derived": Algorithm("derived", "conv_layer.lift",
                         "the paper's pipeline derived from listing 3 by the rewrite strategy convolution", "ohwi",
                         derive=_derived_convolution),
    "derived-direct": Algorithm("derived-direct", "conv_layer.lift",
                                "the CPU extension derived from listing 3 by the rewrite strategy direct", "ohwi",
                                blocked=True, derive=_derived_direct),
    # The memory/time trade-off of the paper's figure 6: the padded input is not copied to memory (the copy is
    # turned back into the view it copies by the strategy inline_copies); the convolution reads the input
    # through the padding view, a condition at every read. One kernel and the padded buffer fewer (for VGG-16
    # layer 2, 13 MB of 37 MB), more work per read. Same sizes, space, weights and defaults as the base.
    "direct-nocopy": Algorithm("direct-nocopy", "conv_direct.lift",
                               "direct without the padding kernel: reads the input through the padding view "
                               "(rewrite strategy inline_copies)", "grouped-hwc", blocked=True,
                               derive=_inline_padding),
    "direct-chw-nocopy": Algorithm("direct-chw-nocopy", "conv_direct_chw.lift",
                                   "direct-chw without the padding kernel: reads the input through the padding view "
                                   "(rewrite strategy inline_copies)", "grouped-chw", blocked=True,
                                   derive=_inline_padding),
    "rows-nocopy": Algorithm("rows-nocopy", "conv_rows.lift",
                             "rows without the padding kernel: reads the input through the padding view "
                             "(rewrite strategy inline_copies)", "grouped-chw", blocked=True,
                             derive=_inline_padding),
}
#: the algorithms that are listing 3 rewritten (one image per run, listing 3's layouts)
DERIVED = ("derived", "derived-direct")
#: the automatic route on the high-level convolution (conv2d.lift): the algorithm of a layer not told otherwise
ROUTE = "route"
DEFAULT_ALGORITHM = ROUTE
#: what the tuner searches when not told: the pipelines built for CPUs and wide vectors (the paper's
#: pipeline is ten times slower on a CPU; ask for it by name). Without a padded copy, direct-chw-nocopy wins
#: where the input's planes are large (most work-items see no padding); direct-chw's copy is cheaper than
#: direct's transposition; direct wins where the planes are small, rows on few channels. direct-nocopy and
#: rows-nocopy lost to these on every VGG-16 layer tried.
TUNED_ALGORITHMS = ("direct", "direct-chw", "direct-chw-nocopy", "rows")


@lru_cache(maxsize=None)
def algorithm_program(name: str):
    """The parsed pipeline program of an algorithm (rewritten by its strategy, if it has one)."""
    from .. import parse

    if name not in ALGORITHMS:
        raise InputError(f"unknown algorithm {name!r} (known: {', '.join(ALGORITHMS)})")
    algorithm = ALGORITHMS[name]
    program = parse(resources.files("liftpy.nn").joinpath(algorithm.file).read_text(), f"liftpy/nn/{algorithm.file}")
    if algorithm.derive is not None:
        program = algorithm.derive()(program).program
    return program


def route_task(layer: ConvLayer):
    """The layer as a program to tune: conv2d.lift's ``conv2d`` at the layer's sizes, its weights and biases
    constant (a layer without a bias computes with zeros: one tuning serves both)."""
    from ..tuning.program import ProgramTask

    path = str(resources.files("liftpy.nn").joinpath("conv2d.lift"))
    sizes = dict(N=layer.batch, C=layer.channels, H=layer.height, W=layer.width, K=layer.kernels,
                 groups=layer.groups, kernelHeight=layer.kernel_height, kernelWidth=layer.kernel_width,
                 padSize=layer.padding, stride=layer.stride, dilation=layer.dilation)
    return ProgramTask(path, tuple(sorted(sizes.items())), "conv2d", ("weights", "biases"))


_ROUTE_SPACES: dict[tuple, object] = {}


def route_space(layer: ConvLayer, device):
    """The automatic route's space of a layer on a live device (a pyopencl.Device), built once."""
    task = route_task(layer)
    key = (task, device.int_ptr)
    if key not in _ROUTE_SPACES:
        _ROUTE_SPACES[key] = task.space(device)
    return _ROUTE_SPACES[key]


# ------------------------------------------------------------------------------------------------ arguments
def _pair(value, what: str) -> tuple[int, int]:
    if isinstance(value, (int, np.integer)):
        return int(value), int(value)
    try:
        values = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be an int or a pair of ints, got {value!r}") from None
    if len(values) != 2:
        raise InputError(f"{what} must be an int or a pair of ints, got {value!r}")
    return values


def normalize_padding(padding) -> tuple[int, int, int, int]:
    """An int, a pair (height, width) or four values (top, bottom, left, right) -> (top, bottom, left, right)."""
    if isinstance(padding, (int, np.integer)):
        values = (int(padding),) * 4
    else:
        try:
            values = tuple(int(v) for v in padding)
        except (TypeError, ValueError):
            raise InputError(f"padding must be an int, (h, w) or (top, bottom, left, right), got {padding!r}") from None
        if len(values) == 2:
            values = (values[0], values[0], values[1], values[1])
        elif len(values) != 4:
            raise InputError(f"padding must be an int, (h, w) or (top, bottom, left, right), got {padding!r}")
    if any(v < 0 for v in values):
        raise InputError(f"padding cannot be negative, got {padding!r}")
    return values


def _groups(groups) -> int:
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
        raise InputError(f"groups must be a positive integer, got {groups!r}")
    return int(groups)


def make_layer(input_shape, kernel_shape, stride=1, padding=0, batch=1, name="layer", dilation=1,
               groups=1) -> ConvLayer:
    """A layer from (C, H, W) and (K, kh, kw), checked for sense."""
    channels, height, width = (int(v) for v in input_shape)
    kernels, kh, kw = (int(v) for v in kernel_shape)
    stride = _pair(stride, "stride")
    dilation = _pair(dilation, "dilation")
    padding = normalize_padding(padding)
    if min(channels, height, width, kernels, kh, kw, batch) < 1:
        raise InputError(f"every size must be at least 1: input {input_shape}, kernels {kernel_shape}, batch {batch}")
    if min(stride) < 1:
        raise InputError(f"stride must be at least 1, got {stride}")
    if min(dilation) < 1:
        raise InputError(f"dilation must be at least 1, got {dilation}")
    groups = _groups(groups)
    if channels % groups or kernels % groups:
        raise InputError(f"groups ({groups}) must divide the input channels ({channels}) and the kernels ({kernels})")
    layer = ConvLayer(name, channels, height, width, kernels, kh, kw, stride, padding, batch, dilation, groups)
    top, bottom, left, right = padding
    if layer.span[0] > height + top + bottom or layer.span[1] > width + left + right:
        spanned = f" spanning {layer.span[0]}x{layer.span[1]} dilated" if dilation != (1, 1) else ""
        raise InputError(f"the kernel ({kh}x{kw}{spanned}) is larger than the padded input "
                         f"({height + top + bottom}x{width + left + right})")
    return layer


# ------------------------------------------------------------------------------------------------ the space
def _sizes(layer: ConvLayer, algorithm: str) -> dict:
    if algorithm in DERIVED:  # listing 3's names; one image at a time
        return dict(inputChannels=layer.channels, inputHeight=layer.height, inputWidth=layer.width,
                    numKernels=layer.kernels, kernelHeight=layer.kernel_height, kernelWidth=layer.kernel_width,
                    padSize=layer.padding, kernelStride=layer.stride)
    common = dict(N=layer.batch, C=layer.channels, H=layer.height, W=layer.width, K=layer.kernels,
                  stride=layer.stride, padding=layer.padding)
    sizes = {p.name for p in algorithm_program(algorithm).functions[-1].params if p.is_size}
    if "kernel" in sizes:  # the kernel's shape as one (int, int) parameter
        return dict(common, kernel=(layer.kernel_height, layer.kernel_width))
    return dict(common, kh=layer.kernel_height, kw=layer.kernel_width)


def conv_space(layer: ConvLayer | str | None = None, *, input=None, kernels=None, stride=1, padding=0, batch=1,
               device=None, algorithm: str | None = None) -> ParameterSpace:
    """The parameter space of a layer's whole pipeline: ``conv_space("vgg16.7")`` or
    ``conv_space(input=(256, 28, 28), kernels=(512, 3, 3), stride=1, padding=1, device=...)``; for the
    automatic route (the default algorithm) its :class:`~liftpy.rewrite.route.RouteSpace` on the live device."""
    if isinstance(layer, str):
        layer = named_layer(layer)
    if layer is None:
        if input is None or kernels is None:
            raise InputError("give a layer name, or input=(C, H, W) and kernels=(K, kh, kw)")
        layer = make_layer(input, kernels, stride, padding, batch)
    algorithm = algorithm or DEFAULT_ALGORITHM
    if algorithm == ROUTE:
        from ..runtime import get_device

        return route_space(layer, get_device(device))
    program = algorithm_program(algorithm)
    kh, kw, (s1, s2) = layer.kernel_height, layer.kernel_width, layer.stride
    top, bottom, left, right = layer.padding
    if ALGORITHMS[algorithm].blocked:
        ranges = {"σ": (1, layer.out_width), "κ": (1, layer.kernels), "v": (1, 16)}
        space = parameters(program, _sizes(layer, algorithm), device=device, ranges=ranges)
        return space
    padded_h, padded_w = layer.height + top + bottom, layer.width + left + right
    window = layer.channels * kh * kw
    if algorithm == "derived":  # the rules' own assumptions (tiles cover the input...) come with the program
        ranges = {"θ": (kh, min(2 * padded_h, 96)), "θw": (kw, min(2 * padded_w, 96)), "ρh": (0, 48),
                  "ρw": (0, 48), "κ": (1, layer.kernels), "σ": (1, 256), "ω": (1, window), "v": (1, 16)}
        space = parameters(program, _sizes(layer, algorithm), device=device, ranges=ranges)
        return _chunk_and_padding_constraints(space, "θ", "θw", kh, kw, s1, s2)
    ranges = {"θh": (kh, min(2 * padded_h, 96)), "θw": (kw, min(2 * padded_w, 96)), "ρh": (0, 48), "ρw": (0, 48),
              "κ": (1, layer.kernels), "σ": (1, 256), "ω": (1, window), "v": (1, 16)}
    space = parameters(program, _sizes(layer, algorithm), device=device, ranges=ranges)
    _chunk_and_padding_constraints(space, "θh", "θw", kh, kw, s1, s2)
    # the paper's hand-written constraints: tiles cover the padded input exactly, on the window grid
    space.require("tiles cover the rows", f"({padded_h} + ρh - θh) % (θh - {kh} + {s1}) == 0",
                  "the tiles must cover the padded input's rows exactly (slideStrict)")
    space.require("tiles cover the columns", f"({padded_w} + ρw - θw) % (θw - {kw} + {s2}) == 0",
                  "the tiles must cover the padded input's columns exactly (slideStrict)")
    space.require("tiles on the window grid (rows)", f"(θh - {kh}) % {s1} == 0",
                  "a tile's windows must continue the previous tile's: (θ - kh) must be a multiple of the stride")
    space.require("tiles on the window grid (columns)", f"(θw - {kw}) % {s2} == 0",
                  "a tile's windows must continue the previous tile's: (θ - kw) must be a multiple of the stride")
    return space


def _chunk_and_padding_constraints(space: ParameterSpace, tile_h: str, tile_w: str, kh: int, kw: int, s1: int,
                                   s2: int) -> ParameterSpace:
    """Constraints that only prune redundant points of the paper's space: chunks of whole vectors (ω and ω - 1
    would otherwise be the same program) and optimisational padding below one tiling step."""
    space.require("whole vectors per chunk", "ω % v == 0", "a chunk holds whole vectors (else ω and ω - 1 are one)")
    space.require("no whole padding tile (rows)", f"ρh < {tile_h} - {kh} + {s1}",
                  "optimisational padding beyond one tiling step only adds work")
    space.require("no whole padding tile (columns)", f"ρw < {tile_w} - {kw} + {s2}",
                  "optimisational padding beyond one tiling step only adds work")
    return space


def default_config(space: ParameterSpace, algorithm: str, device_kind: str = "cpu") -> dict[str, int]:
    """The documented default rule, used when no configuration is given (and no tuning result is known):

    * direct: the widest vector width the space allows (up to 16), then σ x κ/v vector accumulators as close
      to 24 as possible (AVX-512 has 32 vector registers), more pixels (σ) before more kernels on ties;
    * paper: the paper's best point for VGG-16 layer 7 as far as the layer allows -- v = 4, κ = 4, σ = 3 --
      then the least optimisational padding and the most work per chunk.
    """
    candidates = space.sample(400, seed=0)
    if not candidates:
        raise ConstraintError("no valid configuration for this layer on this device",
                              notes=tuple(str(c) for c in space.explain_unsat()))
    if ALGORITHMS[algorithm].blocked:
        def score(c):
            accumulators = c["σ"] * c["κ"] // c["v"]
            return (-c["v"], abs(accumulators - 24), -c["σ"])
    else:  # paper and derived
        def score(c):
            return (abs(c["v"] - 4), abs(c["κ"] - 4), abs(c["σ"] - 3), c["ρh"] + c["ρw"], -c["ω"])
    return min(candidates, key=score)


# ------------------------------------------------------------------------------------------------ plans
@dataclass
class ConvResult:
    output: np.ndarray
    kernel_ms: float
    stage_ms: dict[str, float]
    max_error: float | None  # against the reference, in units of the tolerance (conv2d_error), when checked
    runs_ms: tuple[float, ...] = ()  # every timed run's total

    def gflops(self, layer: ConvLayer) -> float:
        return layer.flops / (self.kernel_ms * 1e6)


@dataclass
class ConvPlan:
    """A layer compiled with one configuration for one device: run it, time it, measure its memory."""

    layer: ConvLayer
    algorithm: str
    config: dict[str, int]
    executable: object
    checked: bool = field(default=False)

    @property
    def memory_bytes(self) -> int:
        """Every global buffer the pipeline allocates: input, weights, biases, intermediates and output."""
        return self.executable.memory_bytes

    @property
    def im2col_bytes(self) -> int:
        L = self.layer
        return im2col_bytes(L.batch, L.channels, L.height, L.width, L.kernels, L.kernel_height, L.kernel_width,
                            L.out_height, L.out_width)

    @property
    def sources(self) -> dict[str, str]:
        return self.executable.sources

    def constants(self, w: np.ndarray, b: np.ndarray | None) -> dict[str, np.ndarray]:
        """The pipeline's fixed inputs: the weights rearranged for it and the biases (zeros when there are none)."""
        bias = np.zeros(self.layer.kernels, np.float32) if b is None else np.ascontiguousarray(b, dtype=np.float32)
        if self.algorithm == ROUTE:  # as PyTorch has them: the program relays them itself, once
            return {"weights": np.ascontiguousarray(w, dtype=np.float32), "biases": bias}
        weights = arrange_weights(ALGORITHMS[self.algorithm].weights, w, self.config)
        if self.algorithm in DERIVED:  # listing 3's names
            return {"kernelsWeights": weights, "kernelsBiases": bias}
        return {"weights": weights, "biases": bias}

    def prepare(self, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> dict[str, np.ndarray]:
        """Every input of the pipeline, as its kernels read them (for exported kernels and host scripts)."""
        if self.algorithm in DERIVED:  # listing 3's layout: images H x W x C
            images = np.ascontiguousarray(np.asarray(x, dtype=np.float32).transpose(0, 2, 3, 1))
            return {"inputData": images, **self.constants(w, b)}
        return {"input": np.ascontiguousarray(x, dtype=np.float32), **self.constants(w, b)}

    def bind(self, w: np.ndarray, b: np.ndarray | None) -> "BoundConv":
        """The plan with its weights rearranged and uploaded once, ready for repeated calls on images."""
        return BoundConv(self, self.executable.prepare(self.constants(w, b)))

    def run(self, x, w, b=None, repeat: int = 1, warmup: int = 0, check: bool | None = None) -> ConvResult:
        """Run the pipeline once on fresh device buffers. The first run of a plan (or any, with ``check``) is
        checked: its output and intermediate buffers filled with NaN first, its result compared with the
        float64 reference at the tolerance of :func:`conv2d_tolerance`; a wrong result raises."""
        return self.bind(w, b).run(x, repeat=repeat, warmup=warmup, check=check, weights=(w, b))


@dataclass
class BoundConv:
    """A plan with its constant inputs on the device: ``run(x)`` uploads (or, on a CPU, maps) the images only."""

    plan: ConvPlan
    program: object  # runtime.PreparedProgram
    checked: bool = False  # a run of this binding (its weights, its buffers) passed the check

    def run(self, x: np.ndarray, repeat: int = 1, warmup: int = 0, check: bool | None = None,
            weights: tuple | None = None, poison: bool | None = None) -> ConvResult:
        """Run on NCHW images. ``check`` (default: the plan's first run) needs ``weights`` = (w, b) as given;
        a checked run fills the output and intermediate buffers with NaN first (``poison``, default: when
        checked), so that every element it sees was written by this run."""
        plan, L = self.plan, self.plan.layer
        checking = check or (check is None and not plan.checked)
        if checking and weights is None:
            raise LiftError("checking a run needs the layer's weights")
        poison = checking if poison is None else poison
        x = np.asarray(x, dtype=np.float32)
        if plan.algorithm in DERIVED:  # listing 3 is for one image: the pipeline runs once per image
            runs = [self.program.run({"inputData": image.transpose(1, 2, 0)}, repeat=repeat, warmup=warmup,
                                     poison=poison) for image in x]
            result = _summed(runs)
        else:
            result = self.program.run({"input": x}, repeat=repeat, warmup=warmup, poison=poison)
        output = result.output.reshape(L.batch, L.kernels, L.out_height, L.out_width)
        error = None
        if checking:
            w, b = weights
            error = conv2d_error(output, x, np.asarray(w), b, L.stride, L.padding, L.dilation, L.groups)
            if not error <= 1:
                raise LiftError(
                    f"the generated {plan.algorithm} pipeline for {L.describe()} with {plan.config} differs from "
                    f"the reference: its largest error is {error:.3g} times the float32 tolerance"
                )
            plan.checked = self.checked = True
        produces = {k.name: k.produces for k in plan.executable.generated.kernels}  # kernel -> what it computes
        stages = {produces[name]: ms for name, ms in result.per_kernel_ms.items()}
        return ConvResult(output, result.kernel_ms, stages, error, result.runs_ms)


def _summed(runs):
    """Several runs of one pipeline (one per image) as one: outputs stacked, times added."""
    from ..runtime import RunResult

    return RunResult(
        np.stack([r.output for r in runs]),
        sum(r.kernel_ms for r in runs),
        {k: sum(r.per_kernel_ms[k] for r in runs) for k in runs[0].per_kernel_ms},
        tuple(sum(t) for t in zip(*(r.runs_ms for r in runs))),
    )


_PLANS: dict[tuple, ConvPlan] = {}


def best_trial(database, layer: ConvLayer, device: str | None, algorithm: str | None = None):
    """The fastest correct trial in ``database`` for this layer (on the device named, if one is) of
    ``algorithm`` -- the automatic route's trials are the layer's program's (:func:`route_task`) -- or,
    without one, of the route and every hand-written pipeline (a layer tuned before the route was the default
    keeps its result); None if there is none."""
    from ..tuning.db import ranked

    found = [database.best(route_task(layer), device, ROUTE)] if algorithm in (None, ROUTE) else []
    found += [database.best(layer, device, algorithm)] if algorithm != ROUTE else []
    found = ranked(t for t in found if t is not None)
    return found[0] if found else None


def best_known(layer: ConvLayer, device, algorithm: str | None, db=None):
    """:func:`best_trial` on a live device, in the tuning database at ``db`` (default: the user's), if it exists."""
    from pathlib import Path

    from ..runtime import device_info
    from ..tuning.db import TuningDB, default_db_path

    path = db or default_db_path()
    if not path or not Path(path).exists():
        return None
    database = TuningDB(path)
    try:
        return best_trial(database, layer, device_info(device).name, algorithm)
    finally:
        database.close()


def plan(layer: ConvLayer, config: Mapping[str, int] | None = None, device=None, algorithm: str | None = None,
         space: ParameterSpace | None = None, db=None) -> ConvPlan:
    """Compile a layer for a configuration (checked against its space). Without a configuration: the best one
    the tuning database knows for this layer and device, else the default (the route's, or a pipeline's
    rule). ``algorithm``: the automatic route (the default) or a hand-written pipeline by name."""
    from ..runtime import compile as compile_program, get_device

    dev = get_device(device)
    config = _check_config(config)
    if algorithm is not None and algorithm != ROUTE and algorithm not in ALGORITHMS:
        raise InputError(f"unknown algorithm {algorithm!r} (known: {ROUTE}, {', '.join(ALGORITHMS)})")
    if algorithm not in (None, ROUTE) and (layer.dilation != (1, 1) or layer.groups != 1):
        raise InputError(f"the hand-written pipeline {algorithm} has no dilation or groups: leave algorithm unset "
                         f"(the automatic route)")
    known = best_known(layer, dev, algorithm, db) if config is None and space is None else None
    algorithm = known.algorithm if known is not None else algorithm or DEFAULT_ALGORITHM
    if known is not None:
        config = route_task(layer).complete(known.config) if algorithm == ROUTE else known.config
    key = (layer, algorithm, tuple(sorted(config.items())) if config else None, dev.int_ptr)
    if key in _PLANS:
        return _PLANS[key]
    if algorithm == ROUTE:
        made = _route_plan(layer, config, dev)
    else:
        space = space or conv_space(layer, device=dev, algorithm=algorithm)
        if config is None:
            config = default_config(space, algorithm)
        verdict = space.check(config)
        if not verdict:
            raise ConstraintError(f"configuration {config} is not valid for {layer.describe()}",
                                  notes=tuple(str(c) for c in verdict.violated))
        sizes = {**_sizes(layer, algorithm), **config}
        made = ConvPlan(layer, algorithm, config, compile_program(algorithm_program(algorithm), sizes, dev))
    _PLANS[key] = made
    return made


def _route_plan(layer: ConvLayer, config: dict[str, int] | None, device) -> ConvPlan:
    """The layer's program lowered by the automatic route for ``config`` (None: the route's default)."""
    from ..errors import RewriteError, SizeError
    from ..runtime import compile as compile_program

    task = route_task(layer)
    space = route_space(layer, device)
    config = space.default() if config is None else task.complete(config)
    try:
        lowered = space.lower(config)
    except (RewriteError, SizeError) as e:
        raise ConstraintError(f"configuration {config} is not valid for {layer.describe()}: {e.message}") from None
    return ConvPlan(layer, ROUTE, config, compile_program(lowered, task.size_map, device, task.function))


def export_notes(plan: ConvPlan, trial=None) -> str:
    """What a user of exported kernels needs to know: the inputs' layouts and the configuration."""
    L = plan.layer
    timing = f"measured: {trial.time_ms:.3f} ms on {trial.device}\n" if trial is not None else ""
    if plan.algorithm == ROUTE:
        return (f"liftpy's automatic route on liftpy/nn/conv2d.lift for {L.describe()}, batch {L.batch}\n"
                f"configuration: {plan.config}\n{timing}"
                f"inputs (float32 .npy): input = x in NCHW {(L.batch, L.channels, L.height, L.width)}; "
                f"weights = w in OIHW {L.weight_shape}; biases = b ({L.kernels},) (zeros for none)\n"
                f"output: ({L.batch}, {L.kernels}, {L.out_height}, {L.out_width}) NCHW\n"
                f"run: python host.py --input input=x.npy --input weights=w.npy --input biases=b.npy --output y.npy\n")
    weights = WEIGHT_LAYOUTS[ALGORITHMS[plan.algorithm].weights]
    if plan.algorithm in DERIVED:
        return (f"liftpy {plan.algorithm} pipeline (listing 3 rewritten) for {L.describe()}, one image per run\n"
                f"configuration: {plan.config}\n"
                f"inputs (float32 .npy): inputData = one image H x W x C (x[n].transpose(1, 2, 0)); "
                f"kernelsWeights = w.transpose(0, 2, 3, 1); kernelsBiases = b\n"
                f"output: ({L.kernels}, {L.out_height}, {L.out_width})\n")
    return (f"liftpy {plan.algorithm} pipeline for {L.describe()}, batch {L.batch}\n"
            f"configuration: {plan.config}\n{timing}"
            f"inputs (float32 .npy): input = x in NCHW ({L.batch}, {L.channels}, {L.height}, {L.width}); "
            f"weights {weights} from OIHW w; biases = b ({L.kernels},)\n"
            f"output: ({L.batch * L.kernels}, {L.out_height}, {L.out_width}) = NCHW reshaped\n"
            f"run: python host.py --input input=x.npy --input weights=w.npy --input biases=b.npy --output y.npy\n")


def _as_float32_array(name: str, value, dims: int, layout: str) -> np.ndarray:
    try:
        value = np.asarray(value)
    except Exception:
        raise InputError(f"{name} must be a numpy array") from None
    if value.ndim != dims:
        raise InputError(f"{name} must have {dims} dimensions ({layout}), got shape {value.shape}")
    if value.dtype != np.float32:
        raise InputError(f"{name} has dtype {value.dtype}; liftpy computes in float32: pass {name}.astype(np.float32)")
    return value


def _check_weights(w, b):
    w = _as_float32_array("w", w, 4, "OIHW")
    if b is not None:
        b = _as_float32_array("b", b, 1, "one bias per kernel")
        if b.shape != (w.shape[0],):
            raise InputError(f"b must have shape ({w.shape[0]},) (one bias per kernel), got {b.shape}")
    return w, b


def _check_input(x, w, groups: int = 1):
    x = _as_float32_array("x", x, 4, "NCHW")
    if w.shape[1] * groups != x.shape[1]:
        per_group = f" ({w.shape[1]} in each of {groups} groups)" if groups != 1 else ""
        raise InputError(f"the weights expect {w.shape[1] * groups} input channels{per_group}, the input has "
                         f"{x.shape[1]} (x is {x.shape} NCHW, w is {w.shape} OIHW)")
    return x


@dataclass(frozen=True)
class LayerCall:
    """What one call of a prepared layer cost: the whole call as its caller paid it (numpy in, numpy out) and,
    beside it, the kernels' profiling events."""

    call_ms: float
    kernel_ms: float
    stage_ms: dict[str, float]
    algorithm: str
    config: dict[str, int]
    max_error: float | None  # in units of the tolerance, on the checked first call


class Conv2d:
    """A convolution layer prepared once and called many times, as a network uses one (PyTorch's conventions):
    ``layer = Conv2d(w, b, stride=1, padding=1)``, then ``y = layer(x)`` for NCHW float32 ``x``.

    For each input shape it meets (or ``input_shape`` given here, to do it now) it compiles the pipeline once,
    rearranges the weights for it and uploads them once, and keeps its device buffers; a call only passes the
    images in and the output out -- without copying either on a device that shares the host's memory. The
    first call of each shape (its output buffers filled with NaN) is checked against the float64 reference. ``last_run`` tells what the last call
    cost. Without ``config``: the tuning database's best configuration for the layer (``db``), else the
    default rule (see :func:`plan`)."""

    def __init__(self, weights, bias=None, stride=1, padding=0, dilation=1, groups=1, *,
                 config: Mapping[str, int] | None = None, device=None, algorithm: str | None = None, db=None,
                 input_shape=None):
        w, b = _check_weights(weights, bias)
        self.weight = np.array(w, dtype=np.float32)  # the layer's own copy: the caller may reuse its arrays
        self.bias = None if b is None else np.array(b, dtype=np.float32)
        self.stride = _pair(stride, "stride")
        self.padding = normalize_padding(padding)
        self.dilation = _pair(dilation, "dilation")
        self.groups = _groups(groups)
        self.config = _check_config(config)
        self.device, self.algorithm, self.db = device, algorithm, db
        self.last_run: LayerCall | None = None
        self._bound: dict[tuple[int, ...], BoundConv] = {}
        if input_shape is not None:
            shape = tuple(input_shape)
            self._bind(shape if len(shape) == 4 else (1, *shape))

    def _bind(self, shape: tuple[int, ...]) -> BoundConv:
        kernels, _, kh, kw = self.weight.shape
        layer = make_layer(shape[1:], (kernels, kh, kw), self.stride, self.padding, batch=shape[0],
                           dilation=self.dilation, groups=self.groups)
        bound = plan(layer, self.config, self.device, self.algorithm, db=self.db).bind(self.weight, self.bias)
        self._bound[shape] = bound
        return bound

    @property
    def plans(self) -> list[ConvPlan]:
        """The compiled plan of every input shape met so far."""
        return [bound.plan for bound in self._bound.values()]

    def __call__(self, x) -> np.ndarray:
        start = time.perf_counter()
        x = _check_input(x, self.weight, self.groups)
        bound = self._bound.get(x.shape) or self._bind(x.shape)
        result = bound.run(x, check=not bound.checked, weights=(self.weight, self.bias))
        self.last_run = LayerCall((time.perf_counter() - start) * 1e3, result.kernel_ms, result.stage_ms,
                                  bound.plan.algorithm, dict(bound.plan.config), result.max_error)
        return result.output

    def __repr__(self) -> str:
        kernels, channels, kh, kw = self.weight.shape
        return (f"Conv2d({channels * self.groups}, {kernels}, kernel_size=({kh}, {kw}), stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, groups={self.groups}, "
                f"bias={self.bias is not None})")


def _check_config(config) -> dict[str, int] | None:
    """A configuration as the user gave it: a mapping from parameter names to integers."""
    if config is None:
        return None
    if not isinstance(config, Mapping):
        raise InputError(f"config must be a mapping from parameter names to integers, such as {{'σ': 4, 'κ': 8, "
                         f"'v': 8}}, got {config!r}")
    checked = {}
    for name, value in config.items():
        if not isinstance(name, str):
            raise InputError(f"config: parameter names are strings, got {name!r}")
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise InputError(f"config: {name} must be an integer, got {value!r}")
        checked[name] = int(value)
    return checked


def conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1, config: Mapping[str, int] | None = None,
           device=None, algorithm: str | None = None, db=None) -> np.ndarray:
    """``torch.nn.functional.conv2d`` for numpy arrays: x NCHW float32, w OIHW (K x C/groups x kh x kw), b
    optional; stride and dilation an int or a pair; padding an int, (h, w) or (top, bottom, left, right);
    groups dividing C and K. Returns NCHW float32. Without ``config``, the best configuration in the tuning
    database (``db``, default $LIFTPY_TUNING_DB or ~/.cache/liftpy/tuning.sqlite) for this layer and device,
    else the automatic route's default.

    A convenience for one call: the compiled program is cached, but the weights are uploaded (and relaid) at
    every call. A network calling a layer repeatedly should prepare it once with :class:`Conv2d`."""
    w, b = _check_weights(w, b)
    x = _check_input(x, w, _groups(groups))
    layer = make_layer(x.shape[1:], (w.shape[0], w.shape[2], w.shape[3]), stride, padding, batch=x.shape[0],
                       dilation=dilation, groups=groups)
    return plan(layer, config, device, algorithm, db=db).run(x, w, b).output  # checked on the plan's first run


__all__ = ["Conv2d", "LayerCall", "conv2d", "conv_space", "plan", "default_config", "ConvPlan", "ConvResult", "ALGORITHMS", "make_layer",
           "normalize_padding", "ROUTE", "route_task", "route_space", "best_trial"]

"""Convolution layers with PyTorch's ``conv2d`` semantics, compiled by liftpy and run through PyOpenCL.

A layer is the convolution written once at the high level (``liftpy/nn/conv2d.lift``: stride, padding,
dilation, groups, depthwise included) compiled through the automatic route: no low-level program and no
strategy is written for it. A 3x3 layer of stride 1 has a second program, Winograd's F(2x2, 3x3)
(:mod:`liftpy.nn.winograd`). Each program is a tuning task (:func:`layer_tasks`); the layer runs the fastest
the tuning database knows (:func:`best_in_database`, asking :meth:`liftpy.tuning.TuningDB.best`), else the
direct program's route default. The weights are given as PyTorch has them (OIHW); a layout change the chosen
program wants is a kernel that reads only the weights, run once when a layer is prepared. A plan's first run
is checked against a float64 numpy reference.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ..errors import ConstraintError, InputError, LiftError
from ..runtime import KernelTimes, TimedByKernels
from ..tuning import Best, ProgramTask, TuningDB, default_db_path, tune_groups
from ..tuning.db import chosen
from . import winograd
from .layers import ConvLayer, layer as named_layer
from .reference import conv2d_compare, im2col_bytes
from .winograd import winograd_task

#: the layer's algorithms: conv2d.lift's direct sum, and Winograd's F(2x2, 3x3) where it applies; AUTO: each
#: that applies, the faster chosen
DIRECT, WINOGRAD, AUTO = "direct", "winograd", "auto"


def route_task(layer: ConvLayer) -> ProgramTask:
    """The layer as a program to tune: conv2d.lift's ``conv2d`` at the layer's sizes, its weights and biases
    constant (a layer without a bias computes with zeros: one tuning serves both)."""
    path = str(resources.files("liftpy.nn").joinpath("conv2d.lift"))
    sizes = dict(N=layer.batch, C=layer.channels, H=layer.height, W=layer.width, K=layer.kernels,
                 groups=layer.groups, kernelHeight=layer.kernel_height, kernelWidth=layer.kernel_width,
                 padSize=layer.padding, stride=layer.stride, dilation=layer.dilation)
    return ProgramTask(path, tuple(sorted(sizes.items())), "conv2d", ("weights", "biases"))


def layer_tasks(layer: ConvLayer, algorithm: str = AUTO) -> list[tuple[str, ProgramTask]]:
    """The layer's programs to tune, each with its algorithm's name: with AUTO the direct program
    (:func:`route_task`), then Winograd's where it applies; with DIRECT or WINOGRAD that one (Winograd's refused
    where it does not apply)."""
    _check_algorithm(layer, algorithm, (AUTO, DIRECT, WINOGRAD))
    tasks = [(DIRECT, route_task(layer))] + ([(WINOGRAD, winograd_task(layer))] if winograd.applies(layer) else [])
    return [(name, task) for name, task in tasks if algorithm in (AUTO, name)]


def _check_algorithm(layer: ConvLayer, algorithm: str, allowed: Sequence[str]) -> None:
    if algorithm not in allowed or (algorithm == WINOGRAD and not winograd.applies(layer)):
        runs = [a for a in allowed if a != WINOGRAD or winograd.applies(layer)]
        raise InputError(f"algorithm {algorithm!r}: {layer.describe()} runs {' or '.join(map(repr, runs))}"
                         + ("" if winograd.applies(layer) else
                            f" ({WINOGRAD!r} computes 3x3 convolutions of stride 1, dilation 1, one group)"))


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
def conv_space(layer: ConvLayer | str | None = None, *, input=None, kernels=None, stride=1, padding=0, batch=1,
               dilation=1, groups=1, device=None):
    """The automatic route's space of a layer (its :class:`~liftpy.rewrite.route.RouteSpace` on the live device):
    ``conv_space("vgg16.7")`` or ``conv_space(input=(256, 28, 28), kernels=(512, 3, 3), stride=1, padding=1)``."""
    from ..runtime import get_device

    if isinstance(layer, str):
        layer = named_layer(layer)
    if layer is None:
        if input is None or kernels is None:
            raise InputError("give a layer name, or input=(C, H, W) and kernels=(K, kh, kw)")
        layer = make_layer(input, kernels, stride, padding, batch, dilation=dilation, groups=groups)
    return route_space(layer, get_device(device))


# ------------------------------------------------------------------------------------------------ plans
@dataclass(frozen=True)
class ConvResult(TimedByKernels):
    output: np.ndarray
    times: KernelTimes  # the kernels' profiling events, read when asked
    max_error: float | None  # against the reference, in units of the tolerance (conv2d_error), when checked

    def gflops(self, layer: ConvLayer) -> float:
        return layer.flops / (self.kernel_ms * 1e6)


@dataclass
class ConvPlan:
    """A layer compiled with one configuration of the automatic route for one device: run it, time it, measure
    its memory."""

    layer: ConvLayer
    config: dict
    executable: object
    checked: bool = field(default=False)
    #: DIRECT (conv2d.lift; ``config`` the route's choices) or WINOGRAD (conv2d_winograd.lift; ``config`` each
    #: stage's choices by the stage's name)
    algorithm: str = DIRECT

    @property
    def memory_bytes(self) -> int:
        """Every global buffer the program allocates: input, weights, biases, intermediates and output."""
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
        """The program's fixed inputs as PyTorch has them -- the program relays the weights itself, once, where
        its kernels want another layout -- and the biases (zeros when there are none)."""
        bias = np.zeros(self.layer.kernels, np.float32) if b is None else np.ascontiguousarray(b, dtype=np.float32)
        extra = winograd.transforms() if self.algorithm == WINOGRAD else {}
        return {"weights": np.ascontiguousarray(w, dtype=np.float32), "biases": bias, **extra}

    def prepare(self, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> dict[str, np.ndarray]:
        """Every input of the program, as its kernels read them (for exported kernels and host scripts)."""
        return {"input": np.ascontiguousarray(x, dtype=np.float32), **self.constants(w, b)}

    def bind(self, w: np.ndarray, b: np.ndarray | None) -> "BoundConv":
        """The plan with its weights uploaded (and relaid) once, ready for repeated calls on images."""
        return BoundConv(self, self.executable.prepare(self.constants(w, b)))

    def run(self, x, w, b=None, repeat: int = 1, warmup: int = 0, check: bool | None = None) -> ConvResult:
        """Run the program once on fresh device buffers. The first run of a plan (or any, with ``check``) is
        checked: its output and intermediate buffers filled with NaN first, its result compared with the
        float64 reference (:func:`~liftpy.nn.reference.conv2d_compare`: NaN and infinity compared by kind, numbers
        at the tolerance of :func:`conv2d_tolerance`); a wrong result raises."""
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
        result = self.program.run({"input": x}, repeat=repeat, warmup=warmup, poison=poison)
        output = result.output.reshape(L.batch, L.kernels, L.out_height, L.out_width)
        error = None
        if checking:
            w, b = weights
            # Winograd's transforms spread a non-finite input over their whole block of outputs
            block = (len(winograd.OUTPUT_1D),) * 2 if plan.algorithm == WINOGRAD else (1, 1)
            compared = conv2d_compare(output, x, np.asarray(w), b, L.stride, L.padding, L.dilation, L.groups, block)
            error = compared.error
            if not error <= 1:
                found = compared.mismatch or f"its largest error is {error:.3g} times the float32 tolerance"
                raise LiftError(f"the program generated for {L.describe()} with {plan.config} differs from the "
                                f"reference: {found}")
            plan.checked = self.checked = True
        return ConvResult(output, result.times, error)


#: how many compiled plans are kept (each holds its kernels; a Conv2d's binding of one, its device buffers): the
#: least recently used is dropped when one more is made, so a network meeting many input shapes stays bounded
PLAN_CACHE_SIZE = 16

_PLANS: OrderedDict[tuple, ConvPlan] = OrderedDict()  # least recently used first


def set_plan_cache_size(size: int) -> None:
    """Keep at most ``size`` (at least 1) compiled plans, and as many bindings in each :class:`Conv2d`; the
    least recently used are dropped first (the plans now, a Conv2d's bindings at its next new shape)."""
    global PLAN_CACHE_SIZE
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise InputError(f"the plan cache's size must be a positive integer, got {size!r}")
    PLAN_CACHE_SIZE = int(size)
    _bounded(_PLANS)


def _bounded(cache: OrderedDict) -> OrderedDict:
    """``cache`` with its least recently used entries dropped down to PLAN_CACHE_SIZE."""
    while len(cache) > PLAN_CACHE_SIZE:
        cache.popitem(last=False)
    return cache


def best_in_database(database: TuningDB, layer: ConvLayer, device: str | None) -> Best | None:
    """The best the database holds among the layer's programs (:func:`layer_tasks`) that the layer runs
    (:func:`~liftpy.tuning.db.chosen`), its algorithm in ``name``; None if it has none. Read from the trials:
    nothing is lowered."""
    found = [dataclasses.replace(best, name=algorithm) for algorithm, task in layer_tasks(layer)
             if (best := database.best(task, device)) is not None]
    return chosen(found)


def best_known(layer: ConvLayer, device, db=None) -> Best | None:
    """:func:`best_in_database` on a live device, in the tuning database at ``db`` (default: the user's), if it
    exists; the database is only read."""
    from ..runtime import device_info

    path = db or default_db_path()
    if not path or not Path(path).exists():
        return None
    database = TuningDB(path, readonly=True)
    try:
        return best_in_database(database, layer, device_info(device).name)
    finally:
        database.close()


# ------------------------------------------------------------------------------------------------ tuning
def resolve_layer(layer_or_shapes) -> ConvLayer:
    """A layer from a name (``"vgg16.7"``), a ConvLayer, or a dict of make_layer's arguments."""
    if isinstance(layer_or_shapes, ConvLayer):
        return layer_or_shapes
    if isinstance(layer_or_shapes, str):
        return named_layer(layer_or_shapes)
    return make_layer(**layer_or_shapes)


def tune_layer(layer_or_shapes, trials: int = 100, db="tuning.sqlite", device=None, seed: int = 0,
               algorithm: str = AUTO, **options) -> Best:
    """Tune a layer (:func:`resolve_layer`'s argument): its programs (:func:`layer_tasks`; ``algorithm`` AUTO
    for all, DIRECT or WINOGRAD for one), ``trials`` for each, with one budget (:func:`tune_layers`). Returns the
    faster; :class:`Conv2d` and :func:`conv2d` then find it in the database."""
    return tune_layers([layer_or_shapes], trials, db, device, seed, algorithm, **options)[0]


def tune_layers(layers: Sequence, trials: int = 100, db="tuning.sqlite", device=None, seed: int = 0,
                algorithm: str = AUTO, **options) -> list[Best]:
    """Tune a network's layers with one budget -- ``trials`` per layer and program -- which the task scheduler
    gives where the network's time gains the most (:func:`liftpy.tuning.tune_groups`; ``options``:
    :class:`liftpy.tuning.Tuner`'s). Identical layers are one task, weighted by how often they occur. Each
    layer's best, its algorithm in ``name``; with AUTO, a program after the direct one (which computes every
    layer) that gets no correct trial is left out, the reason said on stderr."""
    resolved = [resolve_layer(layer) for layer in layers]
    distinct: dict[tuple, list] = {}
    for layer in resolved:
        tasks = layer_tasks(layer, algorithm)
        distinct.setdefault(tuple(task for _, task in tasks), [tasks, 0])[1] += 1
    groups = [tasks for tasks, _ in distinct.values()]
    budget = trials * sum(len(tasks) for tasks in groups)
    bests = tune_groups(groups, budget, db, device, seed, weights=[count for _, count in distinct.values()],
                        **options)
    found = dict(zip(distinct, bests))
    return [found[tuple(task for _, task in layer_tasks(layer, algorithm))] for layer in resolved]


def plan(layer: ConvLayer, config: Mapping | None = None, device=None, db=None, algorithm: str = DIRECT) -> ConvPlan:
    """Compile a layer through the automatic route for a configuration of the direct program's space (checked
    against it), or with ``algorithm`` WINOGRAD each of Winograd's stages' configurations by the stage's name.
    Without a configuration: the fastest the tuning database knows for this layer and device (the direct
    program's or Winograd's, :func:`best_in_database`), else the direct program at its device's cost model's guess
    (:func:`~liftpy.tuning.guess.best_guess`, the model trained on that database's trials of the device)."""
    from ..runtime import get_device
    from ..tuning.db import config_key

    dev = get_device(device)
    _check_algorithm(layer, algorithm, (DIRECT, WINOGRAD))
    _check_fits(layer, dev)
    if algorithm == DIRECT:
        config = _check_config(config)
    elif config is None:
        raise InputError("a Winograd plan needs its stages' configurations")
    if config is None:
        known = best_known(layer, dev, db)
        if known is not None:
            algorithm, config = known.name, known.config
    if algorithm == DIRECT:
        config = _guess(layer, dev, db) if config is None else route_task(layer).complete(config)
    chosen = config_key(config) if algorithm == DIRECT else tuple((s, config_key(c)) for s, c in sorted(config.items()))
    key = (layer, algorithm, chosen, dev.int_ptr)
    if key in _PLANS:
        _PLANS.move_to_end(key)
    else:
        _PLANS[key] = _route_plan(layer, config, dev) if algorithm == DIRECT else _winograd_plan(layer, config, dev)
        _bounded(_PLANS)
    return _PLANS[key]


def _guess(layer: ConvLayer, device, db=None) -> dict:
    """The direct program's configuration the device's cost model guesses for an untuned layer, trained on the
    tuning database at ``db`` (default: the user's) where it exists."""
    from ..runtime import device_info
    from ..tuning.guess import best_guess

    space = route_space(layer, device)
    return best_guess(route_task(layer), device_info(device), db or default_db_path(), space=space)


def _check_fits(layer: ConvLayer, device) -> None:
    """Refuse, naming it, a layer's array -- its images, its weights, its output -- larger than one buffer the
    device allocates: every program of the layer holds each whole, so no configuration runs it (the route would
    only find that none is valid)."""
    L, limit = layer, device.max_mem_alloc_size
    arrays = {"input": (L.batch, L.channels, L.height, L.width), "weights": L.weight_shape,
              "output": (L.batch, L.kernels, L.out_height, L.out_width)}
    for name, shape in arrays.items():
        size = 4 * int(np.prod(shape, dtype=object))
        if size > limit:
            raise ConstraintError(f"{L.describe()}, batch {L.batch}: its {name} ({'x'.join(map(str, shape))} floats, "
                                  f"{size / 2**20:,.0f} MiB) is larger than the largest buffer the device allocates "
                                  f"({limit / 2**20:,.0f} MiB on {device.name.strip()})")


def _winograd_plan(layer: ConvLayer, config: Mapping[str, Mapping[str, int]], device) -> ConvPlan:
    """conv2d_winograd.lift at the layer's sizes, each stage lowered by the route for its configuration and
    the stages joined (:func:`liftpy.rewrite.stages.join_stages`)."""
    from ..rewrite.stages import join_stages
    from ..runtime import compile as compile_program

    from ..errors import RewriteError, SizeError

    task = winograd_task(layer)
    stages = task.stages()
    if set(config) != {stage.stage for stage in stages}:
        raise InputError(f"a Winograd plan takes a configuration for each of its stages, "
                         f"{', '.join(stage.stage for stage in stages)}; got {', '.join(map(str, config)) or 'none'}")
    try:
        lowered = {stage.stage: stage.space(device).lower(stage.complete(dict(config[stage.stage])))
                   for stage in stages}
    except (RewriteError, SizeError) as e:
        raise ConstraintError(f"not valid for {layer.describe()} as Winograd's F(2x2, 3x3): {e.message}") from None
    program = join_stages(task.load(), task.function, lowered)
    return ConvPlan(layer, dict(config), compile_program(program, task.size_map, device, task.function),
                    algorithm=WINOGRAD)


def _route_plan(layer: ConvLayer, config: dict[str, int], device) -> ConvPlan:
    """The layer's program lowered by the automatic route for ``config``."""
    from ..errors import RewriteError, SizeError
    from ..runtime import compile as compile_program

    task = route_task(layer)
    try:
        lowered = route_space(layer, device).lower(config)
    except (RewriteError, SizeError) as e:
        raise ConstraintError(f"not valid for {layer.describe()}: {e.message}") from None
    return ConvPlan(layer, config, compile_program(lowered, task.size_map, device, task.function))


def export_notes(plan: ConvPlan, best: Best | None = None) -> str:
    """What a user of exported kernels needs to know: the inputs' layouts and the configuration."""
    L = plan.layer
    timing = f"measured: {best.time_ms:.3f} ms on {best.device}\n" if best is not None else ""
    program = "conv2d_winograd.lift (Winograd's F(2x2, 3x3))" if plan.algorithm == WINOGRAD else "conv2d.lift"
    transforms = "".join(f" --input {name}={name}.npy" for name in winograd.transforms()) \
        if plan.algorithm == WINOGRAD else ""
    given = "; the transforms: the .npy files beside the kernels" if transforms else ""
    return (f"liftpy's automatic route on liftpy/nn/{program} for {L.describe()}, batch {L.batch}\n"
            f"configuration: {plan.config}\n{timing}"
            f"inputs (float32 .npy): input = x in NCHW {(L.batch, L.channels, L.height, L.width)}; "
            f"weights = w in OIHW {L.weight_shape}; biases = b ({L.kernels},) (zeros for none){given}\n"
            f"output: ({L.batch}, {L.kernels}, {L.out_height}, {L.out_width}) NCHW\n"
            f"run: python host.py --input input=x.npy --input weights=w.npy --input biases=b.npy{transforms} "
            f"--output y.npy\n")


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
class LayerCall(TimedByKernels):
    """What one call of a prepared layer cost: the whole call as its caller paid it (numpy in, numpy out) and,
    beside it, the kernels' profiling events (read when asked; not the output, which stays the caller's)."""

    call_ms: float
    times: KernelTimes
    config: dict[str, int]
    max_error: float | None  # in units of the tolerance, on the checked first call


class Conv2d:
    """A convolution layer prepared once and called many times, as a network uses one (PyTorch's conventions):
    ``layer = Conv2d(w, b, stride=1, padding=1)``, then ``y = layer(x)`` for NCHW float32 ``x``.

    For each input shape it meets (or ``input_shape`` given here, to do it now) it compiles the layer's
    program once, uploads the weights once (the program's kernels that relay them run then), and keeps its
    device buffers -- for the PLAN_CACHE_SIZE shapes last used (16, :func:`set_plan_cache_size`); a call only
    passes the images in and the output out -- without copying either on a device that shares the host's memory.
    The first call of each shape (its output buffers filled with NaN) is checked against the float64 reference
    (NaN and infinity in the data compared by kind). ``last_run`` tells what the last call cost. Without
    ``config``: the tuning database's best configuration for the layer (``db``), else the cost model's guess (see
    :func:`plan`)."""

    def __init__(self, weights, bias=None, stride=1, padding=0, dilation=1, groups=1, *,
                 config: Mapping[str, int] | None = None, device=None, db=None,
                 input_shape=None):
        w, b = _check_weights(weights, bias)
        self.weight = np.array(w, dtype=np.float32)  # the layer's own copy: the caller may reuse its arrays
        self.bias = None if b is None else np.array(b, dtype=np.float32)
        self.stride = _pair(stride, "stride")
        self.padding = normalize_padding(padding)
        self.dilation = _pair(dilation, "dilation")
        self.groups = _groups(groups)
        self.config = _check_config(config)
        self.device, self.db = device, db
        self.last_run: LayerCall | None = None
        self._bound: OrderedDict[tuple[int, ...], BoundConv] = OrderedDict()  # least recently used first
        if input_shape is not None:
            shape = tuple(input_shape)
            self._bind(shape if len(shape) == 4 else (1, *shape))

    def _bind(self, shape: tuple[int, ...]) -> BoundConv:
        kernels, _, kh, kw = self.weight.shape
        layer = make_layer(shape[1:], (kernels, kh, kw), self.stride, self.padding, batch=shape[0],
                           dilation=self.dilation, groups=self.groups)
        bound = plan(layer, self.config, self.device, db=self.db).bind(self.weight, self.bias)
        self._bound[shape] = bound
        _bounded(self._bound)
        return bound

    @property
    def plans(self) -> list[ConvPlan]:
        """The compiled plan of each input shape kept (the PLAN_CACHE_SIZE most recently used), oldest first."""
        return [bound.plan for bound in self._bound.values()]

    def __call__(self, x) -> np.ndarray:
        start = time.perf_counter()
        x = _check_input(x, self.weight, self.groups)
        bound = self._bound.get(x.shape)
        if bound is None:
            bound = self._bind(x.shape)
        else:
            self._bound.move_to_end(x.shape)
        result = bound.run(x, check=not bound.checked, weights=(self.weight, self.bias))
        self.last_run = LayerCall((time.perf_counter() - start) * 1e3, result.times, dict(bound.plan.config),
                                  result.max_error)
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
           device=None, db=None) -> np.ndarray:
    """``torch.nn.functional.conv2d`` for numpy arrays: x NCHW float32, w OIHW (K x C/groups x kh x kw), b
    optional; stride and dilation an int or a pair; padding an int, (h, w) or (top, bottom, left, right);
    groups dividing C and K. Returns NCHW float32. Without ``config``, the best configuration in the tuning
    database (``db``, default $LIFTPY_TUNING_DB or ~/.cache/liftpy/tuning.sqlite) for this layer and device,
    else the device's cost model's guess.

    A convenience for one call: the compiled program is cached, but the weights are uploaded (and relaid) at
    every call. A network calling a layer repeatedly should prepare it once with :class:`Conv2d`."""
    w, b = _check_weights(w, b)
    x = _check_input(x, w, _groups(groups))
    layer = make_layer(x.shape[1:], (w.shape[0], w.shape[2], w.shape[3]), stride, padding, batch=x.shape[0],
                       dilation=dilation, groups=groups)
    return plan(layer, config, device, db=db).run(x, w, b).output  # checked on the plan's first run


__all__ = ["Conv2d", "LayerCall", "conv2d", "conv_space", "plan", "set_plan_cache_size", "ConvPlan", "ConvResult",
           "make_layer", "normalize_padding", "route_task", "route_space", "layer_tasks", "best_in_database",
           "best_known", "resolve_layer", "tune_layer", "tune_layers", "DIRECT", "WINOGRAD", "AUTO"]

"""Networks from ONNX files: ``liftpy.onnx.load(path)`` gives a :class:`liftpy.nn.network.Network`, each
operator a program of the language (:mod:`liftpy.nn.operators`), weights constant inputs.

The ``onnx`` package (the extra ``onnx``: ``pip install -e .[onnx]``) reads the file and infers the shapes.
Then, in one pass over the nodes in their order: a batch normalisation folds into the convolution before it; a
ReLU or a Clip joins the convolution, fully connected layer, sum or batch normalisation before it as its clamp;
a residual Add joins the convolution that computes one of its operands (the other computed before it). Each
fusion needs the producer's result to have no other reader; what could not be fused is said in the network's
``notes``. An operator or attribute liftpy does not support is refused here, naming the node, before anything
runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

import numpy as np

from .errors import InputError
from .nn import operators as ops
from .nn.network import Network

#: the operators read (views and identities included)
SUPPORTED = ("Conv", "BatchNormalization", "Relu", "Clip", "Add", "MaxPool", "AveragePool", "GlobalAveragePool",
             "Gemm", "MatMul", "Softmax", "Flatten", "Reshape", "Squeeze", "Unsqueeze", "Concat", "Dropout", "Identity",
             "Constant")


def _onnx():
    try:
        import onnx
    except ImportError:
        raise InputError("reading ONNX files needs the onnx package: pip install -e .[onnx]") from None
    return onnx


#: whether a residual Add joins the convolution computing one of its operands by default (conv2dAddClip, or
#: Winograd's conv2dWinogradAddClip: each sum starts from its residual element, so the route blocks it as a
#: convolution's): one kernel, no intermediate in global memory, a launch fewer; about as fast as a convolution
#: and a separate sum on a CPU (benchmarks/results/residual-fusion-resnet18-37da0e5-xeon.txt)
FUSE_RESIDUAL = True


def load(path, batch: int | None = None, fuse_residual: bool = FUSE_RESIDUAL) -> Network:
    """The network in the ONNX file at ``path``, at its inputs' shapes (``batch``: the first dimension of every
    input, where the file leaves it open or to change it); ``fuse_residual``: a residual Add joins the
    convolution computing one of its operands (see :data:`FUSE_RESIDUAL`)."""
    onnx = _onnx()
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    try:
        model = onnx.load(str(path))
    except Exception as e:  # protobuf's DecodeError, and anything else a file that is not ONNX raises
        said = str(e).splitlines()[0] if str(e) else "unreadable"
        raise InputError(f"{path}: not an ONNX model ({type(e).__name__}: {said})") from None
    if not model.graph.node:
        raise InputError(f"{path}: not an ONNX model (no graph nodes)")
    return from_model(model, batch, name=path.stem, fuse_residual=fuse_residual)


def from_model(model, batch: int | None = None, name: str = "network", fuse_residual: bool = FUSE_RESIDUAL) -> Network:
    """The network of an ``onnx.ModelProto`` (see :func:`load`)."""
    onnx = _onnx()
    graph = model.graph
    constants = {t.name: onnx.numpy_helper.to_array(t) for t in graph.initializer}
    inputs = [v for v in graph.input if v.name not in constants]
    if batch is not None:
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise InputError(f"batch must be a positive integer, got {batch!r}")
        model = _with_batch(model, inputs, batch)
        graph = model.graph
        inputs = [v for v in graph.input if v.name not in constants]
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    except Exception as e:
        raise InputError(f"{name}: ONNX's shape inference failed ({str(e).splitlines()[0]})") from None
    shapes: dict[str, tuple[int, ...]] = {}
    for value in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
        shape = _static_shape(value)
        if shape is not None:
            shapes[value.name] = shape
    for value in inputs:
        if value.name not in shapes:
            raise InputError(f"{name}: input {value.name!r} has no fixed shape: give the batch (load(..., batch=N), "
                             "liftpy onnx --batch N)")
        if value.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            raise InputError(f"{name}: input {value.name!r} is not float32; liftpy computes in float32")
    outputs = tuple(v.name for v in graph.output)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    reader = _Reader(name, shapes, constants, graph.node, outputs, fuse_residual, opset)
    for index, node in enumerate(graph.node):
        reader.node(node, index)
    for output in outputs:
        if output not in reader.made and output not in shapes:
            raise InputError(f"{name}: output {output!r} is not computed by a node liftpy reads")
    return reader.network({v.name: shapes[v.name] for v in inputs}, outputs)


def _with_batch(model, inputs, batch: int):
    """A copy of ``model`` whose inputs' first dimension is ``batch``, the other shapes inferred anew."""
    copy = type(model)()
    copy.CopyFrom(model)
    names = {v.name for v in inputs}
    for value in copy.graph.input:
        if value.name in names and value.type.tensor_type.shape.dim:
            dim = value.type.tensor_type.shape.dim[0]
            dim.ClearField("dim_param")
            dim.dim_value = batch
    del copy.graph.value_info[:]
    for value in copy.graph.output:
        value.type.tensor_type.ClearField("shape")
    return copy


def _static_shape(value) -> tuple[int, ...] | None:
    tensor = value.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    dims = []
    for dim in tensor.shape.dim:
        if not dim.HasField("dim_value"):
            return None
        dims.append(int(dim.dim_value))
    return tuple(dims)


# ------------------------------------------------------------------------------------------------ the reader
@dataclass
class _Pending:
    """A step being made: its operator's arguments, which a later node reading its result alone may still join
    (its clamp, a residual, a folded batch normalisation)."""

    kind: str  # "conv", "gemm", "add", "scale_shift", "clip", "step" (complete)
    names: list[str]
    ops: list[str]
    output: str
    args: dict = field(default_factory=dict)
    clamp: tuple[float, float] = ops.UNBOUNDED
    order: int = 0


class _Reader:
    def __init__(self, name: str, shapes: dict, constants: dict, nodes, outputs: tuple[str, ...],
                 fuse_residual: bool, opset: int):
        self.name = name
        self.opset = opset
        self.fuse_residual = fuse_residual
        self.graph_outputs = set(outputs)
        #: how many nodes read each tensor, over the whole graph: a fusion needs its producer's result read once
        self.readers: dict[str, int] = {}
        for node in nodes:
            for tensor in node.input:
                if tensor:
                    self.readers[tensor] = self.readers.get(tensor, 0) + 1
        self.shapes = dict(shapes)
        self.constants = dict(constants)
        self.pending: dict[str, _Pending] = {}  # by output tensor
        self.views: dict[str, str] = {}
        self.made: set[str] = set()
        self.notes: list[str] = []

    # ---------------------------------------------------------------------------------------- helpers
    def fail(self, node, reason: str):
        raise InputError(f"node {_label(node)!r} ({node.op_type}): {reason}")

    def shape(self, node, tensor: str) -> tuple[int, ...]:
        if tensor not in self.shapes:
            self.fail(node, f"the shape of {tensor!r} is not known (ONNX's shape inference left it open)")
        return self.shapes[tensor]

    def constant(self, node, tensor: str, what: str) -> np.ndarray:
        if tensor not in self.constants:
            self.fail(node, f"its {what} ({tensor!r}) is computed by the network; liftpy needs it constant "
                      "(an initializer or a Constant node)")
        return self.constants[tensor]

    def activation(self, node, tensor: str) -> str:
        if tensor in self.constants:
            self.fail(node, f"its input {tensor!r} is a constant; liftpy computes on activations here")
        if tensor not in self.made and tensor not in self.shapes:
            self.fail(node, f"reads {tensor!r}, which no node before it computes")
        return tensor

    def activation_of_rank(self, node, rank: int, what: str) -> tuple[str, tuple[int, ...]]:
        """The node's first input (an activation) and its shape, refused unless it has ``rank`` dimensions:
        ``what`` says what the operator takes."""
        x = self.activation(node, node.input[0])
        shape = self.shape(node, x)
        if len(shape) != rank:
            self.fail(node, f"{what} (its input is {len(shape)}-D)")
        return x, shape

    def sole_reader(self, tensor: str) -> _Pending | None:
        """The open step computing ``tensor`` if this node is its only reader and no output is it."""
        found = self.pending.get(tensor)
        if found is None or self.readers.get(tensor, 0) != 1 or tensor in self.graph_outputs:
            return None
        return found

    # ---------------------------------------------------------------------------------------- nodes
    def node(self, node, index: int) -> None:
        op = node.op_type
        if node.domain not in ("", "ai.onnx"):
            self.fail(node, f"operators of the domain {node.domain!r} are not supported")
        if op not in SUPPORTED:
            self.fail(node, f"the operator is not supported (liftpy reads {', '.join(SUPPORTED)})")
        getattr(self, "_" + op.lower())(node, index)

    def _constant(self, node, index):
        onnx = _onnx()
        attrs = {a.name: a for a in node.attribute}
        if "value" not in attrs:
            self.fail(node, f"only a tensor value is supported (it has {', '.join(attrs)})")
        self.constants[node.output[0]] = onnx.numpy_helper.to_array(attrs["value"].t)

    def _conv(self, node, index):
        a = _attributes(node)
        x, shape = self.activation_of_rank(node, 4, "only 2-D convolutions of NCHW tensors are supported")
        w = self.constant(node, node.input[1], "weights").astype(np.float32)
        if w.ndim != 4:
            self.fail(node, f"its weights have shape {list(w.shape)}; a 2-D convolution's are K x C/group x kh x kw")
        has_bias = len(node.input) > 2 and node.input[2]
        b = self.constant(node, node.input[2], "bias").astype(np.float32) if has_bias else None
        kh, kw = w.shape[2:]
        if "kernel_shape" in a and tuple(a["kernel_shape"]) != (kh, kw):
            self.fail(node, f"kernel_shape {a['kernel_shape']} differs from the weights' {kh}x{kw}")
        stride = tuple(a.get("strides", (1, 1)))
        dilation = tuple(a.get("dilations", (1, 1)))
        padding = self.padding(node, a, shape, (kh, kw), stride, dilation)
        groups = int(a.get("group", 1))
        if shape[1] != w.shape[1] * groups:
            self.fail(node, f"its weights take {w.shape[1] * groups} channels, its input has {shape[1]}")
        self.open(_Pending("conv", [_label(node)], ["Conv"], node.output[0],
                           dict(x=x, shape=shape, w=w, b=b, stride=stride, padding=padding, dilation=dilation,
                                groups=groups), order=index))

    def padding(self, node, a, shape, kernel, stride, dilation) -> tuple[int, int, int, int]:
        """ONNX's pads (begin..., end...) or auto_pad as (top, bottom, left, right)."""
        auto = a.get("auto_pad", "NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else auto
        if auto in ("NOTSET", "VALID"):
            pads = tuple(a.get("pads", (0, 0, 0, 0))) if auto == "NOTSET" else (0, 0, 0, 0)
            if len(pads) != 4:
                self.fail(node, f"pads {list(pads)}: 2-D operators take four")
            return pads[0], pads[2], pads[1], pads[3]
        if auto not in ("SAME_UPPER", "SAME_LOWER"):
            self.fail(node, f"auto_pad={auto} is not an ONNX value")
        result = []
        for size, k, s, d in zip(shape[2:], kernel, stride, dilation):
            total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
            small, large = total // 2, total - total // 2
            result.append((small, large) if auto == "SAME_UPPER" else (large, small))
        return result[0] + result[1]

    def _batchnormalization(self, node, index):
        a = _attributes(node)
        if a.get("training_mode", 0):
            self.fail(node, "training_mode=1 is not supported (liftpy runs inference)")
        if len(node.output) > 1 and any(node.output[1:]):
            self.fail(node, "its running mean and variance outputs are not supported")
        x, shape = self.activation_of_rank(node, 4, "only NCHW tensors are supported")
        gamma, beta, mean, var = (self.constant(node, t, what).astype(np.float64) for t, what in
                                  zip(node.input[1:5], ("scale", "bias", "mean", "variance")))
        scale = gamma / np.sqrt(var + float(a.get("epsilon", 1e-5)))
        shift = beta - mean * scale
        producer = self.sole_reader(x)
        if producer is not None and producer.kind == "conv" and producer.clamp == ops.UNBOUNDED \
                and "residual" not in producer.args:
            w, b = producer.args["w"], producer.args["b"]
            producer.args["w"] = (w * scale[:, None, None, None]).astype(np.float32)
            producer.args["b"] = ((0 if b is None else b) * scale + shift).astype(np.float32)
            self.merge(producer, node, "BatchNormalization")
            return
        self.notes.append(f"{_label(node)} (BatchNormalization) has no convolution of its own before it: it runs "
                          "as a per-channel scale and shift")
        self.open(_Pending("scale_shift", [_label(node)], ["BatchNormalization"], node.output[0],
                           dict(x=x, shape=shape, scale=scale, shift=shift), order=index))

    def _relu(self, node, index):
        self.clamp(node, index, (0.0, math.inf))

    def _clip(self, node, index):
        a = _attributes(node)
        low, high = a.get("min", -math.inf), a.get("max", math.inf)
        if len(node.input) > 1 and node.input[1]:
            low = float(self.constant(node, node.input[1], "min"))
        if len(node.input) > 2 and node.input[2]:
            high = float(self.constant(node, node.input[2], "max"))
        self.clamp(node, index, (float(low), float(high)))

    def clamp(self, node, index, bounds) -> None:
        x = self.activation(node, node.input[0])
        producer = self.sole_reader(x)
        if producer is not None and producer.kind in ("conv", "gemm", "add", "scale_shift") \
                and producer.clamp == ops.UNBOUNDED:
            producer.clamp = bounds
            self.merge(producer, node, node.op_type)
            return
        self.notes.append(f"{_label(node)} ({node.op_type}) runs on its own: "
                          + ("its input is read elsewhere too" if self.readers.get(x, 0) > 1 else
                             "nothing before it takes a clamp"))
        self.open(_Pending("clip", [_label(node)], [node.op_type], node.output[0],
                           dict(x=x, shape=self.shape(node, x)), clamp=bounds, order=index))

    def _add(self, node, index):
        a_name, b_name = (self.activation(node, t) for t in node.input[:2])
        a_shape, b_shape = self.shape(node, a_name), self.shape(node, b_name)
        if a_shape != b_shape:
            self.fail(node, f"broadcasting {list(a_shape)} with {list(b_shape)} is not supported (liftpy adds "
                      "tensors of one shape)")
        candidates = [(t, other) for t, other in ((a_name, b_name), (b_name, a_name))
                      if (p := self.sole_reader(t)) is not None and p.kind == "conv" and p.clamp == ops.UNBOUNDED
                      and "residual" not in p.args and t != other]
        if candidates and self.fuse_residual:  # the later convolution: the other operand is computed before it
            t, other = max(candidates, key=lambda c: self.pending[c[0]].order)
            producer = self.pending[t]
            producer.args["residual"] = other
            producer.order = index  # runs here now, once the other operand is computed
            self.merge(producer, node, "Add")
            return
        self.notes.append(f"{_label(node)} (Add) runs on its own: " + (
            "fusing residuals is turned off (fuse_residual=False)" if candidates
            else "no convolution computing one of its operands has it as its only reader"))
        self.open(_Pending("add", [_label(node)], ["Add"], node.output[0],
                           dict(a=a_name, b=b_name, shape=a_shape), order=index))

    def _maxpool(self, node, index):
        if len(node.output) > 1 and node.output[1]:
            self.fail(node, "its Indices output is not supported")
        self.pool(node, index, "max")

    def _averagepool(self, node, index):
        self.pool(node, index, "average")

    def pool(self, node, index, kind: str) -> None:
        a = _attributes(node)
        x, shape = self.activation_of_rank(node, 4, "only 2-D pooling of NCHW tensors is supported")
        window = tuple(a["kernel_shape"])
        stride = tuple(a.get("strides", (1, 1)))
        if tuple(a.get("dilations", (1, 1))) != (1, 1):
            self.fail(node, f"dilations {list(a['dilations'])} are not supported")
        padding = self.padding(node, a, shape, window, stride, (1, 1))
        if a.get("ceil_mode", 0):
            padding = self.ceil_padding(node, shape, window, stride, padding, kind)
        if kind == "average" and any(padding) and not a.get("count_include_pad", 0):
            self.fail(node, "count_include_pad=0 with padding is not supported (liftpy divides every window by "
                      "its full size)")
        output = node.output[0]
        maker = ops.max_pool if kind == "max" else ops.avg_pool
        self.close(maker(_label(node), x, shape, output, window, stride, padding), index)

    def ceil_padding(self, node, shape, window, stride, padding, kind):
        """ceil_mode=1 as padding at the bottom and right: the windows ONNX adds start inside the input or its
        top-left padding, and padding with the lowest float leaves their maximum what ONNX computes."""
        top, bottom, left, right = padding
        extra = []
        for size, k, s, before, after in zip(shape[2:], window, stride, (top, left), (bottom, right)):
            span = size + before + after
            count = math.ceil((span - k) / s) + 1
            if (count - 1) * s >= size + before:
                count -= 1
            extra.append(max((count - 1) * s + k - span, 0))
        if any(extra) and kind != "max":
            self.fail(node, "ceil_mode=1 is supported for max pooling only (an average's divisor would change)")
        return top, bottom + extra[0], left, right + extra[1]

    def _globalaveragepool(self, node, index):
        x, shape = self.activation_of_rank(node, 4, "only NCHW tensors are supported")
        self.close(ops.global_avg_pool(_label(node), x, shape, node.output[0]), index)

    def _gemm(self, node, index):
        a = _attributes(node)
        if a.get("transA", 0):
            self.fail(node, "transA=1 is not supported")
        x, shape = self.activation_of_rank(node, 2, "Gemm multiplies matrices")
        b = self.constant(node, node.input[1], "weights").astype(np.float64)
        if b.ndim != 2:
            self.fail(node, f"its weights have shape {list(b.shape)}; Gemm multiplies by a matrix")
        weights = b if a.get("transB", 0) else b.T
        weights = weights * float(a.get("alpha", 1.0))
        bias = None
        if len(node.input) > 2 and node.input[2]:
            c = self.constant(node, node.input[2], "bias").astype(np.float64) * float(a.get("beta", 1.0))
            if c.size not in (1, weights.shape[0]) or (c.ndim == 2 and c.shape[0] != 1):
                self.fail(node, f"a bias of shape {list(c.shape)} is not supported (one per output, or one)")
            bias = np.broadcast_to(c.reshape(-1), (weights.shape[0],))
        self.open_gemm(node, index, x, shape, weights, bias)

    def _matmul(self, node, index):
        x, shape = self.activation_of_rank(node, 2, "liftpy multiplies matrices")
        b = self.constant(node, node.input[1], "second operand").astype(np.float64)
        if b.ndim != 2:
            self.fail(node, f"its second operand has shape {list(b.shape)}; liftpy multiplies by a matrix")
        self.open_gemm(node, index, x, shape, b.T, None)

    def open_gemm(self, node, index, x, shape, weights, bias):
        if weights.shape[1] != shape[1]:
            self.fail(node, f"its weights take {weights.shape[1]} values a row, its input has {shape[1]}")
        self.open(_Pending("gemm", [_label(node)], [node.op_type], node.output[0],
                           dict(x=x, shape=shape, w=weights.astype(np.float32),
                                b=None if bias is None else bias.astype(np.float32)), order=index))

    def _concat(self, node, index):
        a = _attributes(node)
        parts = [self.activation(node, t) for t in node.input]
        shapes = [self.shape(node, t) for t in parts]
        rank = len(shapes[0])
        axis = int(a["axis"]) % rank
        if axis != 1 or rank not in (2, 4):
            self.fail(node, f"only a concatenation of the channels (axis 1 of NCHW or of N x C) is supported, "
                      f"not axis {a['axis']} of a {rank}-D tensor")
        as4 = [s if rank == 4 else (*s, 1, 1) for s in shapes]
        current, shape = parts[0], as4[0]
        for i, (part, part_shape) in enumerate(zip(parts[1:], as4[1:]), start=1):
            if part_shape[0] != shape[0] or part_shape[2:] != shape[2:]:
                self.fail(node, f"its inputs' shapes {[list(s) for s in shapes]} differ beyond the channels")
            last = i == len(parts) - 1
            output = node.output[0] if last else f"{node.output[0]}#{i}"
            step = ops.concat(_label(node), current, shape, part, part_shape, output)
            self.shapes[output] = step.shape if rank == 4 else step.shape[:2]
            if rank == 2:
                step = replace(step, shape=step.shape[:2])
            self.close(step, index)
            current, shape = output, (shape[0], shape[1] + part_shape[1], *shape[2:])

    def _softmax(self, node, index):
        a = _attributes(node)
        x = self.activation(node, node.input[0])
        shape = self.shape(node, x)
        if self.opset < 13:  # the tensor as a matrix: the axes before ``axis`` its rows
            axis = int(a.get("axis", 1)) % len(shape)
        else:
            axis = int(a.get("axis", -1)) % len(shape)
            if axis != len(shape) - 1:
                self.fail(node, f"a softmax along axis {a['axis']} of a {len(shape)}-D tensor is not supported "
                          "(only along the last)")
        rows = int(np.prod(shape[:axis]))
        step = ops.softmax(_label(node), x, (rows, int(np.prod(shape[axis:]))), node.output[0])
        self.close(replace(step, shape=tuple(shape)), index)

    # views: the same memory read in another shape
    def view(self, node, index):
        if node.op_type in ("Identity", "Dropout") and node.input[0] in self.constants:  # a constant's other name
            self.constants[node.output[0]] = self.constants[node.input[0]]
            return
        x = self.activation(node, node.input[0])
        self.views[node.output[0]] = x
        self.shape(node, node.output[0])
        self.made.add(node.output[0])

    _flatten = _reshape = _squeeze = _unsqueeze = _identity = view

    def _dropout(self, node, index):
        if len(node.output) > 1 and node.output[1]:
            self.fail(node, "its mask output is not supported (liftpy runs inference)")
        self.view(node, index)

    # ---------------------------------------------------------------------------------------- steps
    def open(self, pending: _Pending) -> None:
        self.pending[pending.output] = pending
        self.made.add(pending.output)

    def merge(self, producer: _Pending, node, op: str) -> None:
        del self.pending[producer.output]
        producer.names.append(_label(node))
        producer.ops.append(op)
        producer.output = node.output[0]
        self.pending[producer.output] = producer
        self.made.add(producer.output)

    def close(self, step: ops.Step, index: int) -> None:
        """A step nothing joins (a pooling, a concatenation)."""
        self.pending[step.output] = _Pending("step", [step.name], [step.op], step.output, dict(step=step),
                                             order=index)
        self.made.add(step.output)

    def network(self, inputs: Mapping[str, tuple], outputs: tuple[str, ...]) -> Network:
        steps = sorted(self.pending.values(), key=lambda p: p.order)
        made = [self.step(p) for p in steps]
        shapes = dict(self.shapes)
        for step in made:
            shapes.setdefault(step.output, step.shape)
        for view, source in self.views.items():
            if int(np.prod(shapes[view])) != int(np.prod(shapes[self._root(source)])):
                raise InputError(f"{self.name}: {view!r} reshapes {source!r} to a different size")
        return Network(self.name, dict(inputs), outputs, tuple(made), dict(self.views), shapes, tuple(self.notes))

    def _root(self, tensor: str) -> str:
        while tensor in self.views:
            tensor = self.views[tensor]
        return tensor

    def step(self, p: _Pending) -> ops.Step:
        try:
            return self._step(p)
        except InputError as e:  # sizes the operator's program refuses (groups not dividing the kernels...)
            raise InputError(f"node {p.names[0]!r} ({'+'.join(p.ops)}): {e.message}") from None

    def _step(self, p: _Pending) -> ops.Step:
        name, op, a = "+".join(p.names), "+".join(p.ops), p.args
        if p.kind == "step":
            return a["step"]
        if p.kind == "conv":
            return ops.conv(name, op, a["x"], a["shape"], a["w"], a["b"], p.output, a["stride"], a["padding"],
                            a["dilation"], a["groups"], p.clamp, a.get("residual"))
        if p.kind == "gemm":
            return ops.gemm(name, op, a["x"], a["shape"], a["w"], a["b"], p.output, p.clamp)
        if p.kind == "add":
            return ops.add(name, op, a["a"], a["b"], a["shape"], p.output, p.clamp)
        if p.kind == "scale_shift":
            return ops.scale_shift(name, op, a["x"], a["shape"], a["scale"], a["shift"], p.output, p.clamp)
        return ops.clip(name, op, a["x"], a["shape"], p.output, p.clamp)


def _label(node) -> str:
    return node.name or f"{node.op_type}->{node.output[0]}"


def _attributes(node) -> dict:
    onnx = _onnx()
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


__all__ = ["load", "from_model", "SUPPORTED"]

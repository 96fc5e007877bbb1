"""Small ONNX models built with onnx.helper for the tests: the operators and patterns of ResNet, MobileNetV2,
SqueezeNet and VGG at a few channels and pixels (random weights, fixed seed). Nothing is read or fetched."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper


class Builder:
    """A graph being written: ``conv``, ``bn``, ``node`` add nodes; ``model`` closes it."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.initializers = [], []

    def constant(self, name: str, value) -> str:
        self.initializers.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def node(self, op: str, inputs, output: str, name: str | None = None, **attributes) -> str:
        self.nodes.append(helper.make_node(op, list(inputs), [output], name=name or output, **attributes))
        return output

    def conv(self, x: str, out: str, cin: int, cout: int, k: int, stride: int = 1, pad: int = 0, groups: int = 1,
             bias: bool = True, **attributes) -> str:
        w = self.constant(out + ".w", self.rng.standard_normal((cout, cin // groups, k, k)) / np.sqrt(cin // groups * k * k))
        inputs = [x, w] + ([self.constant(out + ".b", self.rng.standard_normal(cout) * 0.1)] if bias else [])
        if "auto_pad" not in attributes:
            attributes["pads"] = [pad] * 4
        return self.node("Conv", inputs, out, kernel_shape=[k, k], strides=[stride, stride], group=groups,
                         **attributes)

    def bn(self, x: str, out: str, c: int) -> str:
        r = self.rng
        parts = [self.constant(f"{out}.{n}", v) for n, v in
                 (("scale", r.uniform(0.5, 1.5, c)), ("bias", r.standard_normal(c) * 0.1),
                  ("mean", r.standard_normal(c) * 0.1), ("var", r.uniform(0.5, 1.5, c)))]
        return self.node("BatchNormalization", [x] + parts, out, epsilon=1e-5)

    def model(self, inputs: dict[str, list], outputs: dict[str, list], opset: int = 13):
        graph = helper.make_graph(self.nodes, "test", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                                                        for n, s in inputs.items()],
                                  [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
                                  self.initializers)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def residual_net(batch=1, size: int = 12):
    """ResNet's pattern: conv-BN-ReLU, max pooling (padded), a basic block whose Add reads a convolution and the
    block's input, then ReLU; a downsampling block (two convolutions into one Add); global average pooling,
    flatten, a fully connected layer."""
    b = Builder(0)
    x = b.conv("x", "c1", 3, 8, 3, pad=1)
    x = b.node("Relu", [b.bn(x, "bn1", 8)], "r1")
    p = b.node("MaxPool", [x], "p1", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y = b.node("Relu", [b.bn(b.conv(p, "c2", 8, 8, 3, pad=1), "bn2", 8)], "r2")
    y = b.bn(b.conv(y, "c3", 8, 8, 3, pad=1), "bn3", 8)
    y = b.node("Relu", [b.node("Add", [y, p], "a1")], "r3")
    z = b.node("Relu", [b.bn(b.conv(y, "c4", 8, 16, 3, stride=2, pad=1), "bn4", 16)], "r4")
    z = b.bn(b.conv(z, "c5", 16, 16, 3, pad=1), "bn5", 16)
    short = b.bn(b.conv(y, "down", 8, 16, 1, stride=2, bias=False), "bnd", 16)
    z = b.node("Relu", [b.node("Add", [z, short], "a2")], "r5")
    g = b.node("Flatten", [b.node("GlobalAveragePool", [z], "gap")], "flat", axis=1)
    fc_w = b.constant("fc.w", b.rng.standard_normal((10, 16)) * 0.3)
    b.node("Gemm", [g, fc_w, b.constant("fc.b", b.rng.standard_normal(10) * 0.1)], "y", transB=1)
    return b.model({"x": [batch, 3, size, size]}, {"y": [batch, 10]})


def fire_net(batch=1, size: int = 12):
    """SqueezeNet's and MobileNetV2's patterns: a fire module (a 1x1 squeeze, then 1x1 and 3x3 expansions
    concatenated), max pooling in ceil mode, an inverted residual (1x1, depthwise 3x3 with ReLU6 as Clip, a 1x1
    projection, an Add of two non-convolution results), a standalone batch normalisation, average pooling,
    MatMul, Dropout, Reshape."""
    b = Builder(1)
    s = b.node("Relu", [b.conv("x", "sq", 3, 4, 1)], "sqr")
    e1 = b.node("Relu", [b.conv(s, "e1", 4, 6, 1)], "e1r")
    e3 = b.node("Relu", [b.conv(s, "e3", 4, 6, 3, pad=1)], "e3r")
    cat = b.node("Concat", [e1, e3], "cat", axis=1)
    p = b.node("MaxPool", [cat], "pool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    lo, hi = b.constant("lo", 0.0), b.constant("hi", 6.0)
    h = b.node("Clip", [b.conv(p, "expand", 12, 24, 1), lo, hi], "ex6")
    h = b.node("Clip", [b.conv(h, "dw", 24, 24, 3, pad=1, groups=24), lo, hi], "dw6")
    h = b.conv(h, "project", 24, 12, 1)
    h = b.node("Relu", [h], "projr")  # the Add reads a ReLU's result: a sum of two activations, then a ReLU
    a = b.node("Relu", [b.node("Add", [h, p], "add")], "addr")
    n = b.bn(a, "bn", 12)  # after a ReLU: no convolution to fold into
    avg = b.node("AveragePool", [n], "avg", kernel_shape=[2, 2], strides=[2, 2])
    d = b.node("Dropout", [avg], "drop")
    b.initializers.append(numpy_helper.from_array(np.array([batch, -1], np.int64), "shape"))
    r = b.node("Reshape", [d, "shape"], "flat")
    pooled = -(-(size - 3) // 2) + 1  # ceil mode
    features = 12 * (pooled // 2) ** 2
    b.node("MatMul", [r, b.constant("mm", b.rng.standard_normal((features, 7)) * 0.2)], "y")
    return b.model({"x": [batch, 3, size, size]}, {"y": [batch, 7]})

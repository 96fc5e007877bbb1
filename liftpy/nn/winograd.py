"""Winograd's minimal filtering F(2x2, 3x3) for the 3x3 convolutions of stride 1 (Lavin and Gray, "Fast
Algorithms for Convolutional Neural Networks", 2016): the layer as ``conv2d_winograd.lift``, a second
high-level program beside ``conv2d.lift``, tuned through the automatic route stage by stage.

It multiplies 16 times per 2 x 2 block of outputs and channel where the direct sum multiplies 36: the heart of
it is 16 matrix products, K x C by C x tiles, which the route blocks and vectorises as it does a 1x1
convolution. The transforms around it move data more than they compute: worth it where the channels are many
and the images small (VGG-16's layer 19: 0.67 times the direct program's kernel time, each stage tuned on its
own -- benchmarks/results/winograd-stages-2af6886-zen4.txt).
"""

from __future__ import annotations

from importlib import resources

import numpy as np

from ..tuning.program import ProgramTask
from .layers import ConvLayer

#: Lavin's F(2, 3): B^T (the input tile's transform), G (the kernel's), A^T (back to two outputs)
INPUT_1D = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
KERNEL_1D = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)
OUTPUT_1D = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)


def transforms() -> dict[str, np.ndarray]:
    """The program's transform inputs: each 1D transform Kronecker-squared, acting on a tile's joined rows."""
    return {"inputTransform": np.kron(INPUT_1D, INPUT_1D).astype(np.float32),
            "kernelTransform": np.kron(KERNEL_1D, KERNEL_1D).astype(np.float32),
            "outputTransform": np.kron(OUTPUT_1D, OUTPUT_1D).astype(np.float32)}


def applies(layer: ConvLayer) -> bool:
    """Whether the layer is one F(2x2, 3x3) computes: 3x3 kernels, stride 1, dilation 1, one group."""
    return ((layer.kernel_height, layer.kernel_width) == (3, 3) and layer.stride == (1, 1)
            and layer.dilation == (1, 1) and layer.groups == 1)


def program_padding(layer: ConvLayer) -> tuple[tuple[int, int, int, int], tuple[int, int]]:
    """The program's padSize and crop: the layer's padding, one more row (column) where the output's height
    (width) is odd, and the extra row (column) of outputs dropped."""
    top, bottom, left, right = layer.padding
    crop = (layer.out_height % 2, layer.out_width % 2)
    return (top, bottom + crop[0], left, right + crop[1]), crop


def winograd_task(layer: ConvLayer) -> ProgramTask:
    """The layer as conv2d_winograd.lift's program to tune: its weights, biases and transforms constant."""
    path = str(resources.files("liftpy.nn").joinpath("conv2d_winograd.lift"))
    pad_size, crop = program_padding(layer)
    sizes = dict(N=layer.batch, C=layer.channels, H=layer.height, W=layer.width, K=layer.kernels,
                 padSize=pad_size, crop=crop)
    return ProgramTask(path, tuple(sorted(sizes.items())), "conv2dWinograd",
                       ("weights", "biases", *transforms()))


__all__ = ["applies", "program_padding", "transforms", "winograd_task"]

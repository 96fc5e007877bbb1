"""Named convolution layers: the nine unique layers of VGG-16, as in the paper's table 3."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError


@dataclass(frozen=True)
class ConvLayer:
    """A convolution layer's shape: input C x H x W, K kernels of kh x kw, stride and padding
    (top, bottom, left, right), batch size, dilation (the taps' spacing) and groups (the kernels of group g
    see the channels of group g: each kernel has C / groups channels)."""

    name: str
    channels: int
    height: int
    width: int
    kernels: int
    kernel_height: int
    kernel_width: int
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (1, 1, 1, 1)
    batch: int = 1
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1

    @property
    def span(self) -> tuple[int, int]:
        """The rows and columns a window covers: (k - 1) * dilation + 1."""
        return ((self.kernel_height - 1) * self.dilation[0] + 1, (self.kernel_width - 1) * self.dilation[1] + 1)

    @property
    def out_height(self) -> int:
        top, bottom, _, _ = self.padding
        return (self.height + top + bottom - self.span[0]) // self.stride[0] + 1

    @property
    def out_width(self) -> int:
        _, _, left, right = self.padding
        return (self.width + left + right - self.span[1]) // self.stride[1] + 1

    @property
    def group_channels(self) -> int:
        """The channels each kernel sees: C / groups."""
        return self.channels // self.groups

    @property
    def weight_shape(self) -> tuple[int, int, int, int]:
        """PyTorch's OIHW: K x C/groups x kh x kw."""
        return (self.kernels, self.group_channels, self.kernel_height, self.kernel_width)

    @property
    def flops(self) -> int:
        """Multiply-adds counted as two operations, bias included as one add per output."""
        outputs = self.batch * self.kernels * self.out_height * self.out_width
        return outputs * (2 * self.group_channels * self.kernel_height * self.kernel_width)

    def random_inputs(self, seed: int):
        """Images (NCHW), weights (OIHW, scaled by the fan-in, as a trained layer's are) and biases for this
        layer, float32, drawn from ``seed``."""
        import numpy as np

        rng = np.random.default_rng(seed)
        x = rng.standard_normal((self.batch, self.channels, self.height, self.width)).astype(np.float32)
        fan_in = self.group_channels * self.kernel_height * self.kernel_width
        w = (rng.standard_normal(self.weight_shape) / np.sqrt(fan_in)).astype(np.float32)
        b = rng.standard_normal(self.kernels).astype(np.float32)
        return x, w, b

    def scaled(self, factor: int, min_channels: int = 1) -> "ConvLayer":
        """A smaller layer of the same kind (for fast tests): channels, kernels and spatial sizes divided (the
        groups kept where they still divide both)."""
        channels, kernels = max(min_channels, self.channels // factor), max(1, self.kernels // factor)
        groups = self.groups if channels % self.groups == 0 and kernels % self.groups == 0 else 1
        return ConvLayer(f"{self.name}/{factor}", channels, max(self.span[0], self.height // factor),
                         max(self.span[1], self.width // factor), kernels, self.kernel_height, self.kernel_width,
                         self.stride, self.padding, self.batch, self.dilation, groups)

    @property
    def key(self) -> str:
        """The layer's identity in a tuning database: its shape, not its name."""
        top, bottom, left, right = self.padding
        return (f"N{self.batch} C{self.channels} H{self.height} W{self.width} K{self.kernels} "
                f"k{self.kernel_height}x{self.kernel_width} s{self.stride[0]}x{self.stride[1]} "
                f"p{top},{bottom},{left},{right}" + self._dilation_and_groups(" d{}x{}", " g{}"))

    def _dilation_and_groups(self, dilation: str, groups: str) -> str:
        """What a layer adds to its text where it dilates or groups (else nothing: the keys of layers tuned
        before dilation and groups existed stay theirs)."""
        return (dilation.format(*self.dilation) if self.dilation != (1, 1) else "") \
            + (groups.format(self.groups) if self.groups != 1 else "")

    @property
    def label(self) -> str:
        """The name a database keeps beside the key: a named layer's (vgg16.7), else none."""
        return self.name if "." in self.name else ""

    def complete(self, config: dict) -> dict:
        """A layer's configurations have had the same choices since they were first recorded."""
        return dict(config)

    def describe(self) -> str:
        return (f"{self.name}: input {self.channels}x{self.height}x{self.width}, {self.kernels} kernels "
                f"{self.kernel_height}x{self.kernel_width}, stride {self.stride}, padding {self.padding}"
                + self._dilation_and_groups(", dilation {}x{}", ", {} groups"))


def _vgg(index: int, channels: int, size: int, kernels: int) -> ConvLayer:
    return ConvLayer(f"vgg16.{index}", channels, size, size, kernels, 3, 3)


#: The nine unique convolution layers of VGG-16 (paper, table 3), named by their index in the network.
VGG16 = {
    layer.name: layer
    for layer in [
        _vgg(0, 3, 224, 64),
        _vgg(2, 64, 224, 64),
        _vgg(5, 64, 112, 128),
        _vgg(7, 128, 112, 128),
        _vgg(10, 128, 56, 256),
        _vgg(12, 256, 56, 256),
        _vgg(17, 256, 28, 512),
        _vgg(19, 512, 28, 512),
        _vgg(24, 512, 14, 512),
    ]
}

NETWORKS = {"vgg16": VGG16}


def layer(name: str) -> ConvLayer:
    """A named layer such as ``"vgg16.7"``."""
    for layers in NETWORKS.values():
        if name in layers:
            return layers[name]
    known = ", ".join(n for layers in NETWORKS.values() for n in layers)
    raise InputError(f"unknown layer {name!r} (known: {known})")

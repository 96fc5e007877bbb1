"""Neural-network layers compiled by liftpy: ``conv2d`` with PyTorch's semantics, its parameter space, and
named layers (VGG-16)."""

from .conv import ALGORITHMS, Conv2d, ConvPlan, ConvResult, LayerCall, conv2d, conv_space, default_config, make_layer, plan
from .layers import VGG16, ConvLayer, layer

__all__ = ["Conv2d", "LayerCall", "conv2d", "conv_space", "plan", "default_config", "ConvPlan", "ConvResult", "ConvLayer", "VGG16",
           "layer", "make_layer", "ALGORITHMS"]

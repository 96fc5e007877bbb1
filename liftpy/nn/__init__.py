"""Neural-network layers compiled by liftpy: ``conv2d`` with PyTorch's semantics through the automatic route,
its space, and named layers (VGG-16)."""

from .conv import (Conv2d, ConvPlan, ConvResult, LayerCall, conv2d, conv_space, make_layer, plan, route_space,
                   route_task)
from .layers import VGG16, ConvLayer, layer

__all__ = ["Conv2d", "LayerCall", "conv2d", "conv_space", "plan", "ConvPlan", "ConvResult", "ConvLayer", "VGG16",
           "layer", "make_layer", "route_space", "route_task"]

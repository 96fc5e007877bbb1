"""Neural-network layers compiled by liftpy: ``conv2d`` with PyTorch's semantics (through the automatic route by
default, or a hand-written pipeline by name), its parameter space, and named layers (VGG-16)."""

from .conv import (ALGORITHMS, ROUTE, Conv2d, ConvPlan, ConvResult, LayerCall, conv2d, conv_space, default_config,
                   make_layer, plan, route_space, route_task)
from .layers import VGG16, ConvLayer, layer

__all__ = ["Conv2d", "LayerCall", "conv2d", "conv_space", "plan", "default_config", "ConvPlan", "ConvResult", "ConvLayer", "VGG16",
           "layer", "make_layer", "ALGORITHMS", "ROUTE", "route_space", "route_task"]

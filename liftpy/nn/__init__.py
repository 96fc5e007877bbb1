"""Neural-network layers compiled by liftpy: ``conv2d`` with PyTorch's semantics through the automatic route,
its space, named layers (VGG-16), whole networks of operators (:mod:`.network`, read by :mod:`liftpy.onnx`),
and a layer's tuning (its programs are tuning tasks: nn asks liftpy.tuning, never the reverse)."""

from .conv import (Conv2d, ConvPlan, ConvResult, LayerCall, best_in_database, conv2d, conv_space, layer_tasks,
                   make_layer, plan, route_space, route_task, tune_layer, tune_layers)
from .layers import VGG16, ConvLayer, layer
from .network import Network, PreparedNetwork

__all__ = ["Conv2d", "LayerCall", "conv2d", "conv_space", "plan", "ConvPlan", "ConvResult", "ConvLayer", "VGG16",
           "layer", "make_layer", "route_space", "route_task", "layer_tasks", "best_in_database", "tune_layer",
           "tune_layers", "Network", "PreparedNetwork"]

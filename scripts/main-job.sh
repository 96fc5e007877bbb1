#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the main job: a short auto-tuning run of a real VGG-16 layer (layer 10:
# 128x56x56 input, 256 kernels 3x3) on the default OpenCL device, through the automatic route (the layer is
# liftpy/nn/conv2d.lift at its sizes, and Winograd's liftpy/nn/conv2d_winograd.lift, tuned stage by stage)
# -- every trial checked and stored in tuning.sqlite -- then its report
# (best configurations, failures, the best low-level program, Pareto figure);
# then a convolution with bias and ReLU written at the high level only, tuned through the automatic route,
# and its report (with the best low-level program found). Run it again to resume and extend the searches.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/liftpy tune --layer vgg16.10 --trials "${TRIALS:-20}" --db tuning.sqlite --seed 0
.venv/bin/liftpy report --db tuning.sqlite --layer vgg16.10
SIZES=(--size N=1 --size C=64 --size H=56 --size W=56 --size K=64 --size kernelHeight=3 --size kernelWidth=3
       --size padSize=1,1,1,1 --size stride=1,1)
.venv/bin/liftpy tune examples/programs/conv_bias_relu.lift "${SIZES[@]}" --constant weights --constant biases \
    --trials "${TRIALS:-20}" --db tuning.sqlite --seed 0
exec .venv/bin/liftpy report --db tuning.sqlite --program examples/programs/conv_bias_relu.lift "${SIZES[@]}"

#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the main job: type-check the paper's convolution layer (Listing 3) and
# evaluate it with the reference interpreter on a small random layer, checked against numpy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/liftpy check examples/conv_layer.lift
exec .venv/bin/python examples/run_conv_layer.py

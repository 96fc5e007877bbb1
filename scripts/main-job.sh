#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the main job: a short auto-tuning run of a real VGG-16 layer (layer 10:
# 128x56x56 input, 256 kernels 3x3) on the default OpenCL device -- every trial checked against the
# reference and stored in tuning.sqlite -- then its report (best configurations, failures, Pareto figure).
# Run it again to resume and extend the search (raise --trials).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/liftpy tune --layer vgg16.10 --trials "${TRIALS:-20}" --db tuning.sqlite --seed 0
exec .venv/bin/liftpy report --db tuning.sqlite --layer vgg16.10

#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the default test suite. Extra arguments go to pytest
# (for example: scripts/test.sh -m slow for the long tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"

"""The packages' dependencies point one way: liftpy.nn (layers) asks liftpy.tuning (tasks), never the reverse."""

import subprocess
import sys


def test_tuning_does_not_import_nn():
    code = ("import sys, liftpy.tuning, liftpy.tuning.report\n"
            "print(sorted(m for m in sys.modules if m.startswith('liftpy.nn')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"

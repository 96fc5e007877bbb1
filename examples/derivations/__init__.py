"""The derivations of the paper's hand-written pipelines, kept as worked examples of rewriting (see README.md).

Each module is a strategy that derives a pipeline from a high-level program rule by rule, with the rules it needs
beyond the catalogue in the ``.rules`` file beside it. None of them is part of the compiler: the catalogue
(``liftpy.rewrite.rules.catalogue()``) does not load them; :func:`catalogue` here does, on demand.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent

#: the derivations' rule files, in the order they are documented (each with the Python rules and strategies of the
#: module beside it)
RULE_FILES = (HERE / "convolution.rules", HERE / "direct.rules", HERE / "copies.rules")


def catalogue():
    """The rule catalogue and the derivations' rules (``catalogue().padOptimisational``...); loaded once."""
    from liftpy.rewrite import rules

    from . import convolution, copies, direct  # noqa: F401 (their Python rules are these modules')

    return rules.catalogue(*RULE_FILES)


"""Where liftpy's data files live: ``grammar/`` and ``rewrites/`` at the top of the source tree.

setup.cfg installs them as the packages ``liftpy.grammar`` and ``liftpy.catalogue`` (the rule catalogue keeps
its folder's name, ``rewrites/``); running from a source checkout without installing finds them beside the
``liftpy/`` folder.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

#: each data folder's package
PACKAGES = {"grammar": "liftpy.grammar", "rewrites": "liftpy.catalogue"}


def data_dir(folder: str):
    """The folder ``grammar`` or ``rewrites`` as an importlib Traversable (or a Path in a bare checkout)."""
    try:
        return resources.files(PACKAGES[folder])
    except ModuleNotFoundError:
        return Path(__file__).resolve().parent.parent / folder


def data_text(folder: str, name: str) -> str:
    return data_dir(folder).joinpath(name).read_text(encoding="utf-8")


def package_text(name: str) -> str:
    """A data file inside the liftpy package itself (the prelude)."""
    return resources.files("liftpy").joinpath(name).read_text(encoding="utf-8")

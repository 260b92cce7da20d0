"""The optional parts of the install (pyproject's extras): whether one is there, and a one-line error that says
what to install when a command needs one that is not."""

from __future__ import annotations

from importlib.util import find_spec

from benchcurate.curation.core.errors import UserError

MODULES = {"xlsx": "openpyxl", "review": "label_studio_sdk", "dask": "prefect_dask"}


def has(extra: str) -> bool:
    try:
        return find_spec(MODULES[extra]) is not None
    except ImportError:  # a broken or blocked install counts as absent
        return False


def require(extra: str, purpose: str) -> None:
    if not has(extra):
        raise UserError(f"{purpose} needs the '{extra}' extra: pip install 'benchcurate[{extra}]'")

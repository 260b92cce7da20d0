"""Helpers shared by test modules (test modules never import each other): run configurations, runs, readers."""

from __future__ import annotations

from pathlib import Path

from benchcurate.curation.recipes import resolve_run, run_options
from benchcurate.schemas import RunConfig


def resolve(recipe: str, out_dir: Path, **options: object) -> RunConfig:
    """A run's configuration as `curate run` resolves it, from RunOptions fields given as keywords."""
    return resolve_run(recipe, run_options(**options), out_dir)

"""Deployments `curate/<recipe>` for every recipe, served by one long-running process (`curate serve`)."""

from __future__ import annotations

from pathlib import Path

from prefect import serve
from prefect.deployments.runner import EntrypointType

from benchcurate.curation.recipes import available_recipes, load_recipe
from benchcurate.flows.curate import curate


def serve_all(out_dir: Path, limit: int = 1) -> None:
    """Serve until interrupted; runs write under `out_dir` whatever directory the run was started from."""
    deployments = [
        curate.to_deployment(
            name=name,
            parameters={"recipe": name, "out_dir": str(out_dir.resolve())},
            description=load_recipe(name).description,
            enforce_parameter_schema=True,
            entrypoint_type=EntrypointType.MODULE_PATH,
            tags=["curate", name],
        )
        for name in available_recipes()
    ]
    serve(*deployments, pause_on_shutdown=False, limit=limit)

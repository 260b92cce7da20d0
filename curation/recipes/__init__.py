"""Recipes: the paper defaults of a whole pipeline as a readable YAML file, validated when it loads."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from importlib import resources
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import yaml
from pydantic import JsonValue, ValidationError

from curation.errors import UserError
from curation.stages import STAGES
from schemas import Recipe, RunConfig
from schemas.recipe import RUN_ID_PATTERN, BackendKind

DEMO_CORPUS_DIRNAME = "demo-corpus"


def available_recipes() -> list[str]:
    return sorted(entry.name[:-5] for entry in resources.files("curation.recipes").iterdir()
                  if entry.name.endswith(".yaml"))


def _one_line(error: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(part) for part in entry['loc']) or 'value'}: {entry['msg']}"
                     for entry in error.errors(include_url=False))


def load_recipe(name: str) -> Recipe:
    if name not in available_recipes():
        raise UserError(f"unknown recipe '{name}'; available: {', '.join(available_recipes())}")
    data = yaml.safe_load((resources.files("curation.recipes") / f"{name}.yaml").read_text(encoding="utf-8"))
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as error:
        raise UserError(f"recipe '{name}' is invalid: {_one_line(error)}") from error
    unknown = [spec.stage for spec in recipe.stages if spec.stage not in STAGES]
    if unknown:
        raise UserError(f"recipe '{name}' names unknown stages {unknown}; known: {', '.join(STAGES)}")
    return recipe


def _apply_overrides(recipe: Recipe, overrides: dict[str, dict[str, JsonValue]]) -> Recipe:
    names = [spec.stage for spec in recipe.stages]
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise UserError(f"no stage {unknown} in recipe '{recipe.name}'; its stages are: {', '.join(names)}")
    stages = [spec.model_copy(update={"config": {**spec.config, **overrides.get(spec.stage, {})}})
              for spec in recipe.stages]
    return recipe.model_copy(update={"stages": stages})


def _validated_stages(recipe: Recipe) -> Recipe:
    """Every stage config checked against its pydantic model and filled with its defaults."""
    stages = []
    for spec in recipe.stages:
        try:
            config = STAGES[spec.stage].config.model_validate(spec.config)
        except ValidationError as error:
            raise UserError(f"bad parameter for stage {spec.stage}: {_one_line(error)}") from error
        stages.append(spec.model_copy(update={"config": config.model_dump(mode="json")}))
    return recipe.model_copy(update={"stages": stages})


def code_version() -> str:
    try:
        package = version("benchcurate")
    except PackageNotFoundError:
        package = "unknown"
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                text=True, timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return package
    return f"{package}+g{commit}"


def default_run_id(recipe: str) -> str:
    return f"{recipe}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"


def resolve_run(recipe_name: str, *, out_dir: Path, run_id: str | None = None, input_dir: str | None = None,
                backend: BackendKind | None = None, base_url: str | None = None, model: str | None = None,
                seed: int | None = None, overrides: dict[str, dict[str, JsonValue]] | None = None) -> RunConfig:
    """The full configuration of a run, validated before anything runs. No --input means the demo corpus."""
    recipe = load_recipe(recipe_name)
    demo = input_dir is None
    if demo and recipe.demo is not None:
        recipe = _apply_overrides(recipe, recipe.demo.overrides)
    recipe = _apply_overrides(recipe, overrides or {})
    if demo:
        root = (out_dir / DEMO_CORPUS_DIRNAME).resolve()
    else:
        root = Path(input_dir).expanduser().resolve()
        if not root.is_dir():
            raise UserError(f"input folder {input_dir} does not exist or is not a folder; pass --input with a "
                            f"folder of images, or leave --input out to run the bundled demo corpus")
    first = recipe.stages[0]
    if first.stage != "image_ingest":
        raise UserError(f"recipe '{recipe.name}' must start with image_ingest, not {first.stage}")
    recipe.stages[0] = first.model_copy(update={"config": {**first.config, "input_dir": str(root)}})
    backend_update = {key: value for key, value in
                      {"kind": backend, "base_url": base_url, "model": model}.items() if value is not None}
    try:
        recipe = Recipe.model_validate({**recipe.model_dump(), "seed": recipe.seed if seed is None else seed,
                                        "backend": {**recipe.backend.model_dump(), **backend_update}})
    except ValidationError as error:
        raise UserError(f"bad run option: {_one_line(error)}") from error
    run_id = run_id or default_run_id(recipe.name)
    try:
        return RunConfig(run_id=run_id, recipe=_validated_stages(recipe), input_dir=None if demo else str(root),
                         demo=demo, code_version=code_version(), created_at=datetime.now(UTC))
    except ValidationError as error:
        raise UserError(f"bad run id '{run_id}': use letters, digits, '.', '_' and '-' ({RUN_ID_PATTERN})") from error

"""Recipes: the paper defaults of a whole pipeline as a readable YAML file, validated when it loads."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import resources
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import yaml
from pydantic import JsonValue, ValidationError

from benchcurate.curation.core.decode import IMAGE_EXTENSIONS
from benchcurate.curation.core.errors import UserError, one_line
from benchcurate.curation.engine.registry import STAGES
from benchcurate.curation.images.sources import input_kind, require_images
from benchcurate.curation.models import make_backend
from benchcurate.curation.models.identity import set_aside_credentials
from benchcurate.curation.models.pricing import check_budget_settings
from benchcurate.curation.models.prompting import load_prompt
from benchcurate.schemas import Recipe, RunConfig, RunOptions

DEMO_CORPUS_DIRNAME = "demo-corpus"


def available_recipes() -> list[str]:
    return sorted(
        entry.name[:-5]
        for entry in resources.files("benchcurate.curation.recipes").iterdir()
        if entry.name.endswith(".yaml")
    )


def load_recipe(name: str) -> Recipe:
    if name not in available_recipes():
        raise UserError(f"unknown recipe '{name}'; available: {', '.join(available_recipes())}")
    data = yaml.safe_load(
        (resources.files("benchcurate.curation.recipes") / f"{name}.yaml").read_text(encoding="utf-8")
    )
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as error:
        raise UserError(f"recipe '{name}' is invalid: {one_line(error)}") from error
    unknown = [spec.stage for spec in recipe.stages if spec.stage not in STAGES]
    if unknown:
        raise UserError(f"recipe '{name}' names unknown stages {unknown}; known: {', '.join(STAGES)}")
    repeated = sorted({spec.stage for spec in recipe.stages if [s.stage for s in recipe.stages].count(spec.stage) > 1})
    if repeated:
        raise UserError(
            f"recipe '{name}' names {repeated} more than once; --set and reports address a stage by "
            f"its name, so each may appear once"
        )
    return recipe


RUN_SECTIONS = ("backend", "execution")  # `--set backend.max_output_tokens=512` sets the run, not a stage


def _apply_overrides(recipe: Recipe, overrides: dict[str, dict[str, JsonValue]]) -> Recipe:
    names = [spec.stage for spec in recipe.stages]
    unknown = sorted(set(overrides) - set(names) - set(RUN_SECTIONS))
    if unknown:
        raise UserError(
            f"no stage {unknown} in recipe '{recipe.name}'; its stages are: {', '.join(names)} "
            f"(and the run sections {', '.join(RUN_SECTIONS)})"
        )
    stages = [
        spec.model_copy(update={"config": {**spec.config, **overrides.get(spec.stage, {})}}) for spec in recipe.stages
    ]
    sections = {
        name: {**getattr(recipe, name).model_dump(), **overrides[name]} for name in RUN_SECTIONS if name in overrides
    }
    try:
        return Recipe.model_validate({**recipe.model_dump(), **sections, "stages": stages})
    except ValidationError as error:
        raise UserError(f"bad run setting: {one_line(error)}") from error


def _validated_stages(recipe: Recipe) -> Recipe:
    """Every stage config checked against its pydantic model and filled with its defaults."""
    stages = []
    for spec in recipe.stages:
        try:
            config = STAGES[spec.stage].config.model_validate(spec.config)
        except ValidationError as error:
            raise UserError(f"bad parameter for stage {spec.stage}: {one_line(error)}") from error
        stages.append(spec.model_copy(update={"config": config.model_dump(mode="json")}))
    return recipe.model_copy(update={"stages": stages})


def describe_recipe(name: str) -> Recipe:
    """The recipe with every stage's parameters and defaults filled in (the input folder comes from --input)."""
    recipe = load_recipe(name)
    first = recipe.stages[0]
    recipe.stages[0] = first.model_copy(update={"config": {**first.config, "input_path": "<from --input>"}})
    return _validated_stages(recipe)


def code_version() -> str:
    try:
        package = version("benchcurate")
    except PackageNotFoundError:
        package = "unknown"
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = (
            subprocess.run(
                ["git", "-C", str(root), "diff", "--quiet", "HEAD"], capture_output=True, timeout=5
            ).returncode
            != 0
        )
    except (OSError, subprocess.SubprocessError):
        return package
    return f"{package}+g{commit}" + (".dirty" if dirty else "")


def default_run_id(recipe: str) -> str:
    return f"{recipe}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"


def existing_run(out_dir: Path, run_id: str) -> RunConfig | None:
    path = out_dir / "runs" / run_id / "run.json"
    if not path.exists():
        return None
    try:
        return RunConfig.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as error:
        raise UserError(
            f"{path} cannot be read as a run configuration ({error.error_count()} errors); start a new --run-id"
        ) from error


# What a resumed run keeps from its earlier attempts unless given again: whatever shapes its outcome. The cost
# limit, the cache refresh and where the work runs are about one invocation, so they are not kept.
STICKY_OPTIONS = (
    "backend",
    "base_url",
    "model",
    "seed",
    "concurrency",
    "batch",
    "request_cache",
    "allowed_roots",
    "release_name",
)


def _merged_options(existing: RunConfig | None, given: RunOptions) -> RunOptions:
    """The options of this attempt: the earlier attempts' where not given again, and their --set overrides
    updated field by field with the new ones."""
    if existing is None or existing.options is None:
        return given
    previous = existing.options
    kept = {name: getattr(previous, name) for name in STICKY_OPTIONS if getattr(given, name) is None}
    overrides = {stage: dict(fields) for stage, fields in previous.overrides.items()}
    for stage, fields in given.overrides.items():
        overrides.setdefault(stage, {}).update(fields)
    return given.model_copy(update={**kept, "overrides": overrides})


def option_changes(
    previous: RunOptions | None, current: RunOptions, names: Mapping[str, str] | None = None
) -> list[str]:
    """`name: before -> after` for every outcome-shaping option this attempt changed, each option named as
    `names` says (the CLI's flags), else by its field."""
    if previous is None:
        return []
    shown = names or {}
    changes = [
        f"{shown.get(name, name)}: {getattr(previous, name)} -> {getattr(current, name)}"
        for name in STICKY_OPTIONS
        if getattr(previous, name) != getattr(current, name)
    ]
    for stage in sorted(set(previous.overrides) | set(current.overrides)):
        before, after = previous.overrides.get(stage, {}), current.overrides.get(stage, {})
        changes += [
            f"--set {stage}.{field}: {before.get(field)} -> {after.get(field)}"
            for field in sorted(set(before) | set(after))
            if before.get(field) != after.get(field)
        ]
    return changes


def _check_same_recipe(existing: RunConfig | None, recipe: str) -> None:
    if existing is not None and existing.recipe.name != recipe:
        raise UserError(
            f"run {existing.run_id} is a {existing.recipe.name} run; resume it with `curate run "
            f"{existing.recipe.name} --run-id {existing.run_id}`, or use a new --run-id for {recipe}"
        )


def with_implied_demo(options: RunOptions) -> RunOptions:
    """Neither an input nor a run id: the bundled demo corpus (`curate run multiverse`, a deployment run with no
    parameters). A run id alone names a run to resume, never a new demo run."""
    if options.input_path is None and options.run_id is None and not options.demo:
        return options.model_copy(update={"demo": True})
    return options


def _resume_input(existing: RunConfig | None, options: RunOptions, out_dir: Path) -> str | None:
    """A resumed run keeps its input: leaving --input out reuses it; a different input is an error. A run id
    that names no run, without an input, is an error (a typo, or another --out), not a new demo run."""
    input_path = options.input_path
    if options.demo and input_path is not None:
        raise UserError("--demo runs the bundled demo corpus: leave out --input, or leave out --demo")
    if existing is None:
        if input_path is None and not options.demo:
            raise UserError(
                f"no run '{options.run_id}' in {out_dir.resolve() / 'runs'}; to resume a run, pass the "
                f"--out it was started with; to start one, pass --input FOLDER (or --demo for the "
                f"bundled demo corpus)"
            )
        return input_path
    if options.demo and not existing.demo:
        raise UserError(
            f"run {existing.run_id} ran on {existing.input_path}, not on the demo corpus; leave out "
            f"--demo to resume it, or use a new --run-id"
        )
    if input_path is None:
        return existing.input_path
    if existing.demo:
        raise UserError(f"run {existing.run_id} ran on the demo corpus; use a new --run-id for {input_path}")
    if str(Path(input_path).expanduser().resolve()) != existing.input_path:
        raise UserError(
            f"run {existing.run_id} ran on {existing.input_path}; leave --input out (or pass that folder) "
            f"to resume it, or use a new --run-id for {input_path}"
        )
    return input_path


def _input_root(out_dir: Path, input_path: str | None) -> Path:
    if input_path is None:
        return (out_dir / DEMO_CORPUS_DIRNAME).resolve()
    root = Path(input_path).expanduser().resolve()
    if input_kind(root) == "folder":  # a missing path or an unknown kind of file is a UserError here too
        require_images(root, IMAGE_EXTENSIONS, out_dir.resolve())
    return root


def input_folder(root: Path) -> Path:
    """The folder an input lives in: itself for a folder, the folder holding a manifest or samples file."""
    return root if root.is_dir() else root.parent


def _ingest_settings(root: Path, out_dir: Path, allowed_roots: list[str] | None) -> dict[str, JsonValue]:
    """Where to read, and what not to: the output folder when it sits inside the input folder, and paths outside
    the allowed roots."""
    settings: dict[str, JsonValue] = {"input_path": str(root)}
    if allowed_roots is not None:
        settings["allowed_roots"] = [str(Path(folder).expanduser().resolve()) for folder in allowed_roots]
    if root.is_dir() and out_dir.resolve().is_relative_to(root) and out_dir.resolve() != root:
        settings["exclude_paths"] = [out_dir.resolve().relative_to(root).as_posix()]
    return settings


def _check_models(recipe: Recipe) -> None:
    """Prompt versions exist and the backend can be built (model named, key present) before anything runs."""
    for spec in recipe.stages:
        stage = STAGES[spec.stage]
        for prompt_id in stage.prompts:
            load_prompt(prompt_id, int(spec.config.get("prompt_version", 1)))
    make_backend(recipe.backend)
    check_budget_settings(recipe.backend)


def changed_stages(previous: RunConfig, current: RunConfig) -> list[str]:
    """Stages whose configuration differs between two attempts of a run (they and later ones will rerun)."""
    if previous.recipe.backend != current.recipe.backend or previous.recipe.seed != current.recipe.seed:
        return [spec.stage for spec in current.recipe.stages if STAGES[spec.stage].uses_model]
    before = {spec.stage: spec.config for spec in previous.recipe.stages}
    return [spec.stage for spec in current.recipe.stages if before.get(spec.stage) != spec.config]


def resolve_run(recipe_name: str, options: RunOptions, out_dir: Path) -> RunConfig:
    """The full configuration of a run, validated before anything runs.

    No input means the demo corpus, except for an existing run id, which keeps the input it started with."""
    recipe = load_recipe(recipe_name)
    options = with_implied_demo(options)
    run_id = options.run_id or default_run_id(recipe.name)
    existing = existing_run(out_dir, run_id)
    _check_same_recipe(existing, recipe.name)
    options = _merged_options(
        existing, options.model_copy(update={"run_id": run_id, "base_url": set_aside_credentials(options.base_url)})
    )
    if (options.base_url or options.model) and options.backend != "openai":
        raise UserError("--base-url and --model apply to the openai backend: add --backend openai")
    input_path = _resume_input(existing, options, out_dir)
    demo = input_path is None
    if demo and recipe.demo is not None:
        recipe = _apply_overrides(recipe, recipe.demo.overrides)
    release_name = options.release_name or (f"{recipe.release.name}-demo" if demo else recipe.release.name)
    recipe = _apply_overrides(recipe, options.overrides)
    root = _input_root(out_dir, input_path)
    first = recipe.stages[0]
    if first.stage != "image_ingest":
        raise UserError(f"recipe '{recipe.name}' must start with image_ingest, not {first.stage}")
    recipe.stages[0] = first.model_copy(
        update={"config": {**first.config, **_ingest_settings(root, out_dir, options.allowed_roots)}}
    )
    backend_update = {
        key: value
        for key, value in {
            "kind": options.backend,
            "base_url": options.base_url,
            "model": options.model,
            "concurrency": options.concurrency,
            "max_cost_usd": options.max_cost_usd,
            "batch": options.batch,
            "request_cache": options.request_cache,
            "refresh_token": datetime.now(UTC).isoformat() if options.refresh_cache else None,
            "prices": {**recipe.backend.prices, **options.prices} if options.prices else None,
        }.items()
        if value is not None
    }
    execution_update = {
        key: value
        for key, value in {"jobs": options.jobs, "dask_address": options.dask_address}.items()
        if value is not None
    }
    seed = recipe.seed if options.seed is None else options.seed
    try:
        recipe = Recipe.model_validate(
            {
                **recipe.model_dump(),
                "seed": seed,
                "release": {**recipe.release.model_dump(), "name": release_name},
                "backend": {**recipe.backend.model_dump(), **backend_update},
                "execution": {**recipe.execution.model_dump(), **execution_update},
            }
        )
    except ValidationError as error:
        raise UserError(f"bad run option: {one_line(error)}") from error
    recipe = _validated_stages(recipe)
    _check_models(recipe)
    return RunConfig(
        run_id=run_id,
        recipe=recipe,
        input_path=None if demo else str(root),
        demo=demo,
        code_version=code_version(),
        created_at=datetime.now(UTC),
        options=options.model_copy(update={"input_path": None if demo else str(root), "demo": demo}),
    )

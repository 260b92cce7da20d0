from pathlib import Path

import pytest

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.engine.registry import STAGES
from benchcurate.curation.models.prompting import available_versions, load_prompt
from benchcurate.curation.recipes import available_recipes, load_recipe
from tests.factories import make_image
from tests.helpers import resolve

PROMPT_IDS = tuple(
    sorted(
        entry.name
        for entry in (Path(__file__).parents[2] / "prompts").iterdir()
        if entry.is_dir() and not entry.name.startswith("_")
    )
)


def stage_config(run, name):
    return next(spec.config for spec in run.recipe.stages if spec.stage == name)


def test_multiverse_recipe_holds_the_paper_defaults(tmp_path):
    run = resolve("multiverse", tmp_path, input_path=str(tmp_path))
    assert not run.demo and run.recipe.backend.kind == "offline"
    assert stage_config(run, "image_quality")["min_quality_score"] == 5
    assert stage_config(run, "category_min_size")["min_items_per_category"] == 50
    assert stage_config(run, "category_weighted_sample")["max_items"] == 1000
    assert stage_config(run, "conversation_generate") == {
        "prompt_version": 1,
        "model": None,
        "batch": None,
        "turns": 4,
        "min_utterances": 6,
        "forbid_entity_name": True,
    }
    assert stage_config(run, "image_ingest")["input_path"] == str(tmp_path.resolve())


def test_demo_overrides_apply_only_to_the_demo_corpus(tmp_path):
    demo = resolve("multiverse", tmp_path)
    assert demo.demo and stage_config(demo, "category_min_size")["min_items_per_category"] == 3
    assert stage_config(demo, "image_ingest")["input_path"] == str((tmp_path / "demo-corpus").resolve())


def test_user_overrides_win_and_are_validated(tmp_path):
    run = resolve("multiverse", tmp_path, overrides={"image_quality": {"min_quality_score": 3}})
    assert stage_config(run, "image_quality")["min_quality_score"] == 3
    with pytest.raises(
        UserError, match=r"bad parameter for stage image_quality: min_quality_score: .*less than or equal to 5"
    ):
        resolve("multiverse", tmp_path, overrides={"image_quality": {"min_quality_score": 9}})
    with pytest.raises(UserError, match="min_qualty_score: extra inputs are not permitted"):
        resolve("multiverse", tmp_path, overrides={"image_quality": {"min_qualty_score": 3}})
    with pytest.raises(UserError, match="no stage \\['image_qualty'\\]"):
        resolve("multiverse", tmp_path, overrides={"image_qualty": {}})


def test_unknown_recipe_and_missing_folder_say_what_to_do(tmp_path):
    with pytest.raises(
        UserError, match="unknown recipe 'multiversal'; available: alignmmbench, convbench, multiverse, probench"
    ):
        load_recipe("multiversal")
    with pytest.raises(UserError, match="does not exist.*leave --input out to run the bundled demo corpus"):
        resolve("multiverse", tmp_path, input_path=str(tmp_path / "missing"))


def test_backend_options_are_validated(tmp_path):
    run = resolve("multiverse", tmp_path, backend="openai", base_url="http://127.0.0.1:1/v1", model="m")
    assert run.recipe.backend.kind == "openai" and run.recipe.backend.model == "m"
    assert "api_key" not in run.model_dump_json()
    with pytest.raises(UserError, match="^backend: input should be 'offline' or 'openai'$"):  # the field, not a flag
        resolve("multiverse", tmp_path, backend="gpt")


def test_every_recipe_names_registered_stages_and_starts_with_ingest():
    for name in available_recipes():
        recipe = load_recipe(name)
        assert recipe.stages[0].stage == "image_ingest"
        assert all(spec.stage in STAGES for spec in recipe.stages)


@pytest.mark.parametrize("prompt_id", PROMPT_IDS)
def test_prompts_load_render_and_name_their_schema(prompt_id):
    prompt = load_prompt(prompt_id, 1)
    assert available_versions(prompt_id) == [1] and len(prompt.sha256) == 64
    values = {name: f"<{name}>" for name in prompt.variables}
    rendered = prompt.render(values)
    assert all(f"<{name}>" in rendered.system + rendered.user for name in prompt.variables)
    assert "$" not in rendered.user
    if prompt.variables:
        with pytest.raises(ValueError, match="needs values"):
            prompt.render({})


def test_unknown_prompt_version_is_a_user_error():
    with pytest.raises(UserError, match="no prompt 'persona' version 9"):
        load_prompt("persona", 9)


def test_every_model_stage_names_existing_prompts():
    for stage in STAGES.values():
        for prompt_id in stage.prompts:
            assert load_prompt(prompt_id, 1).id == prompt_id


@pytest.fixture(autouse=True)
def a_picture(tmp_path):
    """Every folder given as --input here holds an image: an empty one is refused before anything runs."""
    make_image(tmp_path / "pic.png", 1)


def save(config, out_dir):
    from benchcurate.curation.engine.store import RunStore

    RunStore(out_dir / "runs" / config.run_id).save_config(config)


def test_resuming_a_run_keeps_its_input_folder(tmp_path):
    images = tmp_path / "images"
    make_image(images / "0.png", 0)
    save(resolve("multiverse", tmp_path / "out", input_path=str(images), run_id="r1"), tmp_path / "out")
    resumed = resolve("multiverse", tmp_path / "out", run_id="r1")
    assert not resumed.demo and resumed.input_path == str(images.resolve())
    other = tmp_path / "other"
    make_image(other / "0.png", 0)
    with pytest.raises(UserError, match=f"run r1 ran on {images.resolve()}; leave --input out"):
        resolve("multiverse", tmp_path / "out", run_id="r1", input_path=str(other))


def test_a_demo_run_cannot_be_resumed_on_a_folder(tmp_path):
    save(resolve("multiverse", tmp_path, run_id="d", demo=True), tmp_path)
    with pytest.raises(UserError, match="ran on the demo corpus; use a new --run-id"):
        resolve("multiverse", tmp_path, run_id="d", input_path=str(tmp_path))


def test_changed_stages_lists_what_reruns(tmp_path):
    from benchcurate.curation.recipes import changed_stages

    base = resolve("multiverse", tmp_path, input_path=str(tmp_path))
    same = resolve("multiverse", tmp_path, input_path=str(tmp_path))
    tighter = resolve(
        "multiverse",
        tmp_path,
        input_path=str(tmp_path),
        overrides={"category_min_size": {"min_items_per_category": 10}},
    )
    assert changed_stages(base, same) == [] and changed_stages(base, tighter) == ["category_min_size"]


def test_an_output_folder_inside_the_input_is_not_ingested(tmp_path):
    run = resolve("multiverse", tmp_path / "outputs", input_path=str(tmp_path))
    assert stage_config(run, "image_ingest")["exclude_paths"] == ["outputs"]


def test_model_settings_are_checked_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UserError, match="no prompt 'persona' version 2"):
        resolve("multiverse", tmp_path, overrides={"persona_generate": {"prompt_version": 2}})
    with pytest.raises(UserError, match="needs a model name"):
        resolve("multiverse", tmp_path, backend="openai")
    with pytest.raises(UserError, match="needs OPENAI_API_KEY"):
        resolve("multiverse", tmp_path, backend="openai", model="gpt-4o")


def test_a_stage_of_another_package_is_found_through_its_entry_point(tmp_path, monkeypatch):
    """A user's package adds a stage without editing ours: an entry point in the group benchcurate.stages."""
    import importlib
    import sys

    from benchcurate.curation.engine import registry

    (tmp_path / "my_stages.py").write_text(
        "from benchcurate.curation.images.quality import STAGE as QUALITY\n"
        "STAGE = QUALITY.__class__(**{**QUALITY.__dict__, 'name': 'my_quality'})\n"
    )
    info = tmp_path / "my_stages-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-stages\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[benchcurate.stages]\nmy_quality = my_stages:STAGE\nimage_quality = my_stages:STAGE\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    found = registry.Registry(registry._installed())
    assert found["my_quality"].name == "my_quality" and "my_quality" in found
    assert found["image_quality"] is registry.STAGES["image_quality"]  # ours win a clash
    sys.modules.pop("my_stages", None)

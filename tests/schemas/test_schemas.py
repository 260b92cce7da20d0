from pathlib import Path

import pytest
from pydantic import ValidationError

from benchcurate.schemas import Drop, ImageRef, Provenance, RunConfig, Sample, Turn
from tests.factories import make_sample
from tests.helpers import resolve

MULTIVERSE_FIELDS = {
    "index",
    "image",
    "character",
    "scenario",
    "goal",
    "conversation",
    "main_goal_category",
    "sub_goal_category",
    "main_task_category",
    "sub_task_category",
    "image_main_category",
    "image_sub_category",
}


def test_sample_rejects_unknown_keys_instead_of_dropping_them():
    data = make_sample(1).model_dump()
    data["surprise"] = 1
    with pytest.raises(ValidationError, match="surprise"):
        Sample.model_validate(data)


def test_sample_round_trips_through_json():
    sample = make_sample(2, conversation=[Turn(speaker="user", utterance="What is odd in it?", level="perception")])
    assert Sample.model_validate_json(sample.model_dump_json()) == sample


@pytest.mark.parametrize("field,value", [("sha256", "abc"), ("phash", "xyz0000000000000"), ("size_bytes", -1)])
def test_image_ref_validates_hashes_and_sizes(field, value):
    good = dict(path="/x.png", sha256="a" * 64, size_bytes=10, phash="0" * 16)
    ImageRef(**good)
    with pytest.raises(ValidationError):
        ImageRef(**{**good, field: value})


def test_speaker_is_user_or_assistant_only():
    with pytest.raises(ValidationError):
        Turn(speaker="human", utterance="hi")


def test_drop_reason_must_be_stable_snake_case():
    assert Drop(reason="near_duplicate").reason == "near_duplicate"
    for bad in ("Near duplicate", "near-duplicate", "", "1st"):
        with pytest.raises(ValidationError):
            Drop(reason=bad)


def test_release_columns_cover_the_multiverse_release_fields():
    from benchcurate.curation.release.columns import features

    multiverse = features("multiverse")
    assert set(multiverse) >= MULTIVERSE_FIELDS and not {"caption", "track", "history", "rewrites"} & set(multiverse)
    turn = multiverse["conversation"].feature
    assert set(turn) == {"speaker", "utterance", "checklist"}
    assert set(turn["checklist"].feature) == {"question", "main_criteria", "sub_criteria"}


def test_the_release_schema_document_is_generated_from_the_column_table():
    from benchcurate.curation.release.columns import SCHEMA_DOC, release_schema_markdown

    assert (Path(__file__).parents[2] / SCHEMA_DOC).read_text(encoding="utf-8") == release_schema_markdown() + "\n", (
        "regenerate it: python -m benchcurate.curation.release.columns > docs/release-schema.md"
    )


@pytest.mark.parametrize("run_id", ["../escape", "a/b", "/abs", ".hidden", "", "x" * 101, "sp ace", "new\nline"])
def test_run_id_rejects_path_tricks(run_id, tmp_path):
    from benchcurate.curation.core.errors import UserError
    from benchcurate.schemas import RunOptions

    with pytest.raises(UserError, match="bad run id"):  # as the CLI and a deployment resolve it
        resolve("multiverse", tmp_path, run_id=run_id)
    with pytest.raises(ValidationError, match="bad run id"):
        RunOptions(run_id=run_id)
    good = resolve("multiverse", tmp_path, run_id="ok.run_1-2", demo=True)
    with pytest.raises(ValidationError, match="run_id"):  # run.json itself refuses it: a hand-edited file cannot
        RunConfig.model_validate({**good.model_dump(mode="json"), "run_id": run_id})
    assert not list(tmp_path.glob("**/escape"))


def test_provenance_requires_a_license_field():
    with pytest.raises(ValidationError, match="license"):
        Provenance(source_dataset="d", source_id="1")


def test_a_baseline_without_a_base_url_is_served_where_the_candidate_is():
    from benchcurate.schemas.evaluation import EvalOptions

    candidate = {"model": "m", "base_url": "http://127.0.0.1:8000/v1"}
    options = EvalOptions(release="r", candidate=candidate, judge={"model": "j"}, baseline={"model": "b"})
    assert options.baseline.base_url == "http://127.0.0.1:8000/v1"
    own = {"model": "b", "base_url": "http://127.0.0.1:9000/v1"}
    assert (
        EvalOptions(release="r", candidate=candidate, judge={"model": "j"}, baseline=own).baseline.base_url
        == own["base_url"]
    )
    assert EvalOptions(release="r", candidate=candidate, judge={"model": "j"}).baseline is None

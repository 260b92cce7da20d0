"""Checklists drafted by two models and merged, with the source model kept per item."""

import pytest

from benchcurate.curation.core.jsonl import read_samples
from benchcurate.curation.engine.runner import run_all
from benchcurate.curation.engine.store import RunStore
from benchcurate.curation.generation.checklist import merge_checklists
from benchcurate.schemas import ChecklistItem
from tests.factories import make_image, scripted_reply
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import resolve


def item(question, main="Memory"):
    return ChecklistItem(question=question, main_criteria=main, sub_criteria="s")


def test_same_questions_merge_and_name_every_model():
    merged = merge_checklists(
        [
            ("gpt", [item("Does the answer name the red bar?"), item("Is the total computed correctly?")]),
            (
                "claude",
                [
                    item("does the answer name the RED bar"),
                    item("Does it cite the source of the data?"),
                    item("Is the total computed correctly, step by step?"),
                ],
            ),
        ],
        threshold=0.5,
    )
    assert [(entry.question, entry.source_model) for entry in merged] == [
        ("Does the answer name the red bar?", "gpt+claude"),
        ("Is the total computed correctly?", "gpt+claude"),
        ("Does it cite the source of the data?", "claude"),
    ]


def test_a_high_threshold_keeps_paraphrases_apart():
    merged = merge_checklists(
        [
            ("a", [item("Is the total computed correctly?")]),
            ("b", [item("Is the total computed correctly, step by step?")]),
        ],
        threshold=1.0,
    )
    assert [entry.source_model for entry in merged] == ["a", "b"]


def by_model(body):
    """Checklists that differ by model: one shared question, one of each model's own."""
    name = body.get("response_format", {}).get("json_schema", {}).get("name")
    if name == "ChecklistReply":
        own = f"Does the answer satisfy {body['model']}'s own point?"
        return {
            "checklists": [
                {
                    "user_turn": turn,
                    "items": [
                        {
                            "question": "Does the answer use the image?",
                            "main_criteria": "Multimodal Consistency",
                            "sub_criteria": "grounding",
                        },
                        {"question": own, "main_criteria": "Helpfulness", "sub_criteria": "own"},
                    ],
                }
                for turn in range(1, 5)
            ]
        }
    return scripted_reply(body)


@pytest.mark.slow
def test_a_run_with_two_drafting_models_merges_their_checklists(tmp_path):
    for seed in range(3):
        make_image(tmp_path / "images" / f"{seed}.png", seed)
    overrides = {
        "image_quality": {"min_quality_score": 1},
        "category_min_size": {"min_items_per_category": 1},
        "checklist_generate": {"models": ["fake-vlm", "fake-vlm-mini"]},
    }
    with FakeOpenAIServer(responder=by_model) as server:
        config = resolve(
            "multiverse",
            tmp_path / "out",
            input_path=str(tmp_path / "images"),
            run_id="two",
            backend="openai",
            base_url=server.base_url,
            model="fake-vlm",
            overrides=overrides,
        )
        store = RunStore(tmp_path / "out" / "runs" / "two")
        store.save_config(config)
        run_all(store.root)
        asked = [
            request.body["model"]
            for request in server.requests
            if request.path.endswith("/chat/completions")
            and request.body["response_format"]["json_schema"]["name"] == "ChecklistReply"
        ]
    assert sorted(asked) == ["fake-vlm"] * 3 + ["fake-vlm-mini"] * 3
    final = next(store.root.glob("stages/*_checklist_generate/*/kept.jsonl"))
    for sample in read_samples(final):
        for turn in (t for t in sample.conversation if t.speaker == "user"):
            sources = {entry.question: entry.source_model for entry in turn.checklist}
            assert sources == {
                "Does the answer use the image?": "fake-vlm+fake-vlm-mini",
                "Does the answer satisfy fake-vlm's own point?": "fake-vlm",
                "Does the answer satisfy fake-vlm-mini's own point?": "fake-vlm-mini",
            }
        assert {"checklist:fake-vlm", "checklist:fake-vlm-mini"} <= set(sample.generated_by)

"""AlignMMBench-style items: seed questions, paraphrase rewrites, incoherence dialogues, imported seeds."""

import json

import pytest

from benchcurate.curation.core.jsonl import read_samples
from benchcurate.curation.engine.store import RunStore
from benchcurate.curation.importers import import_file
from benchcurate.curation.report.run import load_report
from tests.factories import make_image
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import finished_run


def final_samples(run_dir):
    return list(read_samples(RunStore(run_dir).last_kept_path()))


def test_offline_items_have_a_question_five_distinct_rewrites_and_some_dialogues(tmp_path):
    run_dir = finished_run(
        tmp_path, "offline", "alignmmbench", images=10, overrides={"dialogue_context_generate": {"share": 0.5}}
    )
    samples = final_samples(run_dir)
    singles = [s for s in samples if not s.history]
    dialogues = [s for s in samples if s.history]
    assert len(singles) == 10 and 1 <= len(dialogues) <= 9
    for sample in singles:
        texts = [rewrite.text for rewrite in sample.rewrites]
        assert len(texts) == 5 and len(set(texts)) == 5 and sample.conversation[0].utterance not in texts
        assert {rewrite.status for rewrite in sample.rewrites} == {"kept"} and sample.review.mode == "auto"
        assert sample.language == "zh" and sample.conversation[0].reference
        assert sample.categories.task_main in ("Perception & Understanding", "Reasoning & Analysis")
    for child in dialogues:
        assert child.id == f"{child.parent_id}/incoherence" and child.categories.task_sub == "Incoherence"
        assert [t.speaker for t in child.history] == ["user", "assistant"] and not child.rewrites
        assert child.history[1].utterance != child.conversation[0].reference


def echoing(body):
    """Rewrites that only repeat the question (in other case and spacing), so nothing distinct is left."""
    name = body.get("response_format", {}).get("json_schema", {}).get("name")
    if name == "ParaphraseReply":
        text = json.dumps(body["messages"], ensure_ascii=False)
        question = text.split("<question>")[1].split("</question>")[0].replace("\\n", " ").strip()
        return {"rewrites": [question.upper(), f"  {question}  ", question]}
    if name == "IncoherenceReply":
        return {
            "first_question": "q",
            "wrong_answer": "Same.",
            "what_is_wrong": "x",
            "correction_request": "Fix it.",
            "corrected_answer": "same.",
        }
    return None


@pytest.mark.slow
def test_degenerate_rewrites_and_dialogues_are_recorded_drops(tmp_path):
    backend = {"backend": "openai", "model": "fake-vlm"}
    with FakeOpenAIServer(responder=echoing) as server:
        lenient = {"paraphrase_generate": {"min_rewrites": 0}, "dialogue_context_generate": {"share": 1.0}}
        run_dir = finished_run(
            tmp_path, "api", "alignmmbench", images=10, base_url=server.base_url, overrides=lenient, **backend
        )
        stats = {stage.stage: stage for stage in load_report(run_dir).stages}
        assert stats["paraphrase_generate"].dropped == 0
        assert all(not sample.rewrites for sample in final_samples(run_dir))  # echoes of the question discarded
        assert stats["dialogue_context_generate"].by_reason == {"incoherence_degenerate": 10}
        calls = server.completions_served
        strict = {**lenient, "paraphrase_generate": {"min_rewrites": 1}}
        finished_run(tmp_path, "api", "alignmmbench", images=10, base_url=server.base_url, overrides=strict, **backend)
        assert server.completions_served == calls  # a decision parameter: stored replies replayed
    stats = {stage.stage: stage for stage in load_report(run_dir).stages}
    assert stats["paraphrase_generate"].by_reason == {"rewrites_degenerate": 10}


def test_an_imported_alignmmbench_file_keeps_its_questions_and_gets_rewrites(tmp_path):
    make_image(tmp_path / "amb" / "images" / "0.jpg", 3)
    rows = [
        {
            "question_id": "0-0",
            "image_path": "images/0.jpg",
            "history": [],
            "prompt": "图中有几个人？",
            "ref_answer": "三个人。",
            "task": "Counting",
            "category": "Perception & Understanding",
        },
        {
            "question_id": "1-0",
            "image_path": "images/missing.jpg",
            "history": [],
            "prompt": "这是什么？",
            "ref_answer": "猫。",
            "task": "Recognition",
            "category": "Perception & Understanding",
        },
    ]
    (tmp_path / "amb" / "metadata.jsonl").write_text(
        "\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8"
    )
    imported = tmp_path / "amb.jsonl"
    import_file("alignmmbench", tmp_path / "amb" / "metadata.jsonl", imported)
    run_dir = finished_run(
        tmp_path,
        "imported",
        "alignmmbench",
        images=10,
        input_path=imported,
        overrides={"dialogue_context_generate": {"share": 0.0}},
    )
    ingest = load_report(run_dir).stages[0]
    assert ingest.by_reason == {"image_missing": 1} and ingest.kept == 1
    (sample,) = final_samples(run_dir)
    assert sample.conversation[0].utterance == "图中有几个人？" and sample.conversation[0].reference == "三个人。"
    assert sample.provenance.source_dataset == "AlignMMBench" and len(sample.rewrites) == 5
    assert "seed_question" not in sample.generated_by  # the imported question was kept, not regenerated
    from benchcurate.curation.release.writer import write_release

    card = (write_release(run_dir, tmp_path / "out") / "README.md").read_text(encoding="utf-8")
    assert "language:\n- zh\n" in card  # the card's language comes from the samples, not a fixed "en"

"""ConvBench's ladder: three levels, caption, references, focus points; offline and against the loopback server."""

import itertools
import json

import pytest
from datasets import load_dataset

from benchcurate.curation.engine.runner import run_all
from benchcurate.curation.engine.store import RunStore
from benchcurate.curation.release.writer import write_release
from benchcurate.curation.report.run import load_report
from tests.factories import CONVBENCH_COLUMNS, convbench_sheet, make_image
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import finished_run, resolve


def test_offline_ladder_has_three_levels_references_and_focus_points_in_the_release(tmp_path):
    run_dir = finished_run(tmp_path, "offline", "convbench", images=4)
    release = write_release(run_dir, tmp_path / "out")
    row = load_dataset(str(release))["test"][0]
    turns = row["conversation"]  # native types: the turns' fields are read as they are, no JSON inside strings
    assert [turn["level"] for turn in turns] == ["perception", "reasoning", "creation"]
    assert all(turn["reference"] for turn in turns) and 3 <= len(turns[2]["focus_points"]) <= 6
    assert row["caption"] and [turn["speaker"] for turn in turns] == ["user"] * 3
    assert "checklist" not in turns[0] and "character" not in row and "track" not in row  # other recipes' columns
    generated = {entry["field"]: entry for entry in row["generated_by"]}
    assert {"ladder", "caption", "reference", "focus_points"} <= set(generated)
    assert {entry["backend"] for entry in generated.values()} == {"offline-heuristic"}


LADDERS = itertools.count()


def repeated_ladder(body):
    """Ladders whose reasoning turn repeats the perception turn for every other request; focus points too few."""
    name = body.get("response_format", {}).get("json_schema", {}).get("name")
    if name == "LadderReply":
        odd = next(LADDERS) % 2
        return {
            "perception": "What is on the left?",
            "reasoning": "What is on the left?" if odd else "Why there?",
            "creation": "Write a plan.",
        }
    if name == "FocusPointsReply":
        return {"points": ["Is it a plan?"]}
    return None


@pytest.mark.slow
def test_malformed_ladders_and_short_focus_lists_are_recorded_drops(tmp_path):
    with FakeOpenAIServer(responder=repeated_ladder) as server:
        run_dir = finished_run(
            tmp_path, "api", "convbench", images=4, backend="openai", base_url=server.base_url, model="fake-vlm"
        )
    stats = {stage.stage: stage for stage in load_report(run_dir).stages}
    ladder = stats["ladder_generate"]
    assert ladder.items_in == 4 and ladder.by_reason == {"ladder_malformed": 2} and ladder.kept == 2
    assert stats["focus_points_generate"].by_reason == {"too_few_focus_points": stats["focus_points_generate"].items_in}
    decisions = next(run_dir.glob("stages/*_ladder_generate/*/decisions.jsonl")).read_text().splitlines()
    assert all(json.loads(line)["backend"] == "openai" for line in decisions)


def test_an_imported_convbench_sheet_keeps_its_turns_and_gets_the_missing_parts(tmp_path):
    from benchcurate.curation.importers import import_file

    make_image(tmp_path / "visit_bench_images" / "a.png", 5)
    convbench_sheet(
        tmp_path / "ConvBench.xlsx",
        header=[*CONVBENCH_COLUMNS, "third_turn_demands"],
        rows=[[7, "a.png", "What is drawn?", "Why this colour?", "Write an ad for it.", "1. mentions colour"]],
    )
    import_file("convbench", tmp_path / "ConvBench.xlsx", tmp_path / "cb.jsonl")
    config = resolve(
        "convbench",
        tmp_path / "out",
        input_path=str(tmp_path / "cb.jsonl"),
        run_id="imp",
        overrides={"focus_points_generate": {"min_focus_points": 1}},
    )
    store = RunStore(tmp_path / "out" / "runs" / "imp")
    store.save_config(config)
    run_all(store.root)
    final = next(store.root.glob("stages/*_conversation_review/*/kept.jsonl"))
    (sample,) = [json.loads(line) for line in final.read_text().splitlines()]
    assert [turn["utterance"] for turn in sample["conversation"]] == [
        "What is drawn?",
        "Why this colour?",
        "Write an ad for it.",
    ]
    assert sample["conversation"][2]["focus_points"] == ["mentions colour"]  # the sheet's, not drafted
    assert all(turn["reference"] for turn in sample["conversation"]) and sample["caption"]
    assert "ladder" not in sample["generated_by"] and "focus_points" not in sample["generated_by"]
    # ConvBench's CC-BY-4.0 covers its annotations; its pictures are VisIT-Bench's, under terms nobody stated
    from benchcurate.curation.importers.convbench import SOURCE
    from benchcurate.curation.release.writer import write_release

    folder = write_release(store.root, tmp_path / "out")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["licenses"] == {"unknown": 1} and manifest["text_licenses"] == {"CC-BY-4.0": 1}
    card = (folder / "README.md").read_text()
    assert f"| {SOURCE} | unknown | CC-BY-4.0 | 1 |" in card and "**Unknown license** of the pictures" in card

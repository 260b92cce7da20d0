"""Importers of the four released formats, each on a small fixture written here."""

import hashlib
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.importers import ImageStore, import_file
from benchcurate.schemas import Sample
from tests.factories import convbench_sheet, make_image
from tests.helpers import compact, curate_in_process


def png_bytes(colour) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def read_samples(path):
    return [Sample.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines()]


def rejected(out):
    path = out.with_name(out.stem + ".rejected.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_multiverse_dataset_folder_maps_persona_turns_checklists_and_categories(tmp_path):
    image = png_bytes("red")
    good = {
        "index": "mv-1",
        "image": {"bytes": image, "path": "a.png"},
        "character": "A nurse.",
        "scenario": "Night shift.",
        "goal": "check a chart",
        "conversation": [
            {
                "speaker": "user",
                "utterance": "What does this show?",
                "checklist": [
                    {
                        "question": "Does it name the axis?",
                        "main_criteria": "Perceptual Understanding",
                        "sub_criteria": "axis",
                    }
                ],
            },
            {"speaker": "assistant", "utterance": "A rising line.", "checklist": []},
        ],
        "main_goal_category": "Analysis",
        "sub_goal_category": "trend",
        "main_task_category": "Chart",
        "sub_task_category": "line",
        "image_main_category": "Charts and Graphs",
        "image_sub_category": "line",
    }
    bad = {**good, "index": "mv-2", "conversation": [{"speaker": "narrator", "utterance": "x", "checklist": []}]}
    folder = tmp_path / "MultiVerse" / "data"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([good, bad]), folder / "train-00000.parquet")
    out = tmp_path / "mv.jsonl"
    summary = import_file("multiverse", tmp_path / "MultiVerse", out)
    assert summary.imported == 1 and summary.rejected == {"malformed_row": 1}
    sample = read_samples(out)[0]
    assert sample.provenance.source_dataset == "MultiVerse" and sample.provenance.source_id == "mv-1"
    # the dataset's license covers its text; its pictures come from 12 sources under their own terms
    assert sample.provenance.text_license == "CC-BY-NC-4.0" and sample.provenance.license == "unknown"
    assert sample.persona.goal == "check a chart"
    assert [t.speaker for t in sample.conversation] == ["user", "assistant"]
    assert sample.conversation[0].checklist[0].main_criteria == "Perceptual Understanding"
    assert (sample.categories.goal_main, sample.categories.image_main) == ("Analysis", "Charts and Graphs")
    stored = sample.images[0]
    assert stored.sha256 == hashlib.sha256(image).hexdigest() and open(stored.path, "rb").read() == image
    assert "narrator" in rejected(out)[0]["detail"]
    again = tmp_path / "again.jsonl"
    import_file("multiverse", tmp_path / "MultiVerse", again)
    assert read_samples(again)[0].id == sample.id  # stable ids


def test_convbench_sheet_becomes_the_three_level_ladder(tmp_path):
    make_image(tmp_path / "visit_bench_images" / "cat.png", 1)
    header = [
        "ID",
        "image_id",
        "The_first_turn_instruction",
        "The_second_turn_instruction",
        "The_third_turn_instruction",
        "third_turn_demands",
        None,
    ]
    convbench_sheet(
        tmp_path / "ConvBench.xlsx",
        header=header,
        rows=[
            [
                1,
                "cat.png",
                "What animal is it?",
                "Why is it hiding?",
                "Write a short poem about it.",
                "1. mentions the box\n2. rhymes",
                None,
            ],
            [2, "gone.png", "Describe the room.", "What time is it?", "Plan a party here.", None, None],
            [3, "cat.png", "Only one turn", None, None, None, None],
            [None, None, None, None, None, None, None],
        ],
    )
    out = tmp_path / "cb.jsonl"
    summary = import_file("convbench", tmp_path / "ConvBench.xlsx", out)
    assert summary.imported == 2 and summary.without_image == 1 and summary.rejected == {"malformed_row": 1}
    first, second = read_samples(out)
    assert [t.level for t in first.conversation] == ["perception", "reasoning", "creation"]
    assert all(t.speaker == "user" and t.reference is None for t in first.conversation)
    assert first.conversation[2].focus_points == ["mentions the box", "rhymes"]
    assert first.images and not second.images and "gone.png" in second.scores["import"]["missing_images"]
    assert rejected(out)[0]["row"] == "ConvBench.xlsx:4"


def test_a_file_that_is_not_a_workbook_is_a_user_error(tmp_path):
    (tmp_path / "x.xlsx").write_text("not a workbook")
    with pytest.raises(UserError, match="not a readable .xlsx"):
        import_file("convbench", tmp_path / "x.xlsx", tmp_path / "o.jsonl")


def test_probench_jsonl_maps_roles_strips_placeholders_and_keeps_the_track(tmp_path):
    make_image(tmp_path / "img" / "q1.png", 2)
    rows = [
        {
            "uuid": "u1",
            "chat_type": "multi-round",
            "image": ["img/q1.png"],
            "conversations": [
                {"from": "human", "value": "<|img|>What is wrong here?"},
                {"from": "gpt", "value": "The bolt is loose."},
                {"from": "human", "value": "How do I fix it?"},
            ],
        },
        {"uuid": "u2", "conversations": [{"from": "robot", "value": "hi"}]},
    ]
    path = tmp_path / "probench.jsonl"
    deep = "[" * 100_000 + "]" * 100_000  # past the JSON parser's recursion limit: one rejected row, not a crash
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n{not json\n" + deep + "\n")
    out = tmp_path / "pb.jsonl"
    summary = import_file("probench", path, out, license_id="CC-BY-4.0", image_license="CC0-1.0")
    assert summary.imported == 1 and summary.rejected == {"malformed_row": 3}
    assert "nests too deeply" in rejected(out)[-1]["detail"]
    sample = read_samples(out)[0]
    assert sample.track == "multi-round" and sample.provenance.text_license == "CC-BY-4.0"
    assert sample.provenance.license == "CC0-1.0"  # --image-license, for pictures that one license covers
    assert [t.speaker for t in sample.conversation] == ["user", "assistant", "user"]
    assert sample.conversation[0].utterance == "What is wrong here?" and len(sample.images) == 1


def test_alignmmbench_keeps_history_reference_labels_and_chinese_text(tmp_path):
    rows = [
        {
            "question_id": "00000000-0",
            "image_path": "images/000000000.jpg",
            "history": [{"user": "图里有什么？", "assistant": "一只猫。"}],
            "prompt": "你刚才说错了，请改正。",
            "ref_answer": "图中是一只狗。",
            "task": "Incoherence",
            "category": "Dialogue Context",
        },
        {
            "question_id": "00000001-0",
            "image_path": "images/1.jpg",
            "history": [],
            "prompt": "",
            "ref_answer": "x",
            "task": "OCR",
            "category": "Perception & Understanding",
        },
    ]
    path = tmp_path / "metadata.jsonl"
    path.write_text("\n".join(json.dumps(row, ensure_ascii=False) for row in rows), encoding="utf-8")
    out = tmp_path / "amb.jsonl"
    summary = import_file("alignmmbench", path, out)
    assert summary.imported == 1 and summary.without_image == 1 and summary.rejected == {"malformed_row": 1}
    sample = read_samples(out)[0]
    assert [t.utterance for t in sample.history] == ["图里有什么？", "一只猫。"] and sample.language == "zh"
    assert sample.conversation[0].reference == "图中是一只狗。"
    assert (sample.categories.task_main, sample.categories.task_sub) == ("Dialogue Context", "Incoherence")


def test_image_store_writes_each_image_once(tmp_path):
    store = ImageStore(tmp_path / "images")
    first, second = store.from_bytes(png_bytes("blue"), ".png"), store.from_bytes(png_bytes("blue"), ".png")
    assert first == second and len(list((tmp_path / "images").iterdir())) == 1


def test_the_import_command_reports_what_it_could_not_map(tmp_path):
    path = tmp_path / "probench.jsonl"
    path.write_text(json.dumps({"uuid": "u", "conversations": [{"from": "human", "value": "q"}]}) + "\n[1, 2]\n")
    result = curate_in_process(["import", "probench", str(path), "--out", str(tmp_path / "o.jsonl")], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "imported 1 samples" in result.stdout and "could not map 1 rows (malformed_row 1)" in result.stdout
    table = curate_in_process(["stats", str(tmp_path / "o.jsonl")], tmp_path)
    assert table.returncode == 0 and "| dialogues | 1 |" in compact(table.stdout)
    missing = curate_in_process(["import", "mmdu", str(path), "--out", str(tmp_path / "o.jsonl")], tmp_path)
    assert missing.returncode == 2 and "choose one of" in missing.stderr

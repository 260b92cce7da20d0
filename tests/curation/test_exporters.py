"""Exporters to the seed formats, each read back by our importer of the same name."""

import json
from pathlib import Path

import pyarrow.parquet as pq
from openpyxl import load_workbook

from benchcurate.curation.core.fingerprint import sha256_file
from benchcurate.curation.core.jsonl import read_samples
from benchcurate.curation.engine.runner import run_all
from benchcurate.curation.importers import import_file
from benchcurate.curation.release.exporters import EXPORTERS
from benchcurate.curation.release.writer import final_samples
from benchcurate.schemas import Categories, Rewrite, Turn
from tests.factories import CONVBENCH_COLUMNS, convbench_sheet, make_image, make_sample
from tests.helpers import SMALL, curate_in_process, finished_run, prepared_run


def round_trip(kind, samples, tmp_path):
    written = EXPORTERS[kind](samples, tmp_path / kind)
    source = {"multiverse": tmp_path / kind, "convbench": written, "alignmmbench": written}[kind]
    summary = import_file(kind, source, tmp_path / f"{kind}.jsonl")
    return summary, list(read_samples(tmp_path / f"{kind}.jsonl"))


def test_multiverse_export_has_exactly_the_released_fields_and_reads_back(tmp_path):
    run_dir = prepared_run(tmp_path, "mv", overrides=SMALL)
    run_all(run_dir)
    samples, _ = final_samples(run_dir)
    summary, back = round_trip("multiverse", samples, tmp_path)
    columns = pq.read_schema(next((tmp_path / "multiverse" / "data").glob("*.parquet"))).names
    assert columns == [
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
    ]
    assert summary.imported == len(samples) and not summary.rejected
    by_id = {s.provenance.source_id: s for s in back}
    for sample in samples:
        again = by_id[sample.id]
        assert [(t.speaker, t.utterance) for t in again.conversation] == [
            (t.speaker, t.utterance) for t in sample.conversation
        ]
        assert [c.question for t in again.conversation for c in t.checklist] == [
            c.question for t in sample.conversation for c in t.checklist
        ]
        assert again.persona == sample.persona and again.images[0].sha256 == sample.images[0].sha256


def test_convbench_export_reads_back_with_captions_references_and_focus_points(tmp_path):
    samples, _ = final_samples(finished_run(tmp_path, "cbx", "convbench", images=4))
    summary, back = round_trip("convbench", samples, tmp_path)
    assert summary.imported == len(samples) and summary.without_image == 0
    for original, again in zip(samples, back):
        assert [t.utterance for t in again.conversation] == [t.utterance for t in original.conversation]
        assert [t.reference for t in again.conversation] == [t.reference for t in original.conversation]
        assert again.conversation[2].focus_points == original.conversation[2].focus_points
        assert again.caption == original.caption


def test_alignmmbench_export_reads_back_with_history_and_labels(tmp_path):
    samples, _ = final_samples(
        finished_run(
            tmp_path, "ambx", "alignmmbench", images=10, overrides={"dialogue_context_generate": {"share": 0.5}}
        )
    )
    summary, back = round_trip("alignmmbench", samples, tmp_path)
    kept = {sample.id: [r.text for r in sample.rewrites if r.status == "kept"] for sample in samples}
    assert summary.imported == sum(1 + len(texts) for texts in kept.values()) and summary.without_image == 0
    by_id = {s.provenance.source_id: s for s in back}
    for sample in samples:
        # the seed as <id>-0, each kept rewrite as a row of its own with the same reference, history and labels
        variants = [by_id[f"{sample.id}-{k}"] for k in range(len(kept[sample.id]) + 1)]
        assert [v.conversation[0].utterance for v in variants] == [sample.conversation[0].utterance, *kept[sample.id]]
        for again in variants:
            assert again.conversation[0].reference == sample.conversation[0].reference
            assert [t.utterance for t in again.history] == [t.utterance for t in sample.history]
            assert (again.categories.task_main, again.categories.task_sub) == (
                sample.categories.task_main,
                sample.categories.task_sub,
            )
            assert again.images[0].sha256 == sample.images[0].sha256


def test_the_export_command(tmp_path):
    run_dir = finished_run(tmp_path, "cli", "convbench", images=4)
    done = curate_in_process(["export", "convbench", str(run_dir), "--to", str(tmp_path / "cb")], tmp_path)
    assert done.returncode == 0 and (tmp_path / "cb" / "ConvBench.xlsx").exists(), done.stderr
    wrong = curate_in_process(["export", "mmdu", str(run_dir), "--to", str(tmp_path / "x")], tmp_path)
    assert wrong.returncode == 2 and "choose one of" in wrong.stderr
    multiverse_run = prepared_run(tmp_path, "mv", overrides=SMALL)
    run_all(multiverse_run)
    mismatch = curate_in_process(["export", "convbench", str(multiverse_run), "--to", str(tmp_path / "y")], tmp_path)
    assert mismatch.returncode == 2 and "ConvBench needs exactly 3" in mismatch.stderr


def real_convbench_sheet(folder: Path) -> Path:
    """A sheet laid out like the released ConvBench.xlsx: its five columns, stray `Unnamed:` ones, IDs with
    gaps, trailing white space in the text, VisIT-Bench file names."""

    images = folder / "visit_bench_images"
    rows = [
        (
            2,
            "208_tested_skill_pop_culture_dune.png",
            "Who is on the poster?  ",
            "Why do they look worried? ",
            "Write a tagline for it.\n",
        ),
        (
            3,
            "17_tested_skill_counting_apples.jpg",
            "How many apples are there?",
            "Which one is ripest?",
            "Write a recipe that uses them.  ",
        ),
        (
            6,
            "208_tested_skill_pop_culture_dune.png",
            "What colour is the sky?",
            "What time of day is it?",
            "Describe the scene as a poem.",
        ),
        (
            10,
            "5_tested_skill_chart_sales.png",
            " What does the chart show?",
            "Which quarter grew most?",
            "Write a short memo about it.",
        ),
    ]
    for seed, name in enumerate(sorted({row[1] for row in rows})):
        make_image(images / name, seed)
    return convbench_sheet(
        folder / "ConvBench.xlsx",
        header=[*CONVBENCH_COLUMNS, "Unnamed: 5", "Unnamed: 6"],
        rows=[[*row, None, None] for row in rows],
    )


def test_convbench_export_has_the_columns_its_evaluator_reads_never_empty(tmp_path):
    """convbencheval.py reads First/Second/Third_turn_instruction_category and stops on a missing or empty one."""
    original = real_convbench_sheet(tmp_path / "release")  # the released layout: no category columns
    import_file("convbench", original, tmp_path / "cb.jsonl")
    samples = list(read_samples(tmp_path / "cb.jsonl"))
    labelled = samples[0].model_copy(
        update={
            "conversation": [
                turn.model_copy(update={"task_category": name})
                for turn, name in zip(
                    samples[0].conversation, ("Celebrity Recognition", "Visual Commonsense", "Slogan Writing")
                )
            ]
        }
    )
    exported = EXPORTERS["convbench"]([labelled, *samples[1:]], tmp_path / "exported")
    rows = list(load_workbook(exported, read_only=True).active.iter_rows(values_only=True))
    header = list(rows[0])
    for column in (
        "First_turn_instruction_category",
        "Second_turn_instruction_category",
        "Third_turn_instruction_category",
        "instruction-conditioned-caption",
        "first_turn_answer",
        "second_turn_answer",
        "third_turn_answer",
        "third_turn_demands",
    ):
        assert column in header, column
    categories = [
        [row[header.index(f"{o}_turn_instruction_category")] for o in ("First", "Second", "Third")] for row in rows[1:]
    ]
    assert categories[0] == ["Celebrity Recognition", "Visual Commonsense", "Slogan Writing"]
    assert categories[1:] == [["Perception", "Reasoning", "Creation"]] * 3  # no label: the capability level
    import_file("convbench", exported, tmp_path / "again.jsonl")
    back = list(read_samples(tmp_path / "again.jsonl"))
    assert [t.task_category for t in back[0].conversation] == [
        "Celebrity Recognition",
        "Visual Commonsense",
        "Slogan Writing",
    ]


def test_alignmmbench_export_writes_six_rows_per_image_like_the_release(tmp_path):
    """The released metadata.jsonl has <id>-0 (the seed) to <id>-5 (its rewrites) per image."""
    image = make_image(tmp_path / "cat.png", 3)
    sample = make_sample(
        1,
        images=[make_sample(1).images[0].model_copy(update={"path": str(image), "sha256": sha256_file(image)})],
        conversation=[Turn(speaker="user", utterance="图中有几只猫？", reference="两只。", task_category="Counting")],
        rewrites=[Rewrite(text=f"改写{k}", language="zh", status="kept") for k in range(5)]
        + [Rewrite(text="被拒绝的改写", language="zh", status="rejected")],
        categories=Categories(task_main="Perception & Understanding", task_sub="Counting"),
        language="zh",
    )
    written = EXPORTERS["alignmmbench"]([sample], tmp_path / "out")
    lines = [json.loads(line) for line in written.read_text(encoding="utf-8").splitlines()]
    assert [line["question_id"] for line in lines] == [f"{sample.id}-{k}" for k in range(6)]
    assert [line["prompt"] for line in lines] == ["图中有几只猫？", *(f"改写{k}" for k in range(5))]
    assert {line["ref_answer"] for line in lines} == {"两只。"} and len({line["image_path"] for line in lines}) == 1
    assert set(lines[0]) == {"question_id", "image_path", "history", "prompt", "ref_answer", "task", "category"}


def sheet_rows(path: Path) -> dict[object, list[object]]:
    rows = list(load_workbook(path, read_only=True).active.iter_rows(values_only=True))
    return {row[0]: list(row[:5]) for row in rows[1:]}


def test_a_convbench_sheet_comes_back_cell_for_cell_with_its_ids_image_names_and_white_space(tmp_path):
    original = real_convbench_sheet(tmp_path / "release")
    summary = import_file("convbench", original, tmp_path / "cb.jsonl")
    assert summary.imported == 4 and summary.without_image == 0
    run_dir = finished_run(tmp_path, "cb", "convbench", input_path=tmp_path / "cb.jsonl")
    samples, _ = final_samples(run_dir)
    assert len(samples) == 4
    exported = EXPORTERS["convbench"](samples, tmp_path / "exported")
    assert sheet_rows(exported) == sheet_rows(original)  # IDs 2, 3, 6, 10; names and text as they were
    assert sorted(path.name for path in (tmp_path / "exported" / "visit_bench_images").iterdir()) == sorted(
        path.name for path in (tmp_path / "release" / "visit_bench_images").iterdir()
    )


def test_alignmmbench_prompts_keep_their_white_space_through_import_and_export(tmp_path):
    (tmp_path / "images").mkdir()
    make_image(tmp_path / "images" / "000000001.jpg", 1)
    rows = [
        {
            "question_id": "00000001-0",
            "image_path": "images/000000001.jpg",
            "history": [],
            "prompt": "图中有几只猫？ ",
            "ref_answer": "两只。",
            "task": "Counting",
            "category": "感知与理解",
        }
    ]
    (tmp_path / "metadata.jsonl").write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    import_file("alignmmbench", tmp_path / "metadata.jsonl", tmp_path / "amb.jsonl")
    samples = list(read_samples(tmp_path / "amb.jsonl"))
    assert samples[0].conversation[0].utterance == "图中有几只猫？ "
    written = EXPORTERS["alignmmbench"](samples, tmp_path / "out")
    back = [json.loads(line) for line in written.read_text().splitlines()]
    assert back[0]["question_id"] == "00000001-0" and back[0]["prompt"] == "图中有几只猫？ "
    assert back[0]["image_path"] == "images/000000001.jpg"


def test_self_correction_dialogues_and_imported_rewrites_have_ids_and_provenance_of_their_own(tmp_path):
    """An imported seed question with its rewrites, each then given a self-correction dialogue: every derived
    sample names its parent, and the AlignMMBench export gives every question an id of its own."""
    (tmp_path / "images").mkdir()
    rows = []
    for k in range(4):
        make_image(tmp_path / "images" / f"00000000{k}.jpg", k)
        rows += [
            {
                "question_id": f"0000000{k}-{v}",
                "image_path": f"images/00000000{k}.jpg",
                "history": [],
                "prompt": f"图中有几只猫？第{k}张，第{v}种问法",
                "ref_answer": f"{k}只。",
                "task": "Counting",
                "category": "感知与理解",
            }
            for v in range(2)
        ]
    (tmp_path / "metadata.jsonl").write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    import_file("alignmmbench", tmp_path / "metadata.jsonl", tmp_path / "amb.jsonl")
    imported = {sample.provenance.source_id: sample for sample in read_samples(tmp_path / "amb.jsonl")}
    assert imported["00000002-1"].provenance.derived_from == "00000002-0"  # a rewrite names its seed
    assert imported["00000002-0"].provenance.derived_from is None
    run_dir = finished_run(
        tmp_path,
        "amb",
        "alignmmbench",
        input_path=tmp_path / "amb.jsonl",
        overrides={"dialogue_context_generate": {"share": 1.0}},
    )
    samples, _ = final_samples(run_dir)
    parents = {sample.id: sample for sample in samples}
    children = [sample for sample in samples if sample.parent_id]
    assert children
    for child in children:
        parent = parents[child.parent_id]
        assert child.id == f"{parent.id}/incoherence"
        assert child.provenance.source_id == f"{parent.provenance.source_id}/incoherence"
        assert child.provenance.derived_from == parent.provenance.source_id
    written = EXPORTERS["alignmmbench"](samples, tmp_path / "out")
    ids = [json.loads(line)["question_id"] for line in written.read_text(encoding="utf-8").splitlines()]
    assert len(ids) == len(set(ids)) > len(parents) - len(children)


def test_the_convbench_sheet_stores_text_that_looks_like_a_formula_as_text(tmp_path):
    image = make_image(tmp_path / "a.png", 1)
    turns = [
        Turn(speaker="user", utterance=text, reference=reference, level=level)
        for text, reference, level in (
            ('=HYPERLINK("http://x","y")', "+1", "perception"),
            ("@SUM(1,1)", "-1", "reasoning"),
            ("Write a poem.", "=1+1", "creation"),
        )
    ]
    sample = make_sample(
        1,
        images=[make_sample(1).images[0].model_copy(update={"path": str(image), "sha256": sha256_file(image)})],
        conversation=turns,
        caption="=2*3",
    )
    written = EXPORTERS["convbench"]([sample], tmp_path / "cb")
    cells = [cell for row in load_workbook(written).active.iter_rows() for cell in row]
    assert not [cell.coordinate for cell in cells if cell.data_type == "f"]
    risky = [cell for cell in cells if isinstance(cell.value, str) and cell.value[:1] in "=+-@"]
    assert len(risky) == 6 and all(cell.data_type == "s" and cell.quotePrefix for cell in risky)
    summary, back = round_trip("convbench", [sample], tmp_path)
    assert back[0].conversation[0].utterance == '=HYPERLINK("http://x","y")' and back[0].caption == "=2*3"

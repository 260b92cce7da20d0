"""Exporters to the seed formats, each read back by our importer of the same name."""

import pyarrow.parquet as pq

from benchcurate.curation.importers import import_file
from benchcurate.curation.jsonl import read_samples
from benchcurate.curation.release.exporters import EXPORTERS
from benchcurate.curation.release.writer import final_samples
from benchcurate.curation.runner import run_all
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
    assert columns == ["index", "image", "character", "scenario", "goal", "conversation", "main_goal_category",
                       "sub_goal_category", "main_task_category", "sub_task_category", "image_main_category",
                       "image_sub_category"]
    assert summary.imported == len(samples) and not summary.rejected
    by_id = {s.provenance.source_id: s for s in back}
    for sample in samples:
        again = by_id[sample.id]
        assert [(t.speaker, t.utterance) for t in again.conversation] == [(t.speaker, t.utterance)
                                                                           for t in sample.conversation]
        assert [c.question for t in again.conversation for c in t.checklist] == \
            [c.question for t in sample.conversation for c in t.checklist]
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
    samples, _ = final_samples(finished_run(tmp_path, "ambx", "alignmmbench", images=10, overrides={"dialogue_context_generate": {"share": 0.5}}))
    summary, back = round_trip("alignmmbench", samples, tmp_path)
    assert summary.imported == len(samples) and summary.without_image == 0
    by_id = {s.provenance.source_id: s for s in back}
    for sample in samples:
        again = by_id[sample.id]
        assert again.conversation[0].utterance == sample.conversation[0].utterance
        assert again.conversation[0].reference == sample.conversation[0].reference
        assert [t.utterance for t in again.history] == [t.utterance for t in sample.history]
        assert (again.categories.task_main, again.categories.task_sub) == (sample.categories.task_main,
                                                                           sample.categories.task_sub)


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

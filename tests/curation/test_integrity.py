"""Stored outputs are used only as they were written: an edited, truncated or deleted stage output is noticed,
said, and redone; a release never reads a changed one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.engine.runner import run_all
from benchcurate.curation.engine.store import RunStore
from benchcurate.curation.release.writer import write_release
from tests.helpers import SMALL, finished_run


class Notes:
    """A progress display that keeps the warnings."""

    def __init__(self) -> None:
        self.warnings: list[tuple[str, str]] = []

    def start(self, stage, index, total):
        pass

    def advance(self, count):
        pass

    def finish(self, stats, skipped):
        pass

    def finish_waiting(self, stage, detail):
        pass

    def warn(self, stage: str, message: str) -> None:
        self.warnings.append((stage, message))


def output(run_dir: Path, stage: str, name: str) -> Path:
    return next(path for path in run_dir.glob(f"stages/*_{stage}/[0-9a-f]*/{name}"))


def kept_ids(run_dir: Path) -> list[str]:
    return [sample.id for sample in RunStore(run_dir).kept(len(RunStore(run_dir).chain()) - 1)]


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return finished_run(tmp_path, "sealed", overrides=SMALL)


def test_a_line_removed_from_a_finished_stage_is_noticed_said_and_redone(run_dir):
    expected = kept_ids(run_dir)
    kept = output(run_dir, "image_quality", "kept.jsonl")
    lines = kept.read_text().splitlines(keepends=True)
    kept.write_text("".join(lines[:1] + lines[2:]))  # one sample gone, no decision says why
    notes = Notes()
    run_all(run_dir, notes)
    assert notes.warnings == [
        ("image_quality", "its stored output changed since it was written (kept.jsonl); redoing it")
    ]
    assert len(kept.read_text().splitlines()) == len(lines) and kept_ids(run_dir) == expected


def test_edited_scores_in_a_work_folder_are_recomputed(run_dir):
    work = next(run_dir.glob("stages/*_image_quality/work-*/work.jsonl"))
    records = [json.loads(line) for line in work.read_text().splitlines()]
    original = work.read_text()
    records[0]["scores"]["values"]["quality_score"] = 1
    work.write_text("".join(json.dumps(record) + "\n" for record in records))
    decisions = output(run_dir, "image_quality", "decisions.jsonl")
    decisions.write_text(decisions.read_text().replace('"kept":true', '"kept":false', 1))
    notes = Notes()
    run_all(run_dir, notes)
    assert [stage for stage, _ in notes.warnings] == ["image_quality", "image_quality"]
    assert "scores or generated items changed" in notes.warnings[1][1]
    assert work.read_text() == original


def test_a_release_refuses_a_final_output_changed_since_it_was_written(run_dir, tmp_path):
    final = RunStore(run_dir).last_kept_path()
    final.write_text(final.read_text().splitlines(keepends=True)[0])  # truncated to one sample
    with pytest.raises(
        UserError, match="stored output .* changed since it was written; rerun `curate run multiverse --run-id sealed`"
    ):
        write_release(run_dir, tmp_path / "out")
    run_all(run_dir)
    release = write_release(run_dir, tmp_path / "out")
    assert json.loads((release / "manifest.json").read_text())["sample_count"] == len(kept_ids(run_dir)) > 1

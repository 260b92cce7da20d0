"""Files written whole (`replacing`) and partial folders cleared before they are filled."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from benchcurate.curation.core.files import PARTIAL_SUFFIX, fresh_partial_folder, replacing


@pytest.mark.parametrize("error", [ValueError("bad row"), KeyboardInterrupt()])
def test_a_block_that_raises_leaves_the_target_as_it_was_and_no_partial(tmp_path, error):
    target = tmp_path / "rows.jsonl"
    target.write_text("old\n", encoding="utf-8")
    with pytest.raises(type(error)), replacing(target) as partial:
        partial.write_text("new, half written", encoding="utf-8")
        raise error
    assert target.read_text(encoding="utf-8") == "old\n"
    assert [path.name for path in tmp_path.iterdir()] == ["rows.jsonl"]


def test_a_failed_rename_removes_the_partial_and_says_why(tmp_path):
    target = tmp_path / "taken"
    target.mkdir()  # a folder where the file should go
    with pytest.raises(IsADirectoryError), replacing(target) as partial:
        partial.write_text("whole", encoding="utf-8")
    assert [path.name for path in tmp_path.iterdir()] == ["taken"] and target.is_dir()


def test_a_block_that_ends_replaces_the_target_through_a_partial_beside_it(tmp_path):
    target = tmp_path / "state.json"
    target.write_text("old", encoding="utf-8")
    with replacing(target) as partial:
        partial.write_text("new", encoding="utf-8")
        assert partial.parent == tmp_path and partial.name.startswith("state.json.")
        assert partial.name.endswith(PARTIAL_SUFFIX)  # what seal and the cleanups pass over
        assert target.read_text(encoding="utf-8") == "old"  # readers see the old file until the block ends
    assert target.read_text(encoding="utf-8") == "new" and not partial.exists()


def test_two_threads_writing_one_target_each_write_a_whole_file_and_the_last_rename_wins(tmp_path):
    target = tmp_path / "hashes.jsonl"
    contents = {"first": b"a" * 1_000_000, "second": b"b" * 1_000_000}
    both_half_written = threading.Barrier(2)
    first_renamed = threading.Event()
    partials: dict[str, str] = {}

    def write(name: str) -> bytes | None:
        with replacing(target) as partial:
            partials[name] = partial.name
            with open(partial, "wb") as handle:
                half = len(contents[name]) // 2
                handle.write(contents[name][:half])
                handle.flush()
                both_half_written.wait(10)  # a shared partial would now be truncated by one and mixed
                handle.write(contents[name][half:])
            if name == "second":
                assert first_renamed.wait(10)  # the second renames last
        if name == "first":
            seen = target.read_bytes()
            first_renamed.set()
            return seen
        return None

    with ThreadPoolExecutor(2) as pool:
        seen_after_first, _ = pool.map(write, ["first", "second"])
    assert seen_after_first == contents["first"]
    assert target.read_bytes() == contents["second"]
    assert partials["first"] != partials["second"]
    assert [path.name for path in tmp_path.iterdir()] == ["hashes.jsonl"]


def test_a_fresh_partial_folder_is_empty_whatever_a_killed_attempt_left(tmp_path):
    folder = tmp_path / "work-abc"
    stale = tmp_path / f"work-abc{PARTIAL_SUFFIX}"
    (stale / "nested").mkdir(parents=True)
    (stale / "work.jsonl").write_text("half a row", encoding="utf-8")
    partial = fresh_partial_folder(folder)
    assert partial == stale and partial.is_dir() and not any(partial.iterdir())
    assert not folder.exists()

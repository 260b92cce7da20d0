"""Bad input as a user hands it to `curate`: odd file names, manifests with impossible paths or huge fields, files
that are too large, text that is not UTF-8, --set values built to hurt, folders without images. Each is a per-row
drop with its reason or a one-line error (exit 2), never a traceback or a run that hangs."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from benchcurate.curation.core.decode import IMAGE_EXTENSIONS
from benchcurate.curation.engine.runner import run_stage
from benchcurate.curation.images.ingest import IngestConfig
from benchcurate.flows.options import MAX_SET_VALUE_CHARS, MAX_SET_VALUE_DEPTH
from tests.factories import convbench_sheet, make_image, make_sample, png_header_only
from tests.helpers import CURATE, MULTIVERSE_STAGES, curate_in_process, prepared_run, run_curate, stage_outputs

SMALL_SIZE = (64, 48)
RUN = ["run", "multiverse", "--no-release", "--progress", "none"]
BAD_NAME = b"bad\xff.png"  # not UTF-8
DEFAULT_FIELD_LIMIT = IngestConfig.model_fields["max_field_chars"].default
MAX_PIXELS = 100_000  # above the small pictures, below a 400x300 one


def error_lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The single `error:` line of a command that failed as a user mistake (exit 2, no traceback)."""
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr[-3000:]
    return lines[0]


def write_bad_name(folder: Path, name: bytes, data: bytes) -> None:
    """A file whose name is the raw bytes `name` (os.open takes bytes; a str path could not say it)."""
    handle = os.open(os.fsencode(folder) + b"/" + name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(handle, data)
    finally:
        os.close(handle)


def save_tiff_16bit_big_endian(path: Path, size: tuple[int, int]) -> Path:
    values = (np.arange(size[0] * size[1], dtype=np.uint32).reshape(size[1], size[0]) * 37 % 65536).astype(">u2")
    image = Image.frombytes("I;16B", size, values.tobytes())
    assert image.mode == "I;16B"
    image.save(path)
    assert Image.open(path).mode == "I;16B"  # as stored, not converted on the way
    return path


def drops(decisions: list[dict]) -> dict[str, dict]:
    """path -> the decision that dropped it (ingest and image_phash record the item's own path in the detail)."""
    return {row["detail"]["path"]: row for row in decisions if not row["kept"]}


def kept_paths(kept: list[dict]) -> set[str]:
    return {row["provenance"]["source_path"] for row in kept}


# --- one run over a folder of odd files ------------------------------------------------------------


@pytest.fixture(scope="module")
def odd_folder(prefect_env, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess, dict]:
    """One `curate run` on a folder holding a file with a non-UTF-8 name, manifest rows with an oversized and a
    non-text field, a link to a 1 TiB sparse file, .pgm/.pbm/16-bit TIFF pictures, an unknown suffix and two
    pictures over image_phash.max_pixels: (input folder, the finished process, stage -> (decisions, kept))."""
    root = tmp_path_factory.mktemp("odd")
    folder = root / "in"
    for seed, name in enumerate(["a.png", "b.png", "attributed.png", "licensed.png"]):
        make_image(folder / name, seed, SMALL_SIZE)
    write_bad_name(folder, BAD_NAME, make_image(root / "source-of-bad-name.png", 10, SMALL_SIZE).read_bytes())
    Image.open(make_image(root / "grey.png", 11, SMALL_SIZE)).convert("L").save(folder / "grey.pgm")
    Image.open(make_image(root / "mono.png", 12, SMALL_SIZE)).convert("1").save(folder / "mono.pbm")
    save_tiff_16bit_big_endian(folder / "deep.tif", SMALL_SIZE)
    (folder / "notes.xyz").write_bytes(make_image(root / "notes.png", 13, SMALL_SIZE).read_bytes())
    with open(root / "sparse.bin", "wb") as sparse:  # read whole, it would not fit in memory
        sparse.truncate(1 << 40)
    (folder / "huge.png").symlink_to(root / "sparse.bin")
    make_image(folder / "wide.png", 14, (400, 300))
    (folder / "giant.png").write_bytes(png_header_only(20_000, 10_000))
    rows = [
        {"path": "attributed.png", "license": "CC0-1.0", "attribution": "x" * 70_000},
        {"path": "licensed.png", "license": ["CC0-1.0"]},
    ]
    (folder / "manifest.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = run_curate(
        [*RUN, "--input", str(folder), "--run-id", "odd", "--set", f"image_phash.max_pixels={MAX_PIXELS}"],
        root,
        prefect_env,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    return folder, result, stage_outputs(root / "outputs" / "runs" / "odd")


@pytest.mark.slow  # a whole run, recorded by the Prefect server
def test_a_file_name_that_is_not_utf8_is_dropped_as_unreadable_name_and_the_other_images_kept(odd_folder):
    _, _, stages = odd_folder
    decisions, kept = stages["image_ingest"]
    shown = BAD_NAME.decode("utf-8", "backslashreplace")  # the name as it can be written out: bad\xff.png
    assert drops(decisions)[shown]["reason"] == "unreadable_name"
    assert "not valid UTF-8" in drops(decisions)[shown]["detail"]["error"]
    assert {"a.png", "b.png"} <= kept_paths(kept) and shown not in kept_paths(kept)
    assert list(stages) == MULTIVERSE_STAGES  # the run went on to the end


@pytest.mark.slow  # a whole run, recorded by the Prefect server
def test_manifest_fields_over_the_default_limit_or_not_text_drop_their_row(odd_folder):
    _, _, stages = odd_folder
    decisions, kept = stages["image_ingest"]
    too_large = drops(decisions)["attributed.png"]
    assert too_large["reason"] == "field_too_large"
    error = too_large["detail"]["error"]
    assert f"attribution has {70_000:,} characters (the limit is {DEFAULT_FIELD_LIMIT:,})" in error
    invalid = drops(decisions)["licensed.png"]
    assert invalid["reason"] == "field_invalid" and "license is of type list" in invalid["detail"]["error"]
    assert not {"attributed.png", "licensed.png"} & kept_paths(kept)
    # the oversized field is recorded cut, not whole: no stored file of the run holds it
    run_files = [path for path in (odd_folder[0].parent / "outputs" / "runs" / "odd").rglob("*") if path.is_file()]
    assert not [path for path in run_files if b"x" * 10_000 in path.read_bytes()]
    assert [path for path in run_files if f"[{70_000:,} characters, over the limit; cut]".encode() in path.read_bytes()]


@pytest.mark.slow  # a whole run, recorded by the Prefect server
def test_a_link_to_a_file_over_max_file_bytes_is_dropped_without_being_read(odd_folder):
    folder, _, stages = odd_folder
    decisions, _ = stages["image_ingest"]
    dropped = drops(decisions)["huge.png"]
    limit = IngestConfig.model_fields["max_file_bytes"].default
    assert dropped["reason"] == "file_too_large"
    assert dropped["detail"]["error"] == f"{(folder / 'huge.png').stat().st_size:,} bytes (the limit is {limit:,})"


@pytest.mark.slow  # a whole run, recorded by the Prefect server
def test_pgm_pbm_and_16bit_tiff_are_decoded_and_an_unknown_suffix_is_unsupported_extension(odd_folder):
    _, _, stages = odd_folder
    ingest_decisions, _ = stages["image_ingest"]
    assert drops(ingest_decisions)["notes.xyz"]["reason"] == "unsupported_extension"
    phash_decisions, phash_kept = stages["image_phash"]
    assert {"grey.pgm", "mono.pbm", "deep.tif"} <= kept_paths(phash_kept), drops(phash_decisions)
    tiff = next(row for row in phash_kept if row["provenance"]["source_path"] == "deep.tif")
    assert (tiff["images"][0]["width"], tiff["images"][0]["height"]) == SMALL_SIZE and tiff["images"][0]["phash"]


@pytest.mark.slow  # a whole run, recorded by the Prefect server
def test_image_too_large_cites_the_configured_max_pixels_not_pillows_limit(odd_folder):
    _, _, stages = odd_folder
    dropped = drops(stages["image_phash"][0])
    pillow_limit = 2 * Image.MAX_IMAGE_PIXELS  # past which Pillow itself refuses to open a file
    for name in ("wide.png", "giant.png"):
        assert dropped[name]["reason"] == "image_too_large"
        error = dropped[name]["detail"]["error"]
        assert f"the {MAX_PIXELS:,}-pixel limit (max_pixels)" in error, error
        assert str(pillow_limit) not in error and f"{pillow_limit:,}" not in error, error
    assert dropped["wide.png"]["detail"]["error"].startswith("400x300 ")
    assert f"{20_000 * 10_000:,} pixels" in dropped["giant.png"]["detail"]["error"]


# --- one run over a manifest whose rows are wrong in every way -------------------------------------


@pytest.mark.slow  # a whole run, recorded by the Prefect server
def test_manifest_rows_with_impossible_paths_or_over_the_limits_are_dropped_row_by_row(prefect_env, tmp_path):
    pictures = tmp_path / "pictures"
    small = [make_image(pictures / f"{name}.png", seed, SMALL_SIZE) for seed, name in enumerate(["ok", "credited"])]
    big = make_image(pictures / "big.png", 5, (320, 240))
    limit = (max(path.stat().st_size for path in small) + big.stat().st_size) // 2
    assert max(path.stat().st_size for path in small) <= limit < big.stat().st_size
    long_part = "n" * 300 + ".png"
    rows = [
        {"path": "pictures/ok.png", "source": "short"},  # 1 kept
        {"path": f"pictures/{long_part}"},  # 2 a component no file system takes
        {"path": 12},  # 3 not text
        {"path": ["pictures/ok.png"]},  # 4 not text
        {"path": "pictures/credited.png", "attribution": "y" * 150},  # 5 over max_field_chars=100
        {"path": "pictures/big.png"},
    ]  # 6 over max_file_bytes
    manifest = tmp_path / "list.jsonl"
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = run_curate(
        [
            *RUN,
            "--input",
            str(manifest),
            "--run-id",
            "rows",
            "--set",
            "image_ingest.max_field_chars=100",
            "--set",
            f"image_ingest.max_file_bytes={limit}",
        ],
        tmp_path,
        prefect_env,
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stdout[-2000:] + result.stderr[-3000:]
    decisions, kept = stage_outputs(tmp_path / "outputs" / "runs" / "rows")["image_ingest"]
    dropped = drops(decisions)
    assert kept_paths(kept) == {"list.jsonl:1"}
    assert {row: dropped[f"list.jsonl:{row}"]["reason"] for row in range(2, 7)} == {
        2: "path_invalid",
        3: "path_invalid",
        4: "path_invalid",
        5: "field_too_large",
        6: "file_too_large",
    }
    assert f"{len(long_part.encode())} bytes" in dropped["list.jsonl:2"]["detail"]["error"]
    assert "path is of type int" in dropped["list.jsonl:3"]["detail"]["error"]
    assert "path is of type list" in dropped["list.jsonl:4"]["detail"]["error"]
    assert "150 characters (the limit is 100)" in dropped["list.jsonl:5"]["detail"]["error"]
    assert dropped["list.jsonl:6"]["detail"]["error"] == f"{big.stat().st_size:,} bytes (the limit is {limit:,})"


# --- text that is not UTF-8 --------------------------------------------------------------------------


@pytest.mark.slow  # a whole run, recorded by the Prefect server
def test_a_manifest_line_that_is_not_utf8_is_a_one_line_error_naming_file_and_line(prefect_env, tmp_path):
    """(A CSV or JSONL manifest given as --input is read by the same code: tests/curation/test_input_limits.py.)"""
    folder = tmp_path / "in"
    make_image(folder / "a.png", 1, SMALL_SIZE)
    make_image(folder / "b.png", 2, SMALL_SIZE)
    lines = [b'{"path": "a.png", "license": "CC0-1.0"}', b'{"path": "b.png", "attribution": "caf\xe9"}']  # Latin-1
    (folder / "manifest.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    result = run_curate([*RUN, "--input", str(folder), "--run-id", "utf8"], tmp_path, prefect_env)
    bad_line = next(number for number, line in enumerate(lines, start=1) if b"\xe9" in line)
    assert f"{folder / 'manifest.jsonl'} line {bad_line} is not valid UTF-8" in one_line_error(result)


def jsonl_with_a_bad_second_line(path: Path, first: dict | str) -> Path:
    text = first if isinstance(first, str) else json.dumps(first)
    path.write_bytes(text.encode() + b"\n" + b'{"id": "q2", "question": "caf\xe9 au lait?"}\n')
    return path


HASH_ROW = {"path": "a.png", "sha256": "0" * 64, "phash": "f" * 16, "width": 1, "height": 1, "bytes": 1, "error": None}


@pytest.mark.parametrize(
    "command,first",
    [
        (["text", "dups", "{file}", "--out", "{out}"], {"id": "q1", "question": "What is in the picture?"}),
        (["text", "lang", "{file}", "--out", "{out}"], {"id": "q1", "question": "What is in the picture?"}),
        (["stats", "{file}"], make_sample(1).model_dump_json()),
        (["import", "probench", "{file}", "--out", "{out}"], {"uuid": "u1", "conversations": []}),
        (["images", "dups", "{file}", "--out", "{out}"], HASH_ROW),
    ],
    ids=["text-dups", "text-lang", "stats", "import", "images-dups"],
)
def test_a_jsonl_line_that_is_not_utf8_is_a_one_line_error_naming_file_and_line(tmp_path, command, first):
    path = jsonl_with_a_bad_second_line(tmp_path / "rows.jsonl", first)
    out = tmp_path / "out.jsonl"
    result = curate_in_process([part.format(file=path, out=out) for part in command], tmp_path)
    assert f"{path} line 2 is not valid UTF-8" in one_line_error(result)
    assert not out.exists()


# --- --set values built to hurt ----------------------------------------------------------------------


def test_set_values_nested_thousands_deep_or_too_long_are_one_line_errors(tmp_path):
    deep = curate_in_process(["run", "multiverse", "--set", "image_quality.x=" + "[" * 5000 + "]" * 5000], tmp_path)
    assert f"nests more than {MAX_SET_VALUE_DEPTH} levels deep" in one_line_error(deep)
    long = curate_in_process(["run", "multiverse", "--set", "image_quality.x=" + "1," * MAX_SET_VALUE_CHARS], tmp_path)
    assert f"the value has {2 * MAX_SET_VALUE_CHARS:,} characters" in one_line_error(long)
    assert not (tmp_path / "outputs").exists()


def test_a_yaml_alias_bomb_in_set_is_refused_before_it_expands(tmp_path):
    # nine levels, each listing the one below nine times: 9**9 (387 million) strings once expanded
    levels = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"] + [
        f"{name}: &{name} [{', '.join(['*' + below] * 9)}]" for below, name in zip("abcdefgh", "bcdefghi")
    ]
    bomb = "{" + ", ".join(levels) + "}"
    # safety nets should it expand after all: 2 GiB of address space, and a timeout
    result = subprocess.run(
        [
            "bash",
            "-c",
            'ulimit -v 2097152 && exec "$0" "$@"',
            str(CURATE),
            "run",
            "multiverse",
            "--set",
            f"image_quality.x={bomb}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "anchors and aliases (&, *) are not accepted" in one_line_error(result)


# --- folders without images ------------------------------------------------------------------------


def test_an_empty_folder_or_one_without_images_is_an_input_error_before_any_stage(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = curate_in_process(["run", "multiverse", "--input", str(empty)], tmp_path)
    assert f"no images found in {empty}: it is empty" in one_line_error(result)
    others = tmp_path / "documents"
    others.mkdir()
    names = ["a.txt", "b.txt", "c.pdf"]
    for name in names:
        (others / name).write_text("not a picture")
    result = curate_in_process(["run", "multiverse", "--input", str(others)], tmp_path)
    counts = Counter(Path(name).suffix for name in names)
    line = one_line_error(result)
    assert f"no images found in {others}: it holds " in line
    assert all(f"{count} {suffix}" in line for suffix, count in counts.items()), line
    assert not (tmp_path / "outputs").exists()  # no run was created, no stage ran


# --- decode errors name their own file ----------------------------------------------------------------


def test_two_empty_files_each_get_a_decode_error_naming_themselves_not_the_cached_other(tmp_path):
    """Decode results are cached by content, and every empty file has the same content: a drop must still name
    the file it is about. Two runs share an output folder (and its cache); each takes one of the empty files."""
    folder = tmp_path / "in"
    make_image(folder / "picture.png", 1, SMALL_SIZE)
    for name in ("first.png", "second.png"):
        (folder / name).write_bytes(b"")
    phash = MULTIVERSE_STAGES.index("image_phash")
    details = {}
    for own, other in (("first.png", "second.png"), ("second.png", "first.png")):
        run_dir = prepared_run(
            tmp_path, f"only-{own}", input_path=folder, overrides={"image_ingest": {"exclude_paths": [other]}}
        )
        for index in range(phash + 1):
            run_stage(run_dir, index)
        details[own] = drops(stage_outputs(run_dir)["image_phash"][0])[own]
    for own, other in (("first.png", "second.png"), ("second.png", "first.png")):
        assert details[own]["reason"] == "image_empty"
        assert other not in json.dumps(details[own]), details[own]
    # the premise: the second run's decode result came from the first one's cache entry (the same text)
    assert details["second.png"]["detail"]["error"] == details["first.png"]["detail"]["error"]


# --- messages -----------------------------------------------------------------------------------------


def test_run_help_names_every_kind_of_input(tmp_path):
    result = curate_in_process(["run", "--help"], tmp_path, {"COLUMNS": "400"})
    assert result.returncode == 0
    flat = " ".join(result.stdout.split())
    assert "CSV/JSONL manifest" in flat and "Hugging Face dataset folder" in flat, flat


def test_import_without_images_says_where_it_looked_for_the_first_missing_one(tmp_path):
    convbench_sheet(
        tmp_path / "ConvBench.xlsx",
        [
            [1, "first.jpg", "What is it?", "Why?", "Write a poem."],
            [2, "second.jpg", "Where is it?", "When?", "Plan a trip."],
        ],
    )
    result = curate_in_process(
        ["import", "convbench", str(tmp_path / "ConvBench.xlsx"), "--out", str(tmp_path / "cb.jsonl")], tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert f"looked for the first at {tmp_path / 'visit_bench_images' / 'first.jpg'}" in result.stdout
    assert "--images" in result.stdout and "second.jpg" not in result.stdout


def test_images_hash_takes_the_suffixes_the_pipeline_takes(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    Image.open(make_image(tmp_path / "grey.png", 1, SMALL_SIZE)).convert("L").save(folder / "grey.pgm")
    Image.open(make_image(tmp_path / "mono.png", 2, SMALL_SIZE)).convert("1").save(folder / "mono.pbm")
    save_tiff_16bit_big_endian(folder / "deep.tif", SMALL_SIZE)
    (folder / "notes.xyz").write_bytes((tmp_path / "grey.png").read_bytes())
    for name in ("first.png", "second.png"):
        (folder / name).write_bytes(b"")
    os.mkfifo(folder / "pipe.png")  # opening it would wait for a writer for ever
    (folder / "gone.png").symlink_to(tmp_path / "deleted.png")
    (folder / "loop").symlink_to(folder)
    out = tmp_path / "hashes.jsonl"
    result = curate_in_process(["images", "hash", str(folder), "--out", str(out), "--jobs", "1"], tmp_path)
    assert result.returncode == 0, result.stderr
    rows = {Path(row["path"]).name: row for row in map(json.loads, out.read_text().splitlines())}
    assert IngestConfig.model_fields["extensions"].default == IMAGE_EXTENSIONS  # one list for both
    assert {".pgm", ".pbm", ".tif"} <= set(IMAGE_EXTENSIONS) and ".xyz" not in IMAGE_EXTENSIONS
    for name in ("grey.pgm", "mono.pbm", "deep.tif"):
        assert rows[name]["error"] is None and rows[name]["phash"], rows[name]
        assert (rows[name]["width"], rows[name]["height"]) == SMALL_SIZE
    assert rows["notes.xyz"]["error"].startswith("unsupported_extension") and rows["notes.xyz"]["phash"] is None
    for own, other in (("first.png", "second.png"), ("second.png", "first.png")):
        assert rows[own]["error"].startswith("image_empty") and other not in rows[own]["error"]
    for name in ("pipe.png", "gone.png"):  # a row each, as the pipeline's ingest records them
        assert rows[name]["error"].startswith("not_a_regular_file") and rows[name]["sha256"] is None
    assert len(rows) == 8 and not any("loop" in row for row in rows)  # the linked folder is not walked again

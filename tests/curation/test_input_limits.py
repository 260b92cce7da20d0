"""Limits and bad input below the command line: manifest rows ingest cannot use, text that is not UTF-8 named by its
line, Pillow's own pixel limit never passed off as the user's, and model replies over backend.max_reply_chars."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from benchcurate.curation.core.cache import Cache
from benchcurate.curation.core.decode import ImageDecodeError, decode_image
from benchcurate.curation.core.errors import UserError
from benchcurate.curation.engine.runner import run_stage
from benchcurate.curation.engine.stage import StageContext
from benchcurate.curation.images import ingest
from benchcurate.curation.models.offline import OfflineBackend
from benchcurate.schemas import BackendSpec, Keep
from tests.factories import make_image, png_header_only, scripted_reply
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import MULTIVERSE_STAGES, model_run, stage_outputs

SMALL_SIZE = (64, 48)


def ingest_all(path: Path, tmp_path: Path, **config) -> dict:
    ctx = StageContext(
        run_dir=tmp_path,
        stage="image_ingest",
        run_seed=0,
        backend=OfflineBackend(),
        cache=Cache(tmp_path / "cache.sqlite"),
    )
    cfg = ingest.IngestConfig(input_path=str(path), **config)
    return {item.provenance.source_path: (item, verdict) for item, verdict in ingest.read(cfg, ctx)}


def test_csv_and_jsonl_manifest_paths_no_file_system_takes_are_dropped_row_by_row(tmp_path):
    make_image(tmp_path / "ok.png", 1, SMALL_SIZE)
    long_part = "n" * 256 + ".png"
    (tmp_path / "list.csv").write_text(f"path,license\nok.png,CC0-1.0\nsub/{long_part},CC0-1.0\n")
    results = ingest_all(tmp_path / "list.csv", tmp_path)
    assert results["list.csv:1"][1] == Keep()
    long_row = results["list.csv:2"][1]
    assert long_row.reason == "path_invalid" and f"{len(long_part.encode())} bytes" in long_row.detail["error"]
    # JSON can spell a name no file system encoding writes (a lone surrogate): unreadable, not a crash
    (tmp_path / "list.jsonl").write_text(
        json.dumps({"path": "bad\udcff.png"}) + "\n" + json.dumps({"path": "ok.png"}) + "\n"
    )
    results = ingest_all(tmp_path / "list.jsonl", tmp_path)
    assert results["list.jsonl:1"][1].reason == "unreadable_name" and results["list.jsonl:2"][1] == Keep()


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_manifest_line_that_is_not_utf8_is_named_by_its_line_however_far_into_the_file(tmp_path, suffix):
    rows = [f"img{number}.png" for number in range(2000)]  # well past the decoder's first chunk
    bad_index = 1500
    if suffix == ".csv":
        lines = [b"path"] + [row.encode() for row in rows]
        lines[bad_index + 1] = b"caf\xe9.png"
    else:
        lines = [json.dumps({"path": row}).encode() for row in rows]
        lines[bad_index] = b'{"path": "caf\xe9.png"}'
    manifest = tmp_path / f"list{suffix}"
    manifest.write_bytes(b"\n".join(lines) + b"\n")
    bad_line = lines.index(next(line for line in lines if b"\xe9" in line)) + 1
    with pytest.raises(UserError) as caught:
        ingest_all(manifest, tmp_path)
    assert str(caught.value).startswith(f"{manifest} line {bad_line} is not valid UTF-8 (byte ")


def test_pillows_own_limit_is_never_reported_as_max_pixels(tmp_path):
    width, height = 20_000, 10_000  # past twice Pillow's limit: it refuses the file while opening it
    path = tmp_path / "giant.png"
    path.write_bytes(png_header_only(width, height))
    pillow_limit = 2 * Image.MAX_IMAGE_PIXELS
    assert width * height > pillow_limit
    below, above = width * height // 2, width * height * 2
    with pytest.raises(ImageDecodeError) as caught:
        decode_image(path, max_pixels=below)
    assert caught.value.reason == "image_too_large"
    assert str(caught.value) == f"{width * height:,} pixels exceed the {below:,}-pixel limit (max_pixels)"
    with pytest.raises(ImageDecodeError) as caught:  # a max_pixels the image is within: Pillow said no, not it
        decode_image(path, max_pixels=above)
    assert caught.value.reason == "image_too_large"
    assert f"{above:,}" not in str(caught.value) and "max_pixels cannot raise" in str(caught.value)


@pytest.mark.slow
def test_a_model_reply_over_max_reply_chars_drops_its_item_and_is_stored_nowhere(tmp_path):
    limit = BackendSpec.model_fields["max_reply_chars"].default
    marker = "overflow-"
    oversized = {"padding": marker * (limit // len(marker) + 1)}
    sent = []

    def responder(body: dict) -> object | None:  # the first image_quality request gets the oversized reply
        if body["response_format"]["json_schema"]["name"] == "QualityReply" and not sent:
            sent.append(body)
            return oversized
        return scripted_reply(body)

    images = 3
    with FakeOpenAIServer(responder=responder) as server:
        run_dir = model_run(tmp_path, server, "oversized", images=images)
        for index in range(MULTIVERSE_STAGES.index("image_quality") + 1):
            run_stage(run_dir, index)
    decisions, kept = stage_outputs(run_dir)["image_quality"]
    dropped = [row for row in decisions if not row["kept"]]
    assert len(sent) == 1 and [row["reason"] for row in dropped] == ["model_reply_too_large"]
    reply_chars = len(json.dumps(oversized))
    assert reply_chars > limit
    assert (
        f"the reply has {reply_chars:,} characters, over backend.max_reply_chars ({limit:,})"
        in dropped[0]["detail"]["error"]
    )
    assert len(kept) == images - 1
    stored = [
        path for path in (tmp_path / "out").rglob("*") if path.is_file() and (marker * 2).encode() in path.read_bytes()
    ]
    assert stored == []


@pytest.mark.slow
def test_a_batch_reply_over_max_reply_chars_is_not_cached_and_the_item_is_asked_again(tmp_path):
    limit = BackendSpec.model_fields["max_reply_chars"].default
    marker = "overflow-"
    sent = []

    def responder(body: dict) -> object | None:  # the first image_quality line gets an oversized, valid reply
        if body["response_format"]["json_schema"]["name"] == "QualityReply" and not sent:
            sent.append(body)
            return {"rationale": marker * (limit // len(marker) + 1), "quality_score": 5}
        return scripted_reply(body)

    images = 3
    with FakeOpenAIServer(responder=responder, batch_seconds=0) as server:
        run_dir = model_run(tmp_path, server, "batched", images=images, batch=True, batch_poll_seconds=0.05)
        for index in range(MULTIVERSE_STAGES.index("image_quality") + 1):
            run_stage(run_dir, index)
        # that line alone goes into a second batch, as a failed line does
        assert (server.batches_created, server.completions_served) == (2, 0)
    _, kept = stage_outputs(run_dir)["image_quality"]
    assert len(sent) == 1 and len(kept) == images
    assert not [
        path for path in (tmp_path / "out").rglob("*") if path.is_file() and (marker * 2).encode() in path.read_bytes()
    ]

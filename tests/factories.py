"""Deterministic test data shared by the tests and the benchmarks: pictures, samples and well-formed model replies
for the loopback OpenAI server. Plain functions with no pytest import, so `bench/` uses the same ones."""

from __future__ import annotations

import json
import random
import struct
import zlib
from pathlib import Path

from PIL import Image, ImageDraw
from pydantic import BaseModel

from benchcurate.curation.models.prompting import available_versions, load_prompt
from benchcurate.schemas import ImageRef, Provenance, Sample


def make_image(path: Path, seed: int, size: tuple[int, int] = (320, 240)) -> Path:
    """A deterministic picture: coloured rectangles and lines drawn from `seed`."""
    rng = random.Random(seed)
    image = Image.new("RGB", size, tuple(rng.randrange(256) for _ in range(3)))
    draw = ImageDraw.Draw(image)
    for _ in range(12):
        x0, y0 = rng.randrange(size[0]), rng.randrange(size[1])
        x1, y1 = x0 + rng.randrange(20, size[0] // 2), y0 + rng.randrange(20, size[1] // 2)
        draw.rectangle([x0, y0, x1, y1], fill=tuple(rng.randrange(256) for _ in range(3)))
        draw.line([rng.randrange(size[0]), 0, rng.randrange(size[0]), size[1]], fill=(0, 0, 0), width=3)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
    return path


def make_sample(seed: int, **updates) -> Sample:
    rng = random.Random(seed)
    sha = "".join(rng.choice("0123456789abcdef") for _ in range(64))
    phash = "".join(rng.choice("0123456789abcdef") for _ in range(16))
    sample = Sample(
        id=f"s{seed:04d}",
        images=[
            ImageRef(
                path=f"/nonexistent/{seed}.png",
                sha256=sha,
                size_bytes=1000,
                width=100,
                height=100,
                format="PNG",
                phash=phash,
            )
        ],
        provenance=Provenance(source_dataset="factory", source_id=str(seed), license="CC0-1.0"),
    )
    return sample.model_copy(update=updates)


def scripted_reply(body: dict) -> object | None:
    """A responder for the loopback server: well-formed conversations (4 user turns) and checklists, so they pass
    the stages' checks; None (a generated schema instance) for everything else."""
    name = (body.get("response_format") or {}).get("json_schema", {}).get("name")
    if name == "ConversationReply":
        return {
            "utterances": [
                {"speaker": speaker, "text": f"{speaker} says something about turn {index}"}
                for index, speaker in enumerate(["user", "assistant"] * 4)
            ]
        }
    if name == "ChecklistReply":
        return {
            "checklists": [
                {
                    "user_turn": turn,
                    "items": [
                        {
                            "question": f"Does answer {turn} use the image?",
                            "main_criteria": "Perceptual Understanding",
                            "sub_criteria": "grounding",
                        }
                    ],
                }
                for turn in range(1, 5)
            ]
        }
    return None


def decide(stage, items, cfg, ctx):
    """A set stage's verdicts on Samples in memory, through its view as the runner does it."""
    return stage.decide(items, cfg, ctx)[1]


def reply_models() -> list[type[BaseModel]]:
    """The output_schema model of every prompt version in prompts/."""
    folder = Path(__file__).resolve().parents[1] / "prompts"
    models = {
        load_prompt(entry.name, version).output_schema
        for entry in folder.iterdir()
        if entry.is_dir()
        for version in available_versions(entry.name)
    }
    return sorted(models, key=lambda model: model.__name__)


def png_header_only(width: int, height: int) -> bytes:
    """A PNG that declares width x height and holds no pixels: Pillow refuses it when opening, past its own limit."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")


CONVBENCH_COLUMNS = [
    "ID",
    "image_id",
    "The_first_turn_instruction",
    "The_second_turn_instruction",
    "The_third_turn_instruction",
]


def convbench_sheet(path: Path, rows: list[list], header: list | None = None) -> Path:
    """A workbook laid out like ConvBench's release: one `multi_turn_benchmark` sheet, a header row, then `rows`."""
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = "multi_turn_benchmark"
    for row in [header or CONVBENCH_COLUMNS, *rows]:
        sheet.append(list(row))
    path.parent.mkdir(parents=True, exist_ok=True)
    book.save(path)
    return path


def without(raw: bytes, *fields: str, **changed) -> bytes:
    """`verify.pack` bytes with header fields left out or changed, as an earlier (or later) version wrote them."""
    length = int.from_bytes(raw[:4], "little")
    header = {key: value for key, value in json.loads(raw[4 : 4 + length]).items() if key not in fields}
    written = json.dumps({**header, **changed}).encode()
    return len(written).to_bytes(4, "little") + written + raw[4 + length :]

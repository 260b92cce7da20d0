"""image_phash: decode each image (upright, alpha on white, first frame) and take its 64-bit perceptual hash.

The hash is imagehash's `phash` (DCT of a 32x32 greyscale, 8x8 low frequencies against their median), so values
match what other tools computing it report. A file that cannot be decoded is dropped with the reason its decode
gave (`image_empty`, `image_truncated`, `image_unreadable`, `image_too_large`, ...). The item's scores also keep
the hashes `image_near_dedup` matches turned, bordered and cropped copies with (`curation.images.likeness`),
from the same decode. Results are cached by
content sha256 and decode settings, so a rerun decodes nothing it already hashed. CPU-bound: the runner spreads
it over worker processes (or a Dask cluster).
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import imagehash
from pydantic import Field

from benchcurate.curation.core.decode import DECODE_REASONS, DEFAULT_MAX_PIXELS, ImageDecodeError, decode_image
from benchcurate.curation.engine.stage import ItemStage, StageConfig, StageContext
from benchcurate.curation.images import verify
from benchcurate.curation.images.likeness import likeness_hashes, phash_block
from benchcurate.schemas import Drop, Keep, Sample, Scores, Verdict

CACHE_NAMESPACE = "image_phash"
IMAGEHASH_VERSION = version("ImageHash")


class PhashConfig(StageConfig):
    max_pixels: int = Field(
        DEFAULT_MAX_PIXELS,
        ge=1,
        description="images with more pixels are dropped as image_too_large (decompression bombs)",
    )
    draft_side_px: int | None = Field(
        256,
        ge=32,
        description="decode JPEGs at reduced scale, and box-average "
        "other images, but no side below this; null "
        "hashes the full-size picture",
    )


def algorithm(cfg: PhashConfig) -> str:
    decode = f"reduced to >= {cfg.draft_side_px} px" if cfg.draft_side_px else "full decode"
    return f"imagehash {IMAGEHASH_VERSION} phash hash_size=8; {decode}"


def fingerprint(
    path: Path, cfg: PhashConfig, data: bytes | None = None, likeness: bool = False, picture: bool = False
) -> dict:
    """Width, height, format and pHash of one file (or its bytes), or the reason it cannot be decoded; with
    `likeness`, also the hashes of its other orientations, without borders and of its centre
    (`curation.images.likeness`), from the same decode; with `picture` too, under "picture", what the
    near-duplicate verification reads of it (`verify.pack` of its `verify.Picture`): the file is then decoded
    in colour, at least `verify.DECODE_SIDE` pixels a side, and hashed in that picture's grey levels. An error
    names no file: the result is cached by content, and files with the same bytes are different files."""
    side = cfg.draft_side_px and max(cfg.draft_side_px, verify.DECODE_SIDE) if picture else cfg.draft_side_px
    data = path.read_bytes() if data is None and picture else data
    try:
        decoded = decode_image(path, cfg.max_pixels, side, data, grey=not picture, shrink_all=True)
    except ImageDecodeError as error:
        return {"error_reason": error.reason, "error": str(error).replace(str(path), "the file")}
    grey = decoded.image if not picture else decoded.image.convert("L")
    found = {
        "width": decoded.width,
        "height": decoded.height,
        "format": decoded.format,
        "phash": str(imagehash.phash(grey)),
        "phash_algorithm": algorithm(cfg),
    }
    if picture:
        found["picture"] = verify.pack(verify.picture_of(decoded, data))
    # the other orientations come from imagehash's steps redone (its DCT block, turned), tested to give its bits
    return {**found, **likeness_hashes(grey, phash_block(grey))} if likeness else found


def score(item: Sample, cfg: PhashConfig, ctx: StageContext) -> Scores:
    image = item.images[0]
    key = f"{image.sha256}:{cfg.max_pixels}:{cfg.draft_side_px}:likeness:v2"  # v2: every format reduced
    found = ctx.cache.get(CACHE_NAMESPACE, key)
    if not isinstance(found, dict):
        found = fingerprint(Path(image.path), cfg, likeness=True)
        ctx.cache.put(CACHE_NAMESPACE, key, found)
    if "error_reason" in found:  # which file, from the item itself, never from the cache
        found = {**found, "path": item.provenance.source_path or image.path}
    return Scores(values=found)


def decide(scores: Scores, cfg: PhashConfig) -> Verdict:
    if "error_reason" in scores.values:
        return Drop(
            reason=str(scores.values["error_reason"]),
            detail={"error": scores.values["error"], "path": scores.values.get("path")},
        )
    return Keep()


def apply(item: Sample, scores: Scores, cfg: PhashConfig) -> Sample:
    if "error_reason" in scores.values:
        return item
    fields = ("width", "height", "format", "phash", "phash_algorithm")
    image = item.images[0].model_copy(update={name: scores.values[name] for name in fields})
    return item.model_copy(update={"images": [image, *item.images[1:]]})


STAGE = ItemStage(
    name="image_phash",
    config=PhashConfig,
    score=score,
    decide=decide,
    apply=apply,
    reasons=DECODE_REASONS,
    parallel="processes",
    version=2,
)  # 2: the likeness hashes beside the pHash

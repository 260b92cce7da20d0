"""A labelled set of image pairs of our own making, for the near-duplicate search (tests/curation/test_dedup_set.py
asserts floors on it; bench/near_dup_quality.py prints its scores).

Originals: the demo's shipped pictures (15 photos, 41 renders; CC0). Copies of an original, by what they are:
- `same`: the same picture, reworked: JPEG at quality 60, half and double size, brighter, more contrast,
  greyscale, another format, slightly blurred, noise. Must match.
- `turned`: a mirror image, a quarter turn, a half turn. Must match when orientations are matched (default).
- `framed`: a uniform border (white or black) of 6% around it. Must match when borders are matched (default).
- `cropped`: 5% cut from two sides. Must match only with `match_crops`.
- `local`: the same picture but for one region, so a question about it may have another answer: a spot the
  difference (a small shape added), a changed label (a strip of text redrawn), a moved object (a patch moved), the
  next frame (a region shifted a little, with sensor noise). Must not match.
Pairs: each original with each of its copies (labelled as above), and every two different originals (must not
match; "hard" when both are photos or renders of the same kind).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageDraw, ImageEnhance, ImageFilter, ImageFont, ImageStat

from tests.helpers import REPO

DEMO = REPO / "curation" / "demo"
SAME = ("jpeg_q60", "half_size", "double_size", "brighter", "more_contrast", "greyscale", "other_format",
        "slight_blur", "noise")
TURNED = ("mirror", "quarter_turn", "half_turn")
FRAMED = ("white_border", "black_border")
CROPPED = ("crop_5pct",)
LOCAL = ("spot_difference", "changed_label", "moved_object", "next_frame")
KINDS = {**{edit: "same" for edit in SAME}, **{edit: "turned" for edit in TURNED},
         **{edit: "framed" for edit in FRAMED}, **{edit: "cropped" for edit in CROPPED},
         **{edit: "local" for edit in LOCAL}}


@dataclass(frozen=True)
class Entry:
    path: Path
    original: str   # the original's name
    kind: str       # "original", or the copy's kind (same, turned, framed, cropped, local)
    edit: str       # "original", or the edit's name
    category: str   # photo, or the render's kind (bar_chart, document, ...)


def originals(limit_per_category: int | None = None) -> list[tuple[Path, str]]:
    """(path, category) of the shipped pictures: photos, then the renders in their index's order."""
    photos = sorted(path for path in (DEMO / "photos").iterdir() if path.suffix.lower() in (".png", ".jpg", ".jpeg"))
    renders = [json.loads(line) for line in (DEMO / "rendered" / "IMAGES.jsonl").read_text().splitlines()]
    found = [(path, "photo") for path in photos] + [(DEMO / "rendered" / entry["file"], entry["kind"])
                                                    for entry in renders if entry["kind"] != "icon"]
    if limit_per_category is None:
        return found
    taken: dict[str, int] = {}
    kept = []
    for path, category in found:
        if taken.get(category, 0) < limit_per_category:
            taken[category] = taken.get(category, 0) + 1
            kept.append((path, category))
    return kept


def _region(image: Image.Image, rng: random.Random, share: float, busy: bool = False) -> tuple[int, int, int, int]:
    """A box covering about `share` of the area, inside the middle 80% of the picture; with `busy`, the most
    varied of 12 drawn (so moving it changes what the picture shows)."""
    width, height = image.size
    w, h = max(4, round(width * share ** 0.5)), max(4, round(height * share ** 0.5))
    boxes = []
    for _ in range(12 if busy else 1):
        x = rng.randint(round(width * 0.1), max(round(width * 0.1), round(width * 0.9) - w))
        y = rng.randint(round(height * 0.1), max(round(height * 0.1), round(height * 0.9) - h))
        boxes.append((x, y, x + w, y + h))
    return max(boxes, key=lambda box: sum(ImageStat.Stat(image.crop(box).convert("L")).stddev))


def _contrasting(image: Image.Image, box: tuple[int, int, int, int]) -> tuple[int, int, int]:
    return tuple(255 - round(value) for value in ImageStat.Stat(image.crop(box)).mean[:3])


def _noisy(image: Image.Image, rng: random.Random, sigma: float) -> Image.Image:
    """Sensor-like noise: zero-mean, per channel, `sigma` grey levels."""
    import numpy as np

    noise = np.random.default_rng(rng.randrange(2 ** 32)).normal(0, sigma, (image.height, image.width, 3))
    return Image.fromarray(np.clip(np.asarray(image, dtype=np.float64) + noise, 0, 255).astype(np.uint8))


def edited(image: Image.Image, edit: str, rng: random.Random) -> Image.Image:
    """The original (RGB) with one edit applied."""
    width, height = image.size
    if edit in ("jpeg_q60", "other_format"):
        return image.copy()
    if edit == "half_size":
        return image.resize((max(8, width // 2), max(8, height // 2)), Image.Resampling.LANCZOS)
    if edit == "double_size":
        return image.resize((width * 2, height * 2), Image.Resampling.BICUBIC)
    if edit == "brighter":
        return ImageEnhance.Brightness(image).enhance(1.2)
    if edit == "more_contrast":
        return ImageEnhance.Contrast(image).enhance(1.3)
    if edit == "greyscale":
        return image.convert("L").convert("RGB")
    if edit == "slight_blur":
        return image.filter(ImageFilter.GaussianBlur(1))
    if edit == "noise":
        return _noisy(image, rng, 6)
    if edit == "mirror":
        return image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    if edit == "quarter_turn":
        return image.transpose(Image.Transpose.ROTATE_90)
    if edit == "half_turn":
        return image.transpose(Image.Transpose.ROTATE_180)
    if edit in ("white_border", "black_border"):
        bw, bh = round(width * 0.06), round(height * 0.06)
        framed = Image.new("RGB", (width + 2 * bw, height + 2 * bh), (255,) * 3 if edit == "white_border" else (0,) * 3)
        framed.paste(image, (bw, bh))
        return framed
    if edit == "crop_5pct":
        dx, dy = round(width * 0.05), round(height * 0.05)
        return image.crop((dx, dy, width, height)) if rng.random() < 0.5 else image.crop((0, 0, width - dx, height - dy))
    out = image.copy()
    draw = ImageDraw.Draw(out)
    if edit == "spot_difference":
        box = _region(image, rng, 0.006)
        draw.ellipse(box, fill=_contrasting(image, box))
    elif edit == "changed_label":
        x0, y0, x1, y1 = _region(image, rng, 0.012)
        box = (x0, y0, x0 + (x1 - x0) * 3, y0 + (y1 - y0) // 2 + 2)
        draw.rectangle(box, fill=(255, 255, 255))
        font = ImageFont.load_default(size=max(8, (box[3] - box[1]) - 2))
        draw.text((box[0] + 1, box[1]), f"Total {rng.randint(10, 99)}.{rng.randint(0, 9)}", fill=(0, 0, 0), font=font)
    elif edit == "moved_object":
        box = _region(image, rng, 0.02, busy=True)
        patch = image.crop(box)
        shift = round(width * 0.08) * (1 if box[0] < width / 2 else -1)
        out.paste(patch, (box[0] + shift, box[1]))
    elif edit == "next_frame":
        box = _region(image, rng, 0.04, busy=True)
        patch = image.crop(box)
        out.paste(patch, (box[0] + max(2, round(width * 0.03)), box[1] + max(1, round(height * 0.01))))
        out = _noisy(out, rng, 3)
    return out


def build(folder: Path, limit_per_category: int | None = None, edits: tuple[str, ...] = tuple(KINDS)) -> list[Entry]:
    """The set's files under `folder` (written once; a rebuild reuses them): originals and their copies."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for number, (path, category) in enumerate(originals(limit_per_category)):
        name = path.stem
        original = Image.open(path)
        original.load()
        is_jpeg = original.format == "JPEG"
        rgb = original.convert("RGB")
        entries.append(Entry(path, name, "original", "original", category))
        for k, edit in enumerate(edits):
            rng = random.Random(f"{name}/{edit}")
            target_jpeg = (edit == "jpeg_q60") or (is_jpeg != (edit == "other_format"))
            target = folder / f"{name}__{edit}.{'jpg' if target_jpeg else 'png'}"
            if not target.exists():
                image = edited(rgb, edit, rng)
                if target_jpeg:
                    image.save(target, "JPEG", quality=60 if edit == "jpeg_q60" else 90)
                else:
                    image.save(target, "PNG")
            entries.append(Entry(target, name, KINDS[edit], edit, category))
    return entries


def labelled_pairs(entries: list[Entry], match_crops: bool = False) -> list[tuple[int, int, bool, str]]:
    """(index, index, must match, what the pair is): each original with its copies, and every two originals."""
    originals_at = {entry.original: k for k, entry in enumerate(entries) if entry.kind == "original"}
    pairs = []
    for k, entry in enumerate(entries):
        if entry.kind == "original":
            continue
        must = entry.kind in ("same", "turned", "framed") or (entry.kind == "cropped" and match_crops)
        pairs.append((originals_at[entry.original], k, must, entry.kind))
    firsts = sorted(originals_at.values())
    for a, first in enumerate(firsts):
        for second in firsts[a + 1:]:
            hard = entries[first].category == entries[second].category
            pairs.append((first, second, False, "hard_negative" if hard else "negative"))
    return pairs


def keys(entries: list[Entry]):
    """The ImageKeys the stage would see for the set's files (fingerprints as image_phash computes them)."""
    from benchcurate.curation.core.fingerprint import sha256_file
    from benchcurate.curation.images.near_dedup import ImageKey
    from benchcurate.curation.images.phash import PhashConfig, fingerprint

    found = []
    for k, entry in enumerate(entries):
        print_ = fingerprint(entry.path, PhashConfig(), likeness=True)
        turned = print_["phash_orientations"]
        found.append(ImageKey(f"{k:05d}", sha256_file(entry.path), print_["phash"], print_["width"] * print_["height"],
                              entry.path.stat().st_size, "set", "", str(entry.path),
                              tuple(turned.split(",")), print_["phash_trimmed"], print_["phash_centre"]))
    return found


def processing_of(items):
    """The least_processed rule's scores, computed from the files, as the stage computes them without a cache."""
    from benchcurate.curation.images.near_dedup import processing_loader

    return processing_loader(items, None)


def thumbs_of(items):
    """Thumbnails made by decoding, as the stage makes them without a cache."""
    from benchcurate.curation.core.decode import DEFAULT_MAX_PIXELS, decode_image
    from benchcurate.curation.images.likeness import thumbnails

    made = {}

    def load(index: int):
        if index not in made:
            made[index] = thumbnails(decode_image(Path(items[index].path), DEFAULT_MAX_PIXELS, 256).image)
        return made[index]
    return load


@dataclass
class Scores:
    precision: float
    recall: float
    f1: float
    by_kind: dict[str, float]       # share matched, per kind of pair
    hard_negative_merges: int       # originals of one category grouped together, and local copies merged
    local_merges: int


def score(entries: list[Entry], dropped: dict, match_crops: bool = False) -> Scores:
    """Pairwise scores of a grouping (dropped index -> (kept index, ...)) on the set's labelled pairs."""
    cluster = {k: k for k in range(len(entries))}
    for index, found in dropped.items():
        cluster[index] = found[0]
    true_pos = false_pos = false_neg = 0
    matched: dict[str, list[bool]] = {}
    hard = local = 0
    for a, b, must, what in labelled_pairs(entries, match_crops):
        same = cluster[a] == cluster[b]
        matched.setdefault(what, []).append(same)
        true_pos += same and must
        false_pos += same and not must
        false_neg += must and not same
        hard += same and what == "hard_negative"
        local += same and what == "local"
    precision = true_pos / (true_pos + false_pos) if true_pos + false_pos else 1.0
    recall = true_pos / (true_pos + false_neg) if true_pos + false_neg else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Scores(round(precision, 4), round(recall, 4), round(f1, 4),
                  {what: round(sum(flags) / len(flags), 4) for what, flags in sorted(matched.items())},
                  hard + local, local)

"""A labelled set of near-duplicate pictures of our own making, from real photos and the demo's renders
(tests/curation/test_dedup_set.py asserts floors on it; bench/near_dup_quality.py reports it in full).

Originals: the demo's photos (scikit-image's real photographs, CC0 or public domain), each the middle 90% of the
shipped photo so that a camera shift can show what lies beyond it, and the demo's renders (charts, documents,
screenshots; CC0). Copies of an original, by kind of edit, several strengths each (`EDITS`): resized down,
recompressed, cropped by a few percent from one side or from all, thin and thick borders, brighter or darker,
another format, greyscale, mirrored, turned, sharpened, blurred. Each must be grouped with its original.

Copies and hard negatives are made from the original file as saved (a JPEG original's copies carry its
compression, as a user's do). Hard negatives (`NEGATIVES`), which must not be: a spot the difference (a small
black or white disc added, or an object removed by a patch of its surroundings), a changed label (a number redrawn), the next frame of a video (an
object moved, a 1% pan and sensor noise), and for photos a stereo pair or a small camera shift (the same scene
seen from a window moved 4% or 6% diagonally, so each shows what the other does not). Besides, every two
originals must stay apart (a "hard" pair when both are of one kind).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageEnhance, ImageFilter, ImageFont, ImageOps, ImageStat

from tests.helpers import REPO

DEMO = REPO / "curation" / "demo"
ORIGINAL_SHARE = 0.9  # of the shipped photo's sides: the original is its middle, the rest is scenery for shifts
EDITS = {  # kind -> edits (name: strength)
    "resize_down": {"resize_75": 0.75, "resize_50": 0.5, "resize_25": 0.25},
    "recompress": {"jpeg_80": 80, "jpeg_50": 50, "jpeg_30": 30},
    "crop_one_side": {"crop_one_2": 0.02, "crop_one_5": 0.05, "crop_one_8": 0.08},
    "crop_all_sides": {"crop_all_2": 0.02, "crop_all_3": 0.03},
    "thin_border": {"border_black_1": 0.01, "border_white_1": 0.01},
    "thick_border": {"border_black_6": 0.06, "border_white_10": 0.10},
    "brightness": {"brighter_10": 1.10, "darker_10": 0.90, "brighter_25": 1.25},
    "format_change": {"other_format": None, "webp": None},
    "greyscale": {"greyscale": None},
    "mirror": {"mirror": None},
    "quarter_turn": {
        "turn_90": Image.Transpose.ROTATE_90,
        "turn_270": Image.Transpose.ROTATE_270,
        "turn_180": Image.Transpose.ROTATE_180,
    },
    "sharpen": {"sharpen_mild": (1, 80), "sharpen_strong": (2, 200)},
    "blur": {"blur_08": 0.8, "blur_15": 1.5},
}
NEGATIVES = {
    "spot_difference": ("spot_added", "object_removed"),
    "changed_label": ("changed_label",),
    "video_frame": ("next_frame",),
    "camera_shift": ("shift_4", "shift_6"),
}
PHOTO_ONLY = {"camera_shift"}
KIND_OF = {edit: kind for kind, edits in EDITS.items() for edit in edits} | {
    edit: kind for kind, edits in NEGATIVES.items() for edit in edits
}


@dataclass(frozen=True)
class Entry:
    path: Path
    original: str  # the original's name
    kind: str  # "original", an edit kind of EDITS or a hard-negative kind of NEGATIVES
    edit: str  # "original", or the edit's name
    category: str  # photo, or the render's kind (bar_chart, document, ...)

    @property
    def negative(self) -> bool:
        return self.kind in NEGATIVES


def sources(
    photos: int | None = None, renders_per_kind: int | None = None, names: tuple[str, ...] | None = None
) -> list[tuple[Path, str]]:
    """(path, category) of the shipped pictures: photos (the 102-pixel microaneurysms crop left out), then the
    renders in their index's order; with `names`, only the pictures of those names (file stems)."""
    found = sorted(
        path
        for path in (DEMO / "photos").iterdir()
        if path.suffix.lower() in (".png", ".jpg", ".jpeg") and path.stem != "microaneurysms"
    )
    chosen = [(path, "photo") for path in found[:photos]]
    taken: dict[str, int] = {}
    for entry in (json.loads(line) for line in (DEMO / "rendered" / "IMAGES.jsonl").read_text().splitlines()):
        if entry["kind"] != "icon" and (renders_per_kind is None or taken.get(entry["kind"], 0) < renders_per_kind):
            taken[entry["kind"]] = taken.get(entry["kind"], 0) + 1
            chosen.append((DEMO / "rendered" / entry["file"], entry["kind"]))
    return [(path, kind) for path, kind in chosen if names is None or path.stem in names]


HELD_OUT_SIDES = (480, 1280)  # a held-out picture's shorter side at least, and longer side at most (larger: shrunk)


def held_out(folder: Path, count: int = 40, start: int = 0) -> list[tuple[Path, str]]:
    """(path, category) of up to `count` real pictures of a folder the thresholds were never chosen on (what
    bench/real_images/fetch.sh writes: wallpapers, clip art, game and atlas artwork from Debian packages), the
    packages taken in turn. A package ships one picture at several sizes, so only one file per family (package and
    file name without its digits) is taken, and none whose plain pHash is within 12 bits of one taken: two of
    those would be a copy, not two originals; nor one with transparency or nearly flat (`_plain_enough`). JPEGs
    are photos (they get the camera-shift negatives), others artwork. `build` leaves out a hard negative of these
    that changes nothing visible (`visibly_changed`). `start`: skip the first `start` originals of that order (a
    second set shares no original with the first)."""
    import re
    from itertools import zip_longest

    import imagehash

    families: dict[tuple[str, str], Path] = {}
    for path in sorted(folder.iterdir()):
        try:
            with Image.open(path) as opened:
                if min(opened.size) < HELD_OUT_SIDES[0] or not _plain_enough(opened):
                    continue
        except OSError:
            continue
        families.setdefault((path.name.partition("__")[0], re.sub(r"\d+", "", path.stem)), path)
    by_package: dict[str, list[Path]] = {}
    for (package, _), path in families.items():
        by_package.setdefault(package, []).append(path)
    chosen: list[tuple[Path, str]] = []
    hashes: list = []
    for path in (p for row in zip_longest(*by_package.values()) for p in row if p is not None):
        with Image.open(path) as opened:
            fingerprint = imagehash.phash(opened.convert("RGB"))
        if any(fingerprint - other <= 12 for other in hashes):
            continue
        hashes.append(fingerprint)
        chosen.append((path, "photo" if path.suffix.lower() in (".jpg", ".jpeg") else "artwork"))
        if len(chosen) == start + count:
            break
    return chosen[start:]


FLAT_SPREAD = 12.0  # grey-level standard deviation under which a picture is nearly flat
VISIBLE_SHARE = 0.001  # of pixels a hard negative must change by more than VISIBLE_LEVELS, or it is not one
VISIBLE_LEVELS = 30


def _plain_enough(opened: Image.Image) -> bool:
    """Whether a picture can be an original here: no transparency (made RGB, what lies under it shows, which is
    not the picture anyone sees) and not nearly flat (a local change there may change no pixel, so the 'negative'
    would be a copy)."""
    if opened.mode in ("RGBA", "LA", "PA") or "transparency" in opened.info:
        return False
    return ImageStat.Stat(opened.convert("L")).stddev[0] >= FLAT_SPREAD


def visibly_changed(original: Image.Image, other: Image.Image) -> bool:
    """Whether `other`, of the original's size, changes at least VISIBLE_SHARE of its pixels by more than
    VISIBLE_LEVELS in some channel (a different size: a camera shift, changed everywhere)."""
    if original.size != other.size:
        return True
    first = np.asarray(original.convert("RGB"), dtype=np.int16)
    second = np.asarray(other.convert("RGB"), dtype=np.int16)
    return float((np.abs(first - second).max(axis=2) > VISIBLE_LEVELS).mean()) >= VISIBLE_SHARE


def _window(scene: Image.Image, dx: float = 0.0, dy: float = 0.0) -> Image.Image:
    """The ORIGINAL_SHARE middle of a scene, moved by dx, dy (shares of the window's sides)."""
    width, height = scene.size
    w, h = round(width * ORIGINAL_SHARE), round(height * ORIGINAL_SHARE)
    x, y = (width - w) // 2 + round(dx * w), (height - h) // 2 + round(dy * h)
    return scene.crop((x, y, x + w, y + h))


def _region(image: Image.Image, rng: random.Random, share: float, busy: bool = False) -> tuple[int, int, int, int]:
    """A box covering about `share` of the area inside the middle 80%; with `busy`, the most varied of 12."""
    width, height = image.size
    w, h = max(4, round(width * share**0.5)), max(4, round(height * share**0.5))
    boxes = []
    for _ in range(12 if busy else 1):
        x = rng.randint(round(width * 0.1), max(round(width * 0.1), round(width * 0.9) - w))
        y = rng.randint(round(height * 0.1), max(round(height * 0.1), round(height * 0.9) - h))
        boxes.append((x, y, x + w, y + h))
    return max(boxes, key=lambda box: sum(ImageStat.Stat(image.crop(box).convert("L")).stddev))


def _noisy(image: Image.Image, rng: random.Random, sigma: float) -> Image.Image:
    noise = np.random.default_rng(rng.randrange(2**32)).normal(0, sigma, (image.height, image.width, 3))
    return Image.fromarray(np.clip(np.asarray(image, dtype=np.float64) + noise, 0, 255).astype(np.uint8))


def _bordered(image: Image.Image, share: float, colour: int) -> Image.Image:
    return ImageOps.expand(image, border=max(1, round(min(image.size) * share)), fill=(colour,) * 3)


def edited(image: Image.Image, edit: str, rng: random.Random) -> Image.Image:
    """The original (RGB) with one benign edit of EDITS applied (formats and qualities are applied on saving)."""
    kind = KIND_OF[edit]
    strength = EDITS[kind][edit]
    width, height = image.size
    if kind == "resize_down":
        return image.resize((round(width * strength), round(height * strength)), Image.Resampling.LANCZOS)
    if kind == "crop_one_side":
        cut_x, cut_y = round(width * strength), round(height * strength)
        side = rng.choice(("left", "right", "top", "bottom"))
        return image.crop(
            {
                "left": (cut_x, 0, width, height),
                "right": (0, 0, width - cut_x, height),
                "top": (0, cut_y, width, height),
                "bottom": (0, 0, width, height - cut_y),
            }[side]
        )
    if kind == "crop_all_sides":
        cut_x, cut_y = round(width * strength), round(height * strength)
        return image.crop((cut_x, cut_y, width - cut_x, height - cut_y))
    if kind in ("thin_border", "thick_border"):
        return _bordered(image, strength, 0 if "black" in edit else 255)
    if kind == "brightness":
        return ImageEnhance.Brightness(image).enhance(strength)
    if kind == "greyscale":
        return image.convert("L").convert("RGB")
    if kind == "mirror":
        return image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    if kind == "quarter_turn":
        return image.transpose(strength)
    if kind == "sharpen":
        return image.filter(ImageFilter.UnsharpMask(radius=strength[0], percent=strength[1], threshold=2))
    if kind == "blur":
        return image.filter(ImageFilter.GaussianBlur(strength))
    return image.copy()  # recompress, format_change: in the saving


def negative(scene: Image.Image, original: Image.Image, edit: str, rng: random.Random) -> Image.Image:
    """A hard negative of NEGATIVES: the original with a local change, or another window of its scene."""
    if edit.startswith("shift_"):
        share = int(edit.split("_")[1]) / 100
        return _window(scene, share * rng.choice((-1, 1)), share * rng.choice((-1, 1)))
    width, height = original.size
    out = original.copy()
    draw = ImageDraw.Draw(out)
    if edit == "spot_added":  # black or white, whichever stands out more from the region
        box = _region(original, rng, 0.008)
        mean = ImageStat.Stat(original.crop(box).convert("L")).mean[0]
        draw.ellipse(box, fill=(0, 0, 0) if mean > 127 else (255, 255, 255))
    elif edit == "object_removed":
        box = _region(original, rng, 0.02, busy=True)
        w, h = box[2] - box[0], box[3] - box[1]
        source = (box[0] - w, box[1]) if box[0] - w >= 0 else (box[2], box[1])
        out.paste(original.crop((*source, source[0] + w, source[1] + h)), box[:2])
    elif edit == "changed_label":
        x0, y0, x1, y1 = _region(original, rng, 0.012)
        box = (x0, y0, x0 + (x1 - x0) * 3, y0 + (y1 - y0) // 2 + 2)
        draw.rectangle(box, fill=(255, 255, 255))
        font = ImageFont.load_default(size=max(8, (box[3] - box[1]) - 2))
        draw.text((box[0] + 1, box[1]), f"Total {rng.randint(10, 99)}.{rng.randint(0, 9)}", fill=(0, 0, 0), font=font)
    elif edit == "next_frame":
        box = _region(original, rng, 0.03, busy=True)
        patch = original.crop(box)
        out.paste(patch, (box[0] + max(2, round(width * 0.04)), box[1] + max(1, round(height * 0.01))))
        pan = max(1, round(width * 0.01))
        out = out.crop((pan, 0, width, height)).resize((width, height), Image.Resampling.BICUBIC)
        out = _noisy(out, rng, 3)
    return out


def _save(image: Image.Image, target: Path, edit: str, original_format: str) -> None:
    if target.suffix == ".jpg":
        quality = EDITS["recompress"].get(edit, 92 if original_format == "JPEG" else 95)
        image.save(target, "JPEG", quality=quality)
    elif target.suffix == ".webp":
        image.save(target, "WEBP", quality=90)
    else:
        image.save(target, "PNG")


def _suffix(edit: str, original_format: str) -> str:
    if edit in EDITS["recompress"]:
        return ".jpg"
    if edit == "webp":
        return ".webp"
    jpeg = original_format == "JPEG"
    return ".jpg" if jpeg != (edit == "other_format") else ".png"


def build(
    folder: Path,
    photos: int | None = None,
    renders_per_kind: int | None = None,
    names: tuple[str, ...] | None = None,
    chosen: list[tuple[Path, str]] | None = None,
) -> list[Entry]:
    """The set's files under `folder` (written once; a rebuild reuses them): originals, copies, hard negatives;
    of the shipped pictures (`sources`), or of `chosen` ones (`held_out`), each shrunk to HELD_OUT_SIDES[1]."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for path, category in chosen if chosen is not None else sources(photos, renders_per_kind, names):
        name = path.stem
        with Image.open(path) as shipped:
            shipped.load()
            original_format = "JPEG" if shipped.format == "JPEG" else "PNG"
            scene = shipped.convert("RGB")
        if chosen is not None:
            scene.thumbnail((HELD_OUT_SIDES[1], HELD_OUT_SIDES[1]), Image.Resampling.LANCZOS)
        original = _window(scene) if category == "photo" else scene
        target = folder / f"{name}{'.jpg' if original_format == 'JPEG' else '.png'}"
        if not target.exists():
            _save(original, target, "original", original_format)
        with Image.open(target) as saved:  # copies are made from the original file, as a user's are
            original = saved.convert("RGB")
        entries.append(Entry(target, name, "original", "original", category))
        for edit, kind in KIND_OF.items():
            if kind in PHOTO_ONLY and category != "photo":
                continue
            rng = random.Random(f"{name}/{edit}")
            suffix = _suffix(edit, original_format) if kind in EDITS else target.suffix
            copy = folder / f"{name}__{edit}{suffix}"
            if not copy.exists():
                image = edited(original, edit, rng) if kind in EDITS else negative(scene, original, edit, rng)
                if chosen is not None and kind in NEGATIVES and not visibly_changed(original, image):
                    continue  # on a picture not chosen for it, a local change may land where it shows nothing
                _save(image, copy, edit, original_format)
            entries.append(Entry(copy, name, kind, edit, category))
    return entries


def keys(entries: list[Entry], pictures: list | None = None):
    """The ImageKeys the stage would see for the set's files (fingerprints as image_phash computes them); with a
    `pictures` list, as `curate images hash --likeness` computes them, each file's verification picture
    (`verify.pack` bytes) appended to it from the same decode."""
    from benchcurate.curation.core.fingerprint import sha256_file
    from benchcurate.curation.images.near_dedup import ImageKey
    from benchcurate.curation.images.phash import PhashConfig, fingerprint

    found = []
    for k, entry in enumerate(entries):
        print_ = fingerprint(entry.path, PhashConfig(), likeness=True, picture=pictures is not None)
        if pictures is not None:
            pictures.append(print_["picture"])
        turned = print_["phash_orientations"]
        found.append(
            ImageKey(
                f"{k:05d}",
                sha256_file(entry.path),
                print_["phash"],
                print_["width"] * print_["height"],
                entry.path.stat().st_size,
                "set",
                "",
                str(entry.path),
                tuple(turned.split(",")),
                print_["phash_trimmed"],
                print_["phash_centre"],
            )
        )
    return found


def pictures_of(items, stored: list | None = None):
    """The stage's picture loader without a cache: each file read from `stored` (what `keys` appended) or else
    decoded once, when first asked for."""
    from benchcurate.curation.images.near_dedup import picture_loader

    return picture_loader(items, None, stored=stored.__getitem__ if stored is not None else None)


def group(items, cfg=None, stored: list | None = None):
    """`image_near_dedup`'s grouping of the set's keys (defaults: the stage's config): (dropped, summary)."""
    from benchcurate.curation.images.near_dedup import NearDedupConfig, full_size_loader, near_groups

    return near_groups(items, cfg or NearDedupConfig(), pictures_of(items, stored), full_size=full_size_loader(items))


def _distance(first: str, second: str) -> int:
    return (int(first, 16) ^ int(second, 16)).bit_count()


def _same_pixels(first: Path, second: Path) -> bool:
    with Image.open(first) as a, Image.open(second) as b:
        return a.size == b.size and np.array_equal(np.asarray(a.convert("RGB")), np.asarray(b.convert("RGB")))


@dataclass
class Scores:
    recall: dict[str, float]  # per edit kind: share of copies grouped with their original
    phash_recall: dict[str, float]  # the same for plain pHash: the copy within the threshold of the original
    negative_merges: dict[str, int]  # per hard-negative kind: grouped with their original
    original_merges: int  # two different originals grouped (hard: of one kind)
    impure_groups: int  # groups holding pictures of two scenes
    groups: int
    original_kept: float  # share of groups whose kept picture is the original or has its pixels
    original_kept_groups: int  # those groups
    kept_by_kind: dict[str, int]  # which kind of picture each group kept


def score(entries: list[Entry], items, dropped: dict, threshold: int) -> Scores:
    """A grouping (dropped index -> (kept index, ...)) against the set's labels."""
    cluster = {k: k for k in range(len(entries))}
    for index, found in dropped.items():
        cluster[index] = found[0]
    originals = {entry.original: k for k, entry in enumerate(entries) if entry.kind == "original"}
    recall: dict[str, list[bool]] = {}
    phash: dict[str, list[bool]] = {}
    merges = dict.fromkeys(NEGATIVES, 0)
    for k, entry in enumerate(entries):
        if entry.kind == "original":
            continue
        first = originals[entry.original]
        together = cluster[k] == cluster[first]
        if entry.negative:
            merges[entry.kind] += together
        else:
            recall.setdefault(entry.kind, []).append(together)
            phash.setdefault(entry.kind, []).append(_distance(items[k].phash, items[first].phash) <= threshold)
    members: dict[int, list[int]] = {}
    for k in range(len(entries)):
        members.setdefault(cluster[k], []).append(k)
    groups = {kept: found for kept, found in members.items() if len(found) > 1}
    scene = [entry.path.name if entry.negative else entry.original for entry in entries]
    impure = sum(len({scene[k] for k in found}) > 1 for found in groups.values())
    original_merges = sum(
        len({entries[k].original for k in found if entries[k].kind == "original"}) > 1 for found in groups.values()
    )
    kept_by_kind: dict[str, int] = {}
    right = 0
    for kept, found in groups.items():
        kind = entries[kept].kind
        kept_by_kind[kind] = kept_by_kind.get(kind, 0) + 1
        first = originals.get(entries[kept].original)
        right += kind == "original" or (first in found and _same_pixels(entries[kept].path, entries[first].path))
    return Scores(
        {kind: round(sum(v) / len(v), 4) for kind, v in recall.items()},
        {kind: round(sum(v) / len(v), 4) for kind, v in phash.items()},
        merges,
        original_merges,
        impure,
        len(groups),
        round(right / max(1, len(groups)), 4),
        right,
        kept_by_kind,
    )

"""Whether two candidate pictures are one picture: placed on each other at a fine grain, then compared for a
local change (`image_near_dedup`'s verification; `survivor.py` reads the placement to choose the copy kept).

Each picture with a candidate is decoded once, reduced (`picture`: JPEG draft or box average, no side under
256 pixels), and kept as one greyscale copy of at most 256 x 256 pixels (`Picture.fine`; a long receipt keeps a
useful width), with its content box (the picture without uniform borders), its frame box (without an added frame
only: a plain background going on into the picture is not one, `boxes`) and the keep rule's traits. A pair is
verified in steps:

1. Placement. A linear map of the first picture (turned as the candidate pair says, or upright) onto the second:
   whole onto whole or content onto content (the one correlating better first), or, for a crop, one content
   placed inside the other (`likeness.place`, windows of 80-100% of a side). The map is then refined to about a
   pixel by Lucas-Kanade steps on copies of 64 x 64 then 128 x 128 pixels (scale and shift along each axis:
   `_refine`), so a crop, a frame, a resize or a trim that differs by a line all line up.
   Two pictures of one size (after the turn) are copies on one pixel grid or two pictures: only whole on whole
   is tried, and left in place unless the refinement moves them for a reason (`keeps_move`: on a plain picture
   the steps drift; a pair lined up in place within SETTLED_CORRELATION, but not UNMOVED_CORRELATION, is
   refined, on the finer level, only once it passes there); refined to a place moving an end more than
   MAX_MOVED fine pixels (the next frame of a video, panned or zoomed and kept at its size), they are two
   pictures (`moved` in the evidence), whatever the change.
2. Containment. A crop shows part of what its original shows, a framed copy all of it; a camera shift or a
   stereo pair shows something the other does not. `uncovered` is the smaller of the two shares of a picture
   (without its frame) that falls outside the other, or on the other's frame where it shows no margin of its
   own; above `max_uncovered_share` the pair is two pictures.
3. Local change. On the part both show (both content boxes; and apart, that part widened to the frame boxes
   where one is plain and the other is not: `_shared`), at the fine copies' size, the second is predicted from
   the first through a monotone tone curve fitted on the pair (brightness, contrast, gamma, clipping,
   greyscale), then every pixel is compared with the range its prediction takes within one pixel, and the
   prediction with the pixel's range (resampling, sharpening and misplacement by a pixel stay inside it); less
   what resampling the picture to 70% and back changes there (barcodes and small print alias at any other
   scale; two copies of one size on one grid alias alike, so there only what it changes in both is allowed
   for). The leftover, averaged over windows of 5% of the shorter side, stands out where a region changed: the largest
   window above the 90th percentile of all windows, as a share of the picture's grey-level range, is
   `local_difference`; the smaller of the two directions counts (a clipped copy is predicted exactly from its
   original, not the other way round). Above `max_local_difference` (spot the difference, a changed label, a
   moved object, the next frame of a video) the pair is two pictures.

For a pair that passes and has small print (`small_print`), `image_near_dedup` looks again on finer copies
(`finer`, 512 pixels) against a copy on the same pixel grid (`same_grid_concentration`; `near_dedup.finer_look`).

The thresholds were chosen on tests/dedup_set.py (`bench/near_dup_quality.py` reports the result).
"""

from __future__ import annotations

import json
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from functools import cached_property
from pathlib import Path
from typing import NamedTuple

import numpy as np
from PIL import Image

from benchcurate.curation.images.likeness import ORIENTATIONS, PIL_TRANSPOSE, place, trim_steps
from benchcurate.curation.images.survivor import Traits, traits
from benchcurate.curation.images.tones import TONE_BINS, isotonic

DECODE_SIDE = 256  # the picture is decoded reduced, no side under this (JPEG draft, box average otherwise)
FINE_PIXELS = 256 * 256  # pixels of the greyscale copy kept for the verification, at most
PLACE_SIDE = 128  # side of the square copies a crop is placed with (`likeness.place`)
# the refinement's levels: (pixels of the copies, Lucas-Kanade steps at most, passes of a 3-pixel blur)
REFINE_LEVELS = ((64 * 64, 6, 2), (128 * 128, 2, 1))
MIN_CORRELATION = 0.85  # of the refined copies: below it the placement failed (or the turn is wrong)
LINED_UP_CORRELATION = 0.9  # a placement lining the two up less may show them one picture (a fine texture
# resampled differently correlates less at a pixel's grain), but a change it shows is no evidence (it may be
# misplaced): `near_dedup.lined_up`
TRUSTED_CORRELATION = 0.97  # a placement lining the two up this well is not second-guessed by another
SETTLED_CORRELATION = 0.995  # a first placement lining the two up this well is not refined
REPEAT_PIXELS = 0.5  # of a fine copy: a placement putting the content's sides this near where one tried started or
# ended is not refined, and one refined this near where another ended is not judged again (the same groups on the
# three labelled sets, 9-22% fewer local-change measurements)
MAX_STRETCH = 0.05  # in the log, one side's scale against the other's beyond both a whole copy's (none) and a
# squashed copy's (the pictures' shapes): a placement stretching more is wrong (on a real plain picture, 0.9 against
# 1.33, and a boot splash in a white frame 1.149 against 1.266: their copies were split off their groups; of 1,857
# passes on two labelled sets the largest stretch was 0.026 but one 0.064, and squashed copies of 5-25% still pass)
HOPELESS_CORRELATION = 0.5  # after a level of the refinement: below it the next is not tried (on 1,410 real files
# no refinement rose from below it to 0.9; the placement keeps its start, as when the steps wander off)
WINDOW_SHARE = 0.05  # of the shorter side: the windows the leftover is averaged over
RESAMPLE_SHARE = 0.7  # of the size: a picture resampled this much and back shows where resampling aliases
CONCENTRATION_FLOOR = 0.001  # of the grey-level range: added to the 90th percentile window's leftover, so that a
# picture with no leftover in most windows (a clean diagram) does not make any speck infinitely concentrated
FINER_SIDE = 512  # a picture with small print is looked at again decoded reduced, no side under this
FINER_PIXELS = 512 * 512  # pixels of that finer greyscale copy, at most
SMALL_PRINT = (
    0.025  # of the grey-level range: a fine copy changing this much on average when resampled (`_resampling_change`)
)
# has small print (documents, receipts: 0.032-0.046 on tests/dedup_set.py; photos and charts 0.006-0.021)
COMPARE_PIXELS = FINE_PIXELS  # pixels the part both show is compared at, at most (fewer alias small print)
CONTENT_TOLERANCE = 8  # grey levels from a border's colour that still count as border
CONTENT_SHARE = 0.995  # of a row's pixels that must be that near for it to be border (stars on a night sky
# are content)
FRAME_APART = 3 * CONTENT_TOLERANCE  # grey levels between a frame's colour and the picture's first line inside
IN_PLACE_SHIFT = 0.25  # of a fine pixel: a placement moving no pixel more leaves the two on one grid
EDGE_LINES = 3  # lines of a fine copy inside a frame that a margin cut differently must not go on into
MAX_MOVED = 1.0  # fine pixels: pictures of one size lined up only by moving an end more are two pictures (on six
# labelled sets: 2,236 same-size copies passed moved at most 0.41 once kept in place unless moving gained; next
# frames merged before were moved 2.6-4.3)
MOVED_GAIN = 0.002  # of the correlation: what moving pictures of one size off their grid must gain to be kept (a
# brightened plain wallpaper's steps drifted 2.3 pixels for a gain of 0.0001)
MOVED_FAR = 2.0  # fine pixels: a move this far at an end is kept, gaining less, when it leaves at most
MOVED_SHARE = 0.8  # this share of the mismatch (1 - correlation) unexplained: the next frames of plain wallpapers,
# panned 1% and lined up at 0.996-0.999 before moving, move 2.3-3.9 pixels and leave 17-71% of it; of 3,107
# same-size copies on six labelled sets, refined from in place, 7 moved over a pixel: 6 at most 1.32 pixels, and a
# brightened wallpaper drifted 2.54 pixels leaving 97%
UNMOVED_CORRELATION = 0.9995  # pictures of one size lined up in place this well are not refined to look for a pan:
# the next frames of those six sets line up in place at most at 0.9992, and 79% of the same-size copies within it
FRAME_SLACK = 1.5  # pixels of a fine copy past a frame's edge where a picture may still lie (placement, blend)


class Picture(NamedTuple):
    """What the verification and the keep rule read of one picture, from one decode."""

    fine: np.ndarray  # uint8 greyscale, at most FINE_PIXELS, upright
    content: tuple[float, float, float, float]  # box without uniform borders, in `fine` pixels
    size: tuple[int, int]  # width and height of the full-size upright picture
    traits: Traits
    frame: tuple[float, float, float, float]  # box without an added frame (`boxes`), in `fine` pixels


def content_box(grey: Image.Image) -> tuple[float, float, float, float]:
    """The picture's content box (`boxes`)."""
    return boxes(np.asarray(grey))[0]


def boxes(grey: np.ndarray) -> tuple[Box, Box]:
    """(content box, frame box) of a greyscale picture, each (left, top, right, bottom).
    The content box leaves out uniform borders: rows and columns CONTENT_SHARE of whose pixels are within
    CONTENT_TOLERANCE grey levels of one colour (`likeness.trim_steps`; looser, it takes a plain background for a
    frame). It is what placements line up and the keep rule measures.
    The frame box leaves out only an added frame: of the outermost border, the sides where the line just inside
    stands apart from the border's colour (its median more than FRAME_APART away; a gradient trimmed where it
    leaves the tolerance does not). A side where the plain colour goes on into the picture (a plain background,
    or a frame and a background of its colour together) keeps its border: what a copy shows on a plain
    background (a label painted on it, the strip a camera shift adds) is compared, and counts when one picture
    falls outside the other."""
    pixels = grey.astype(np.int16)
    height, width = pixels.shape
    whole = (0.0, 0.0, float(width), float(height))
    steps = trim_steps(pixels, 3, CONTENT_TOLERANCE, CONTENT_SHARE)
    if not steps:
        return whole, whole
    (left, top, right, bottom), colour = steps[0]
    lines = (
        pixels[top:bottom, left],
        pixels[top, left:right],
        pixels[top:bottom, right - 1],
        pixels[bottom - 1, left:right],
    )
    frame = tuple(
        float(inner if abs(int(np.median(line)) - colour) > FRAME_APART else outer)
        for inner, outer, line in zip((left, top, right, bottom), whole, lines)
    )
    return tuple(float(value) for value in steps[-1][0]), frame


def picture(path: Path, max_pixels: int, data: bytes | None = None) -> Picture:
    """The Picture of one file, from one reduced decode (raises ImageDecodeError)."""
    from benchcurate.curation.core.decode import decode_image

    data = path.read_bytes() if data is None else data
    return picture_of(decode_image(path, max_pixels, DECODE_SIDE, data, shrink_all=True), data)


def picture_of(decoded, data: bytes) -> Picture:
    """The Picture of a decoded file (`decode.DecodedImage`, upright RGB, perhaps reduced) and its bytes."""
    rgb = _scaled(decoded.image, (decoded.width, decoded.height), FINE_PIXELS)
    grey = rgb.convert("L")
    fine = np.asarray(grey)
    box, frame = boxes(fine)
    return Picture(
        fine,
        box,
        (decoded.width, decoded.height),
        traits(rgb, grey, box, data, decoded.format, decoded.width * decoded.height),
        frame,
    )


def finer(path: Path, max_pixels: int) -> np.ndarray:
    """The finer greyscale copy of a file (upright, at most FINER_PIXELS), from one reduced decode (raises
    ImageDecodeError)."""
    from benchcurate.curation.core.decode import decode_image

    decoded = decode_image(path, max_pixels, FINER_SIDE, shrink_all=True)
    return np.asarray(_scaled(decoded.image.convert("L"), (decoded.width, decoded.height), pixels=FINER_PIXELS))


def _scaled(image: Image.Image, size: tuple[int, int], pixels: int) -> Image.Image:
    """A decode (perhaps reduced) of a picture of full `size`, box-averaged to the shape that size scales to at
    most `pixels` pixels. The shape comes from the full size, not the decode's: a JPEG's draft (1152 x 860 read
    at 576 x 430) and a PNG of the same pixels box-reduced by a whole factor (384 x 286: the remainder rounds
    away) then give one shape, and the two copies lie on one grid (`_in_place`): the change between them is
    judged as between copies on one grid, not excused as resampling."""
    shape = _scaled_size(size, pixels)
    return image if image.size == shape else image.resize(shape, Image.Resampling.BOX)


def _scaled_size(size: tuple[int, int], pixels: int) -> tuple[int, int]:
    """(width, height) a picture of full `size` scales to at most `pixels` pixels (its size when it has fewer: a
    decode is reduced only when both sides are at least twice DECODE_SIDE, so such a picture was not)."""
    width, height = size
    scale = (pixels / (width * height)) ** 0.5
    return size if scale >= 1 else (max(1, round(width * scale)), max(1, round(height * scale)))


PICTURE_VERSION = 3  # of `pack`'s layout: 1 had no frame box, 2 a fine copy shaped from the reduced decode


class UnknownPicture(ValueError):
    """Bytes `pack` wrote in a layout this version does not know (a newer one): the picture is made again."""


def pack(found: Picture) -> bytes:
    """A Picture as bytes for the run cache and a hashes file's side file (`unpack` reads it)."""
    header = json.dumps(
        {
            "version": PICTURE_VERSION,
            "shape": found.fine.shape,
            "content": found.content,
            "size": found.size,
            "traits": found.traits._asdict(),
            "frame": found.frame,
        }
    ).encode()
    return len(header).to_bytes(4, "little") + header + zlib.compress(found.fine.tobytes(), 1)


def unpack(raw: bytes) -> Picture:
    """A Picture `pack` wrote (`UnknownPicture` for a layout newer than PICTURE_VERSION). One written before the
    layout had a version is read by what it holds: one whose shape did not come from the full size (`_scaled`:
    a PNG's fine copy could be a pixel wider than its JPEG's) is box-resampled to that shape and its boxes
    scaled, so a hashes file from then still puts a JPEG and a lossless copy of its pixels on one grid; one
    written before frames were kept gets its frame box."""
    length = int.from_bytes(raw[:4], "little")
    header = json.loads(raw[4 : 4 + length])
    version = header.get("version")
    if version is not None and version != PICTURE_VERSION:
        raise UnknownPicture(f"picture layout {version}; this version reads {PICTURE_VERSION} and older")
    fine = np.frombuffer(zlib.decompress(raw[4 + length :]), dtype=np.uint8).reshape(header["shape"])
    content = tuple(header["content"])
    frame = tuple(header["frame"]) if "frame" in header else None
    width, height = _scaled_size(tuple(header["size"]), FINE_PIXELS)
    if version is None and fine.shape != (height, width):
        onto = Placement(width / fine.shape[1], 0.0, height / fine.shape[0], 0.0)
        fine = np.asarray(Image.fromarray(fine).resize((width, height), Image.Resampling.BOX))
        content = onto.box(content)
        frame = frame and onto.box(frame)
    return Picture(fine, content, tuple(header["size"]), Traits(**header["traits"]), frame or boxes(fine)[1])


# where a point (x, y) of a picture width x height goes under each PIL transpose (continuous coordinates)
_POINT = {
    Image.Transpose.FLIP_LEFT_RIGHT: lambda x, y, w, h: (w - x, y),
    Image.Transpose.FLIP_TOP_BOTTOM: lambda x, y, w, h: (x, h - y),
    Image.Transpose.ROTATE_90: lambda x, y, w, h: (y, w - x),
    Image.Transpose.ROTATE_180: lambda x, y, w, h: (w - x, h - y),
    Image.Transpose.ROTATE_270: lambda x, y, w, h: (h - y, x),
    Image.Transpose.TRANSPOSE: lambda x, y, w, h: (y, x),
    Image.Transpose.TRANSVERSE: lambda x, y, w, h: (h - y, w - x),
}


def inverse(orientation: str) -> str:
    """The turn that undoes `orientation`."""
    return {"rotate_90": "rotate_270", "rotate_270": "rotate_90"}.get(orientation, orientation)


def _compositions() -> dict[tuple[str, str], str]:
    probe = np.arange(6, dtype=np.uint8).reshape(2, 3)
    turned = {
        name: np.asarray(Image.fromarray(probe).transpose(t)) if t is not None else probe
        for name, t in PIL_TRANSPOSE.items()
    }
    found = {}
    for first, second in ((a, b) for a in PIL_TRANSPOSE for b in PIL_TRANSPOSE):
        step = PIL_TRANSPOSE[second]
        both = turned[first] if step is None else np.asarray(Image.fromarray(turned[first]).transpose(step))
        found[(first, second)] = next(
            name for name, pixels in turned.items() if pixels.shape == both.shape and np.array_equal(pixels, both)
        )
    return found


COMPOSED = _compositions()  # (first turn, then second turn) -> the one turn that does both


def oriented(found: Picture, orientation: str) -> Picture:
    """The picture turned (a candidate pair's orientation), its boxes and size with it."""
    transpose = PIL_TRANSPOSE[orientation]
    if transpose is None:
        return found
    height, width = found.fine.shape

    def turned(box: Box) -> Box:
        corners = [_POINT[transpose](x, y, width, height) for x, y in ((box[0], box[1]), (box[2], box[3]))]
        return (
            min(c[0] for c in corners),
            min(c[1] for c in corners),
            max(c[0] for c in corners),
            max(c[1] for c in corners),
        )

    size = found.size[::-1] if ORIENTATIONS[orientation][0] else found.size
    return Picture(
        np.asarray(Image.fromarray(found.fine).transpose(transpose)),
        turned(found.content),
        size,
        found.traits,
        turned(found.frame),
    )


def squeezed_correlations(first: Picture, second: Picture, turns: list[str]) -> dict[str, float]:
    """For each turn of the first picture, how its content squeezed to 32 x 32 pixels correlates with the
    second's (one resize each: the first's small copy is turned, which is the small copy of it turned)."""

    def squeezed(found: Picture) -> Image.Image:
        return Image.fromarray(found.fine).resize((32, 32), Image.Resampling.BOX, box=found.content)

    def standardised(image: Image.Image) -> np.ndarray:
        return _standardised(np.asarray(image, dtype=np.float32), 0)

    small, target = squeezed(first), standardised(squeezed(second))
    return {
        turn: float(
            (
                standardised(small if PIL_TRANSPOSE[turn] is None else small.transpose(PIL_TRANSPOSE[turn])) * target
            ).mean()
        )
        for turn in turns
    }


def likeliest_turns(first: Picture, second: Picture, turns: list[str], keep: int) -> list[str]:
    """The `keep` turns of the first picture (of `turns`, in their order when there are no more) whose content,
    squeezed to 32 x 32 pixels, correlates best with the second's: a picture whose pHash is near another's in
    every orientation (a simple icon) is verified in the likeliest few, not in all eight."""
    if len(turns) <= keep:
        return turns
    scores = squeezed_correlations(first, second, turns)
    return sorted(turns, key=lambda turn: -scores[turn])[:keep]


# --- placement -------------------------------------------------------------------------------------------------

Box = tuple[float, float, float, float]


class Placement(NamedTuple):
    """A linear map of the first picture's `fine` pixels onto the second's: x2 = ax * x1 + bx (likewise y)."""

    ax: float
    bx: float
    ay: float
    by: float

    def box(self, box: Box) -> Box:
        return (
            self.ax * box[0] + self.bx,
            self.ay * box[1] + self.by,
            self.ax * box[2] + self.bx,
            self.ay * box[3] + self.by,
        )

    def inverse(self) -> Placement:
        return Placement(1 / self.ax, -self.bx / self.ax, 1 / self.ay, -self.by / self.ay)

    def after(self, first: Placement) -> Placement:
        """`first`, then this map."""
        return Placement(
            self.ax * first.ax, self.ax * first.bx + self.bx, self.ay * first.ay, self.ay * first.by + self.by
        )


def between(first: Box, second: Box) -> Placement:
    """The map that takes box `first` onto box `second`."""
    ax = (second[2] - second[0]) / max(first[2] - first[0], 1e-6)
    ay = (second[3] - second[1]) / max(first[3] - first[1], 1e-6)
    return Placement(ax, second[0] - ax * first[0], ay, second[1] - ay * first[1])


def _size_for(box: Box, pixels: int) -> tuple[int, int]:
    """The box's shape scaled to about `pixels` pixels (never up)."""
    width, height = box[2] - box[0], box[3] - box[1]
    scale = min(1.0, (pixels / max(width * height, 1e-6)) ** 0.5)
    return max(8, round(width * scale)), max(8, round(height * scale))


def _sample(image: Image.Image, box: Box, size: tuple[int, int]) -> np.ndarray:
    """`box` of the image resampled to `size`; parts of the box outside the image repeat its edge."""
    left, top, right, bottom = box
    if left < 0 or top < 0 or right > image.width or bottom > image.height:
        pad_x = int(np.ceil(max(0.0, -left, right - image.width))) + 1
        pad_y = int(np.ceil(max(0.0, -top, bottom - image.height))) + 1
        pixels = np.asarray(image)  # its edge repeated pad_y rows and pad_x columns out (`np.pad`'s "edge")
        rows = np.clip(np.arange(-pad_y, pixels.shape[0] + pad_y), 0, pixels.shape[0] - 1)
        columns = np.clip(np.arange(-pad_x, pixels.shape[1] + pad_x), 0, pixels.shape[1] - 1)
        padded = pixels[rows[:, None], columns]
        image, box = Image.fromarray(padded), (left + pad_x, top + pad_y, right + pad_x, bottom + pad_y)
    return np.asarray(image.resize(size, Image.Resampling.BILINEAR, box=box), dtype=np.float32)


class _Samples:
    """`_sample` of one picture, each (box, size) resampled once: the first picture of a pair is sampled over its
    content box at the same sizes for every placement tried (`_correlation`, each level of `_refine`)."""

    def __init__(self, image: Image.Image) -> None:
        self.image = image
        self.found: dict[tuple[Box, tuple[int, int]], np.ndarray] = {}

    def __call__(self, box: Box, size: tuple[int, int]) -> np.ndarray:
        key = (tuple(box), size)
        if key not in self.found:
            pixels = _sample(self.image, box, size)
            pixels.flags.writeable = False  # shared by every caller
            self.found[key] = pixels
        return self.found[key]


class _Turned(NamedTuple):
    picture: Picture  # turned
    image: Image.Image  # its fine copy
    samples: _Samples


_TURNED: OrderedDict[tuple[int, str], tuple[Picture, _Turned]] = OrderedDict()
TURNED_KEEP = 8  # pictures (with a turn) whose turned copy and samples are kept


def _turned(found: Picture, orientation: str) -> _Turned:
    """The first picture of a pair turned, as an image, and its samples (`_Samples`), made once for the last
    TURNED_KEEP asked for: a group's centre is the first picture of most pairs verified. Kept by identity (the
    picture is held with them, so its id is not reused while they are kept)."""
    key = (id(found), orientation)
    entry = _TURNED.pop(key, None)  # each step one operation on the dict: safe if two threads verify at once
    if entry is None or entry[0] is not found:
        turned = oriented(found, orientation)
        image = Image.fromarray(turned.fine)
        entry = (found, _Turned(turned, image, _Samples(image)))
    _TURNED[key] = entry  # the most recent last
    while len(_TURNED) > TURNED_KEEP:
        try:
            _TURNED.popitem(last=False)
        except KeyError:  # another thread emptied it
            break
    return entry[1]


def _padded(pixels: np.ndarray) -> np.ndarray:
    """The picture with a one-pixel edge repeated around it (`np.pad(..., mode="edge")` without its overhead,
    which on these small copies costs more than the copying)."""
    out = np.empty((pixels.shape[0] + 2, pixels.shape[1] + 2), dtype=pixels.dtype)
    out[1:-1, 1:-1] = pixels
    out[0, 1:-1], out[-1, 1:-1] = pixels[0], pixels[-1]
    out[:, 0], out[:, -1] = out[:, 1], out[:, -2]
    return out


def _sampler(image: Image.Image, box: Box, size: tuple[int, int]) -> Callable[[Box], np.ndarray]:
    """`_sample` of boxes near `box` at `size`, from the image box-averaged once by the whole factor the boxes
    shrink by (each step of the refinement then resamples about one pixel to one, not a wide filter)."""
    factor = int(min((box[2] - box[0]) / size[0], (box[3] - box[1]) / size[1]))
    if factor < 2:
        return lambda wanted: _sample(image, wanted, size)
    small = image.reduce(factor)
    return lambda wanted: _sample(small, tuple(value / factor for value in wanted), size)


def _blur(pixels: np.ndarray, times: int = 1) -> np.ndarray:
    """A [1, 2, 1] / 4 blur along each axis, `times` over (about 0.7 pixels of Gaussian blur each), edges
    repeated."""
    for _ in range(times):
        padded = _padded(pixels)
        pixels = _weighted(padded[:, :-2], padded[:, 1:-1], padded[:, 2:])
        pixels = _weighted(pixels[:-2], pixels[1:-1], pixels[2:])
    return pixels


def _weighted(before: np.ndarray, at: np.ndarray, after: np.ndarray) -> np.ndarray:
    """(before + 2 * at + after) * 0.25, in that order, in one new array."""
    out = np.multiply(at, 2)
    np.add(before, out, out=out)
    np.add(out, after, out=out)
    return np.multiply(out, 0.25, out=out)


def _extreme(pixels: np.ndarray, function: np.ufunc) -> np.ndarray:
    """The maximum (or minimum) of each pixel's 3 x 3 neighbourhood, edges repeated."""
    padded = _padded(pixels)
    rows = function(padded[:, :-2], padded[:, 1:-1])
    function(rows, padded[:, 2:], out=rows)
    out = function(rows[:-2], rows[1:-1])
    return function(out, rows[2:], out=out)


def _standardised(pixels: np.ndarray, blur: int) -> np.ndarray:
    """The picture blurred, less its mean, over its standard deviation (`std` as numpy computes it, from the one
    subtraction of the mean)."""
    blurred = _blur(pixels, blur)
    centred = blurred - blurred.mean()
    deviation = np.sqrt(blurred.dtype.type(np.square(centred).sum() / np.intp(centred.size)))
    return np.divide(centred, max(float(deviation), 1e-3), out=centred)


def _correlation(first: _Samples, box: Box, second: Image.Image, placement: Placement) -> float:
    """How well `second` over the mapped box matches `first` over `box`, at the refinement's finer level."""
    pixels, _, blur = REFINE_LEVELS[-1]
    size = _size_for(box, pixels)
    first_pixels, second_pixels = first(box, size), _sample(second, placement.box(box), size)
    return float((_standardised(tone(first_pixels, second_pixels), blur) * _standardised(second_pixels, blur)).mean())


def _refine(
    first: _Samples, box: Box, second: Image.Image, placement: Placement, start: float, near: bool = False
) -> tuple[Placement, float]:
    """The placement refined so that `second` over the mapped box matches `first` over `box` (Gauss-Newton on
    the four ends of the mapped box, with the first's gradients; coarse then fine: REFINE_LEVELS), and the
    correlation of the two at the end (`start`: the one before). A placement lining the two up within
    SETTLED_CORRELATION is left as it is, unless `near` asks to refine it anyway, on the finer level only."""
    mapped = np.array(placement.box(box), dtype=np.float64)
    correlation = -1.0
    if start >= SETTLED_CORRELATION and not near:  # already lined up (the same framing): nothing to refine
        return placement, start
    for pixels, steps, blur in REFINE_LEVELS[-1:] if near else REFINE_LEVELS:
        size = _size_for(box, pixels)
        sample = _sampler(second, tuple(mapped), size)
        current = sample(tuple(mapped))  # the second where the map puts it now
        # the first in the second's grey levels (a brightened copy's pale rows turned white would pull the map)
        target = _standardised(tone(first(box, size), current), blur)
        width, height = size
        along_x = (np.arange(width, dtype=np.float32) + 0.5) / width
        along_y = (np.arange(height, dtype=np.float32) + 0.5) / height
        grad_y, grad_x = np.gradient(target)
        shape = np.stack(
            [
                (grad_x * (1 - along_x)[None]).ravel(),
                (grad_y * (1 - along_y)[:, None]).ravel(),
                (grad_x * along_x[None]).ravel(),
                (grad_y * along_y[:, None]).ravel(),
            ],
            axis=1,
        )
        normal = shape.T @ shape  # the Jacobian is `shape` with its columns scaled: its normal matrix scales too
        for _ in range(steps):
            moved = _standardised(current, blur)
            scale = np.array([width / max(mapped[2] - mapped[0], 1e-6), height / max(mapped[3] - mapped[1], 1e-6)] * 2)
            step = np.linalg.solve(
                normal * np.outer(scale, scale) + 1e-3 * np.eye(4), scale * (shape.T @ (target - moved).ravel())
            )
            step = np.clip(step, -0.1 * (mapped[2] - mapped[0]), 0.1 * (mapped[2] - mapped[0]))
            mapped += step
            if mapped[2] - mapped[0] < 4 or mapped[3] - mapped[1] < 4:
                return placement, -1.0
            current = sample(tuple(mapped))
            if np.abs(step).max() < 0.1:
                break
        moved = _standardised(current, blur)
        correlation = float((moved * target).mean())
        if correlation < HOPELESS_CORRELATION:  # nothing lines up even coarsely (or the steps wandered off)
            return placement, start
    if correlation < start:  # no detail to steer by (a night sky): the steps wandered off
        return placement, start
    return between(box, tuple(mapped)), correlation


def uncovered(first: Picture, second: Picture, placement: Placement) -> float:
    """The smaller of: the share of the first picture the second does not show (`_beyond`), and the other way
    round. A crop or a frame leaves one inside the other; a camera shift leaves each partly outside the other,
    also when a frame around one has room for the other."""
    return min(_beyond(first, second, placement), _beyond(second, first, placement.inverse()))


def _beyond(first: Picture, second: Picture, placement: Placement) -> float:
    """The share of the first picture (without its frame: no content) that falls outside the second, or on the
    second's frame where the first shows no margin of its own there (`_margin`: a white page's margin cut
    differently is a margin; a strip of the scene or of a plain sky is not)."""
    mapped = placement.box(_unframed(first))
    area = _area(mapped)
    inside = _meet(mapped, _whole(second))
    if inside is None:
        return 1.0
    missing = area - _area(inside)
    back = placement.inverse()
    for strip, edge in _frame_strips(inside, second):
        if not _margin(first.fine, back.box(strip), back.box(edge)):
            missing += _area(strip)
    return missing / max(area, 1e-9)


def _area(box: Box) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def _meet(first: Box, second: Box) -> Box | None:
    """The intersection of two boxes, None when empty."""
    box = _overlap(first, second)
    return box if box[2] > box[0] and box[3] > box[1] else None


def _overlap(first: Box, second: Box) -> Box:
    """The intersection of two boxes (its right below its left, or its bottom above its top, when empty)."""
    return (max(first[0], second[0]), max(first[1], second[1]), min(first[2], second[2]), min(first[3], second[3]))


def _frame_strips(inside: Box, found: Picture) -> Iterable[tuple[Box, Box]]:
    """The parts of `inside` (a box within the picture) on the picture's frame, more than FRAME_SLACK pixels out
    from where the frame ends, each with the EDGE_LINES lines inside the frame along it."""
    left, top, right, bottom = _unframed(found)
    x0, y0, x1, y1 = _overlap(inside, (left, top, right, bottom))
    sides = (
        ((inside[0], inside[1], left - FRAME_SLACK, inside[3]), (left, y0, left + EDGE_LINES, y1)),
        ((right + FRAME_SLACK, inside[1], inside[2], inside[3]), (right - EDGE_LINES, y0, right, y1)),
        ((x0, inside[1], x1, top - FRAME_SLACK), (x0, top, x1, top + EDGE_LINES)),
        ((x0, bottom + FRAME_SLACK, x1, inside[3]), (x0, bottom - EDGE_LINES, x1, bottom)),
    )
    for strip, edge in sides:
        if strip[2] > strip[0] and strip[3] > strip[1] and edge[2] > edge[0] and edge[3] > edge[1]:
            yield strip, edge


def _margin(pixels: np.ndarray, strip: Box, edge: Box) -> bool:
    """Whether a strip of a picture is a plain margin: plain (`_plain_colour`, a pixel in from its sides, where a
    frame or an edge blends in), and the lines along its inner edge not of its colour (less than CONTENT_SHARE of
    them within CONTENT_TOLERANCE of it: where `boxes` ends a border). A plain colour going on past the edge is
    part of the picture. A strip under a pixel wide is nothing to judge."""
    if min(strip[2] - strip[0], strip[3] - strip[1]) < 1:
        return True
    inner = (strip[0] + 1, strip[1] + 1, strip[2] - 1, strip[3] - 1)
    colour = _plain_colour(pixels, inner if min(inner[2] - inner[0], inner[3] - inner[1]) >= 1 else strip)
    lines = _cut(pixels, edge)
    return colour is not None and float((np.abs(lines - colour) <= CONTENT_TOLERANCE).mean()) < CONTENT_SHARE


def _plain_colour(pixels: np.ndarray, box: Box) -> int | None:
    """The median grey level of a part of a picture when it is plain: no more than 1 - CONTENT_SHARE of it (what
    `boxes` allows a border) over twice CONTENT_TOLERANCE from it (a copy's noise may stray further than a
    border's own; a label or an object does by far); else None."""
    band = _cut(pixels, box)
    colour = int(np.median(band))
    return colour if float((np.abs(band - colour) > 2 * CONTENT_TOLERANCE).mean()) <= 1 - CONTENT_SHARE else None


def _cut(pixels: np.ndarray, box: Box) -> np.ndarray:
    """The pixels a box covers (at least one: the nearest to the picture, when it lies off it), as int16."""
    height, width = pixels.shape
    x0, y0 = min(width - 1, max(0, int(np.floor(box[0])))), min(height - 1, max(0, int(np.floor(box[1]))))
    x1, y1 = min(width, max(x0 + 1, int(np.ceil(box[2])))), min(height, max(y0 + 1, int(np.ceil(box[3]))))
    return pixels[y0:y1, x0:x1].astype(np.int16)


def _unframed(found: Picture) -> Box:
    """The frame box with the line `likeness.trim_steps` leaves out inside a cut border given back: the picture
    ends there, the blend of border and picture included."""
    height, width = found.fine.shape
    left, top, right, bottom = found.frame
    return (left - (left > 0), top - (top > 0), right + (right < width), bottom + (bottom < height))


# --- the local change ------------------------------------------------------------------------------------------


def tone(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """`source` (grey levels 0-255) mapped through the monotone curve that best predicts `target` from it."""
    rounded = np.rint(source)
    levels = np.clip(rounded, 0, 255, out=rounded).astype(np.intp).ravel()
    per_level = np.bincount(levels, minlength=256)
    sums = np.bincount(levels, target.ravel(), minlength=256)
    counts = per_level.reshape(TONE_BINS, -1).sum(axis=1)  # levels * TONE_BINS >> 8: 4 levels a bin
    used = counts > 0
    means = sums.reshape(TONE_BINS, -1).sum(axis=1)[used] / counts[used]
    centres = (per_level * _LEVELS).reshape(TONE_BINS, -1).sum(axis=1)[used] / counts[used]
    table = np.interp(_LEVELS, centres, isotonic(means, counts[used].astype(np.float64)))
    return table.astype(np.float32)[levels].reshape(source.shape)


_LEVELS = np.arange(256, dtype=np.float64)


def _resampling_change(pixels: np.ndarray) -> np.ndarray:
    """How much each pixel changes when the picture is resampled to RESAMPLE_SHARE of its size and back (fine
    periodic patterns such as barcodes and small print alias: a copy at another scale differs there anyway)."""
    image = Image.fromarray(pixels, mode="F")
    small = image.resize(
        (max(2, round(image.width * RESAMPLE_SHARE)), max(2, round(image.height * RESAMPLE_SHARE))),
        Image.Resampling.BILINEAR,
    )
    back = np.asarray(small.resize(image.size, Image.Resampling.BILINEAR), dtype=np.float32)
    return _blur(np.abs(pixels - back))


class _Prepared:
    """One side of a comparison: its pixels blurred, and what predicting it from the other side reads (computed
    when first read: in the first direction only the predicted side's are)."""

    def __init__(self, pixels: np.ndarray) -> None:
        self.blurred = _blur(pixels)

    @cached_property
    def high(self) -> np.ndarray:  # 3 x 3 maximum of `blurred`
        return _extreme(self.blurred, np.maximum)

    @cached_property
    def low(self) -> np.ndarray:
        return _extreme(self.blurred, np.minimum)

    @cached_property
    def spread(self) -> float:  # grey levels from the 1st to the 99th percentile, plus one
        low, high = percentiles(self.blurred[::2, ::2], [1, 99])
        return float(high - low) + 1.0


def percentiles(values: np.ndarray, percents: float | list[float]) -> np.ndarray:
    """`np.percentile(values, percents)` for finite float values (its default, linear interpolation, in the
    precision it picks: the values' for one percent, double for a list), the same numbers without its general
    machinery, which on these small arrays costs several times the selection itself."""
    flat = values.ravel()
    count = flat.size
    virtual = np.asarray((count - 1) * np.asarray(np.true_divide(percents, values.dtype.type(100))))
    previous = np.floor(virtual)
    at = np.minimum(previous, count - 1).astype(np.intp)  # at the last value both ends are it
    ordered = np.partition(flat, np.unique(np.concatenate((at.ravel(), np.minimum(at + 1, count - 1).ravel()))))
    low, high = ordered[at], ordered[np.minimum(at + 1, count - 1)]
    gamma = np.asarray(virtual - previous, dtype=virtual.dtype)
    difference = np.subtract(high, low)
    found = np.asarray(np.add(low, difference * gamma))
    np.subtract(high, difference * (1 - gamma), out=found, where=gamma >= 0.5)  # numpy's way near the upper end
    return found[()] if found.ndim == 0 else found


class Leftover(NamedTuple):
    """How one region of a picture stands out from its prediction from the other (shares of its grey-level range,
    windows of WINDOW_SHARE): the largest window above the 90th percentile of all windows, and that excess over
    the 90th percentile window (a spread residual, as a tone change or sharpening leaves, is near 1; a changed
    region far above: `concentration`)."""

    excess: float
    concentration: float


def _mismatch(source: _Prepared, target: _Prepared) -> np.ndarray:
    """Per pixel, how far `target` is outside the range its prediction from `source` takes within one pixel, or
    the prediction outside the pixel's range (the larger)."""
    predicted = tone(source.blurred, target.blurred)
    outside = _above(target.blurred, _extreme(predicted, np.maximum))
    np.add(outside, _above(_extreme(predicted, np.minimum), target.blurred), out=outside)
    missed = _above(predicted, target.high)
    np.add(missed, _above(target.low, predicted), out=missed)
    return np.maximum(outside, missed, out=outside)


def _above(values: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """max(values - bound, 0), in one new array."""
    out = np.subtract(values, bound)
    return np.maximum(out, 0, out=out)


def _leftover(source: _Prepared, target: _Prepared, unstable: np.ndarray | None) -> Leftover:
    """How far one region of `target` stands out from its prediction from `source` (see the module)."""
    return _standing_out(_mismatch(source, target), target, unstable)


def _standing_out(mismatch: np.ndarray, target: _Prepared, unstable: np.ndarray | None) -> Leftover:
    """`_leftover` of a `_mismatch` with `target`, less `unstable` (what resampling changes) when given."""
    from scipy.ndimage import uniform_filter

    found = (mismatch if unstable is None else np.maximum(mismatch - unstable, 0))[1:-1, 1:-1]
    if min(found.shape) < 4:
        return Leftover(0.0, 0.0)
    windows = uniform_filter(found, max(3, int(WINDOW_SHARE * min(found.shape))))
    # percentiles on every other row and column: windows vary slowly, and a sort of all of them costs more
    ninetieth = float(percentiles(windows[::2, ::2], 90))
    spread = target.spread
    excess = (float(windows.max()) - ninetieth) / spread
    return Leftover(excess, excess / (ninetieth / spread + CONCENTRATION_FLOOR))


def small_print(found: Picture) -> float:
    """How much the fine copy changes on average when resampled (`_resampling_change`), as a share of its
    grey-level range: small print and barcodes change most, and hide a swapped word at this size."""
    pixels = found.fine.astype(np.float32)
    low, high = percentiles(pixels[::2, ::2], [1, 99])
    return float(_resampling_change(pixels).mean()) / (float(high - low) + 1.0)


def same_grid_concentration(first: np.ndarray, second: np.ndarray, limit: float = -1.0) -> float:
    """How concentrated the change between two copies on one pixel grid is (`Leftover.concentration` without
    the allowance for resampling, the smaller direction): nothing was resampled between them, so a swapped
    word stands out of small print that a JPEG re-save or a tone change leaves spread. When the first direction
    is within `limit`, so is the smaller: that direction's value is returned without the other."""
    if first.shape != second.shape:
        return 0.0
    a, b = _Prepared(first.astype(np.float32)), _Prepared(second.astype(np.float32))
    forward = _leftover(a, b, None).concentration
    return forward if forward <= limit else min(forward, _leftover(b, a, None).concentration)


class LocalChange(NamedTuple):
    """`local_difference`'s result: the change (the smaller direction's), and, when it is over the limit, how
    concentrated it is (the smaller direction's, without the allowance for resampling; 0 when not measured)."""

    difference: float
    concentration: float


def local_difference(
    first: np.ndarray, second: np.ndarray, limit: float = float("inf"), resampled: bool = True
) -> LocalChange:
    """The local change between two aligned greyscale copies of one size: the smaller of the two directions.
    Within `limit` already before what resampling changes is allowed for, or in the first direction, the rest
    is not computed (the decision is the same; the value reported is then that upper bound). Over it, also how
    concentrated the change is (`Leftover.concentration`: a changed region, not a tone curve the fit missed).
    `resampled` false: the two are copies of one size on one grid, so only what resampling changes in both is
    allowed for.
    Each direction's mismatch is computed once, with and without the allowance."""
    a, b = _Prepared(first), _Prepared(second)
    forward_mismatch = _mismatch(a, b)
    rough = _standing_out(forward_mismatch, b, None)
    if rough.excess <= limit:
        return LocalChange(rough.excess, 0.0)
    # on one grid (`resampled` false) nothing aliases differently: only fine detail both show may differ (a
    # sharpened or blurred print), not detail one adds on a plain region (a label on a sky)
    unstable = (np.maximum if resampled else np.minimum)(_resampling_change(first), _resampling_change(second))
    forward = _standing_out(forward_mismatch, b, unstable).excess
    if forward <= limit:
        return LocalChange(forward, 0.0)
    backward_mismatch = _mismatch(b, a)
    difference = min(forward, _standing_out(backward_mismatch, a, unstable).excess)
    if difference <= limit:
        return LocalChange(difference, 0.0)
    return LocalChange(difference, min(rough.concentration, _standing_out(backward_mismatch, a, None).concentration))


# --- a pair ---------------------------------------------------------------------------------------------------


class Verdict(NamedTuple):
    """The verification of a pair: whether it is one picture, the evidence, and the placement (first turned by
    `orientation`, onto the second) the keep rule reads."""

    same: bool
    evidence: dict
    orientation: str
    placement: Placement | None


def _whole(found: Picture) -> Box:
    """The box of the whole fine copy."""
    height, width = found.fine.shape
    return (0.0, 0.0, float(width), float(height))


def _simple(first: Picture, second: Picture) -> list[tuple[str, Placement]]:
    """The placements that cost nothing to find: whole on whole, and content on content when either has borders."""
    whole1, whole2 = _whole(first), _whole(second)
    found = [("whole", between(whole1, whole2))]
    if first.content != whole1 or second.content != whole2:
        found.append(("content", between(first.content, second.content)))
    return found


def _crops(first: Picture, second: Picture) -> Iterable[tuple[str, Placement]]:
    """The placements of a crop inside its original, each way (`likeness.place`), found when asked for."""
    whole1, whole2 = _whole(first), _whole(second)
    images = (Image.fromarray(first.fine), Image.fromarray(second.fine))
    for box1, box2 in dict.fromkeys(((first.content, second.content), (whole1, whole2))):  # once without borders
        squares = [
            np.asarray(image.resize((PLACE_SIDE, PLACE_SIDE), Image.Resampling.BILINEAR, box=box))
            for image, box in zip(images, (box1, box2))
        ]
        sizes = [(box[2] - box[0], box[3] - box[1]) for box in (box1, box2)]
        found = []
        for big, small in ((0, 1), (1, 0)):  # the second inside the first, the first inside the second
            ratio = (sizes[small][0] / sizes[big][0]) / (sizes[small][1] / sizes[big][1])
            window = place(squares[big], squares[small], ratio)
            if window is not None:
                found.append((window.correlation, big, window))
        for _, big, window in sorted(found, key=lambda entry: -entry[0])[:1]:
            outer = (box1, box2)[big]
            span_x, span_y = outer[2] - outer[0], outer[3] - outer[1]
            inner = (
                outer[0] + window.left * span_x,
                outer[1] + window.top * span_y,
                outer[0] + (window.left + window.width) * span_x,
                outer[1] + (window.top + window.height) * span_y,
            )
            yield "placed", between(box1, inner) if big == 1 else between(inner, box2)


def lines_up(same: bool, correlation: float | None) -> bool:
    """Whether a judged placement is one to read a change or a framing from: it passed, or it correlates at least
    LINED_UP_CORRELATION (a looser one may be misplaced)."""
    return same or (correlation is not None and correlation >= LINED_UP_CORRELATION)


def rank(same: bool, correlation: float, difference: float) -> tuple:
    """How a judged placement ranks as a pair's evidence (larger first): a pass, then a failed placement lining
    the two up (`lines_up`), then the smaller local difference. A loose placement showing less change does not
    hide a change a placement lining the two up showed (`near_dedup.changed` reads the evidence)."""
    return (same, lines_up(same, correlation), -difference)


def _shared(first: Picture, second: Picture, placement: Placement) -> list[Box]:
    """The parts of the first picture compared with the second (placed on it by `placement`): both content boxes
    (what both show without plain borders), then, when it differs, that part widened to the frame boxes where
    one picture is plain and the other is not (`_plain_colour`: a label painted on a plain background that the
    other copy shows plain, and trims). Each is judged alone: the local change looks for one region standing
    out, and a wide difference (a field of stars beside a black sky) would hide one in the part both show."""
    back = placement.inverse()
    contents, frames = (first.content, back.box(second.content)), (first.frame, back.box(second.frame))
    both = _overlap(*frames)
    core, wider = [0.0] * 4, [0.0] * 4
    for side in range(4):
        low, high = (both[1], both[3]) if side in (0, 2) else (both[0], both[2])  # the band's extent across it
        inward, outward = (max, min) if side < 2 else (min, max)  # left and top: further in is larger
        tight, loose = inward(contents[0][side], contents[1][side]), outward(contents[0][side], contents[1][side])
        core[side] = wider[side] = tight
        if tight != loose:  # the band between is border to one picture and content to the other: is it plain?
            start, end = sorted((tight, loose))
            band = (start, low, end, high) if side in (0, 2) else (low, start, high, end)
            content_there = (first.fine, band) if contents[0][side] == loose else (second.fine, placement.box(band))
            if _plain_colour(*content_there) is None:
                wider[side] = inward(both[side], loose)
    return [tuple(core)] if wider == core else [tuple(core), tuple(wider)]


def _in_place(placement: Placement, found: Picture) -> bool:
    """Whether a placement leaves each pixel of the picture where it was (within IN_PLACE_SHIFT of a pixel at
    either end)."""
    return _moved(placement, found) <= IN_PLACE_SHIFT


def _moved(placement: Placement, found: Picture) -> float:
    """The most a placement moves an end of the picture, in its fine pixels."""
    height, width = found.fine.shape
    return max(
        abs(scale * end + shift - end)
        for scale, shift, side in ((placement.ax, placement.bx, width), (placement.ay, placement.by, height))
        for end in (0.0, float(side))
    )


def keeps_move(start: float, correlation: float, moved: float) -> bool:
    """Whether two pictures of one size, lined up in place at `start` and at `correlation` once refined to a
    place moving an end `moved` fine pixels, are taken as moved (a pan or a zoom) rather than left on their grid:
    moving gains MOVED_GAIN, or moves MOVED_FAR and leaves at most MOVED_SHARE of the mismatch. Steps on a plain
    picture drift without explaining anything; a pan explains much of what was left even at 0.998."""
    if correlation - start >= MOVED_GAIN:
        return True
    return moved > MOVED_FAR and 1.0 - correlation <= MOVED_SHARE * (1.0 - start)


def stretched(placement: Placement, first: Picture, second: Picture) -> bool:
    """Whether a placement stretches one side against the other by over MAX_STRETCH (in the log) more than both
    a copy of the whole scene (a crop, a frame or a resize scales both sides alike) and a squashed copy (the
    stretch the two pictures' sides imply) would: a fit on a plain picture, free to slide, placed them wrongly.
    A pixel over the shortest side of either is allowed on top: a real 16 x 12 thumbnail of a 400 x 301 picture
    was placed on it stretched by 5.2%, a third of a pixel over its 12."""
    if placement.ax <= 0 or placement.ay <= 0:  # turned inside out: no copy
        return True
    (height1, width1), (height2, width2) = first.fine.shape, second.fine.shape
    stretch = float(np.log(placement.ax / placement.ay))
    squash = float(np.log((width2 / width1) / (height2 / height1)))
    return min(abs(stretch), abs(stretch - squash)) > MAX_STRETCH + 1.0 / min(height1, width1, height2, width2)


def _repeats(box: Box, tried: list[Box]) -> bool:
    """Whether each side of `box` is within REPEAT_PIXELS of the same side of a box in `tried`."""
    return any(max(abs(a - b) for a, b in zip(box, other)) < REPEAT_PIXELS for other in tried)


def compare(
    first: Picture,
    second: Picture,
    orientation: str,
    max_local_difference: float,
    max_uncovered: float,
    early: bool = True,
) -> Verdict:
    """Verify a pair with the first turned by `orientation`: each placement in turn (`_simple`, the one correlating best
    first, then `_crops`; for two pictures of one size, whole on whole only), refined unless one tried started or
    ended there (`REPEAT_PIXELS`), and judged unless it stretches one side against the other (`stretched`); one that
    lines the two up, leaves little uncovered and shows no local change makes them one picture. With `early`, no
    placement is tried after a pass lining the two up within TRUSTED_CORRELATION, a second pass, or a failure lining
    them up that well and leaving little uncovered once whole and content placements were both tried (a crop would
    only find the same change; but a thin black frame around a dark sky trims into the sky, so content on content
    lines up 0.998 three pixels off, and whole on whole passes); a pass on a looser placement is checked against the
    next one (a dark picture laid whole on a copy with a black frame passes at 0.95, its content on the frame's inside
    fits at 0.99). The evidence is that of the best placement tried
    (`rank`: passes first, then failed ones lining the two up within LINED_UP_CORRELATION: a change a loose one
    shows is no evidence, `near_dedup.lined_up`)."""
    turned, image1, samples1 = _turned(first, orientation)
    image2 = Image.fromarray(second.fine)
    best: tuple | None = None
    one_grid = turned.size == second.size and turned.fine.shape == second.fine.shape  # copies lie on one grid

    def judged(name: str, placement: Placement, correlation: float) -> tuple | None:
        share = uncovered(turned, second, placement)
        grid = orientation == "identity" and turned.size == second.size and _in_place(placement, turned)
        local = None
        for shared in _shared(turned, second, placement):
            if shared[2] - shared[0] < 8 or shared[3] - shared[1] < 8:
                continue
            mapped = placement.box(shared)
            size = _size_for(
                (
                    0,
                    0,
                    min(shared[2] - shared[0], mapped[2] - mapped[0]),
                    min(shared[3] - shared[1], mapped[3] - mapped[1]),
                ),
                COMPARE_PIXELS,
            )
            local = local_difference(
                _sample(image1, shared, size), _sample(image2, mapped, size), max_local_difference, resampled=not grid
            )
            if local.difference > max_local_difference:  # a change in one part is a change
                break
        if local is None:
            return None
        moved = _moved(placement, second) if one_grid else 0.0
        same = share <= max_uncovered and local.difference <= max_local_difference and moved <= MAX_MOVED
        evidence = {
            "placed": name,
            "correlation": round(correlation, 3),
            "uncovered": round(float(share), 3),
            "local_difference": round(local.difference, 3),
            **({"concentration": round(local.concentration, 1)} if local.concentration else {}),
            **({"moved": round(moved, 2)} if moved > MAX_MOVED else {}),
        }
        return rank(same, correlation, local.difference), evidence, placement, share

    starts: list[Box] = []  # where each placement tried put the first's content before refining
    ends: list[Box] = []  # and after (each judged, when it lined the two up)

    def placements() -> Iterator[tuple[str, Placement, float | None, bool]]:
        """Each placement to try with its correlation before refining: the simple ones, the one lining the two up
        best first (a copy with a wide added frame lies content on content, not whole on whole), then crops; and
        whether a simple one is still to come."""
        simple = [("whole", Placement(1.0, 0.0, 1.0, 0.0))] if one_grid else _simple(turned, second)
        ranked = sorted(
            ((name, start, _correlation(samples1, turned.content, image2, start)) for name, start in simple),
            key=lambda entry: -entry[2],
        )
        yield from ((*entry, number < len(ranked) - 1) for number, entry in enumerate(ranked))
        if not one_grid:
            yield from ((name, start, None, False) for name, start in _crops(turned, second))

    for name, start, at_start, simple_left in placements():
        where = start.box(turned.content)
        if _repeats(where, starts + ends):  # refined from there, or to there, already: it would end the same way
            continue
        if at_start is None:
            at_start = _correlation(samples1, turned.content, image2, start)
        placement, correlation = _refine(samples1, turned.content, image2, start, at_start)
        if one_grid and not keeps_move(at_start, correlation, _moved(placement, second)):  # left on their grid
            placement, correlation = start, at_start
        end = placement.box(turned.content)
        repeated = _repeats(end, ends)  # refined to where another was: judged there already
        starts.append(where)
        ends.append(end)
        if repeated or correlation < MIN_CORRELATION or stretched(placement, turned, second):
            continue
        found = judged(name, placement, correlation)
        if found is not None and found[0][0] and one_grid and SETTLED_CORRELATION <= at_start < UNMOVED_CORRELATION:
            # one picture in place without refining: was the other panned or zoomed by a pixel or two?
            refined, lined_up = _refine(samples1, turned.content, image2, start, at_start, near=True)
            distance = _moved(refined, second)
            if distance > MAX_MOVED and keeps_move(at_start, lined_up, distance):  # two pictures (`moved`)
                found = judged(name, refined, lined_up)
        if found is None:
            continue
        passed_before = best is not None and best[0][0]
        if best is None or found[0] > best[0]:
            best = found
        trusted = found[1]["correlation"] >= TRUSTED_CORRELATION
        if early and (
            (found[0][0] and (trusted or passed_before)) or (trusted and found[3] <= max_uncovered and not simple_left)
        ):
            break  # one picture, or lined up so well that a crop would only find the same change
    if best is None:
        return Verdict(False, {"placed": "none", "correlation": None}, orientation, None)
    return Verdict(best[0][0], best[1], orientation, best[2])

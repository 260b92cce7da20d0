"""How alike two pictures are, beyond one 64-bit pHash: the pHash of each of the 8 flips and quarter turns, of the
picture without uniform borders and of its centre, and a check of candidate pairs at a finer grain.

- Dihedral hashes. pHash is a sign pattern of the 8x8 lowest DCT coefficients of a 32x32 greyscale copy. A
  mirror image negates the odd coefficients along its axis and a transposed image transposes the block, so all 8
  orientations come from one DCT (each against its own median), equal to pHash of the turned picture.
- Borders and crops. `trimmed` is the pHash of the picture with uniform borders (letterboxes, frames, padding)
  cut away; `centre` the pHash of the middle 80% of that, which a few percent cut from any side barely moves.
- Verification. A pair of candidates is compared on 64x64 greyscale thumbnails in the pair's geometry: the
  Hamming distance of their 256-bit pHashes, and a map of 4x4-pixel blocks of their difference after the second
  thumbnail's grey levels are mapped onto the first's (histogram matching: brightness, contrast, gamma and
  re-encoding then move every block alike), at the best of the nine 1-pixel shifts: a local change (spot the difference, a changed label, a moved
  object, the next frame of a video) stands out as a few blocks far above the rest. The evidence goes into the
  decision; the thresholds were chosen on tests/dedup_set.py (bench/near_dup_quality.py prints the scores).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from PIL import Image

if TYPE_CHECKING:
    from benchcurate.curation.images.survivor import Traits

THUMB_SIDE = 64
BLOCK = 4  # pixels per block side in the thumbnail: a 16 x 16 grid
BORDER_TOLERANCE = 24  # grey levels from the border colour that still count as border (JPEG rings near edges)
BORDER_SHARE = 0.97  # of a row or column's pixels near the border colour, for the row or column to be border
CENTRE_KEEP = 0.8
# the 8 orientations: name -> (transposed, rows negated, columns negated) on the DCT block; identity first
ORIENTATIONS = {"identity": (False, False, False), "flip_left_right": (False, False, True),
                "flip_top_bottom": (False, True, False), "rotate_180": (False, True, True),
                "transpose": (True, False, False), "rotate_90": (True, False, True),
                "rotate_270": (True, True, False), "transverse": (True, True, True)}
TURNS = tuple(name for name in ORIENTATIONS if name != "identity")
# the same as PIL transposes of the image, for thumbnails
PIL_TRANSPOSE = {"identity": None, "flip_left_right": Image.Transpose.FLIP_LEFT_RIGHT,
                 "flip_top_bottom": Image.Transpose.FLIP_TOP_BOTTOM, "rotate_180": Image.Transpose.ROTATE_180,
                 "transpose": Image.Transpose.TRANSPOSE, "rotate_90": Image.Transpose.ROTATE_270,
                 "rotate_270": Image.Transpose.ROTATE_90, "transverse": Image.Transpose.TRANSVERSE}


def _dct2(pixels: np.ndarray) -> np.ndarray:
    import scipy.fftpack

    return scipy.fftpack.dct(scipy.fftpack.dct(pixels, axis=0), axis=1)


def _bits_hex(bits: np.ndarray) -> str:
    """imagehash's hex form of a boolean array (row-major, most significant bit first)."""
    flat = bits.flatten()
    value = 0
    for bit in flat:
        value = (value << 1) | int(bit)
    return f"{value:0{len(flat) // 4}x}"


def _sign(size: int) -> np.ndarray:
    return np.where(np.arange(size) % 2 == 0, 1.0, -1.0)


def _oriented(block: np.ndarray, orientation: str) -> np.ndarray:
    transposed, rows, columns = ORIENTATIONS[orientation]
    out = block.T if transposed else block
    size = out.shape[0]
    if rows:
        out = out * _sign(size)[:, None]
    if columns:
        out = out * _sign(size)[None, :]
    return out


def phash_block(image: Image.Image, hash_size: int = 8) -> np.ndarray:
    """The hash_size x hash_size lowest DCT coefficients pHash compares with their median (imagehash's steps)."""
    grey = image if image.mode == "L" else image.convert("L")
    pixels = np.asarray(grey.resize((hash_size * 4, hash_size * 4), Image.Resampling.LANCZOS))
    return _dct2(pixels)[:hash_size, :hash_size]


def hash_of(block: np.ndarray) -> str:
    return _bits_hex(block > np.median(block))


def dihedral_hashes(image: Image.Image) -> dict[str, str]:
    """pHash of the picture in each of the 8 orientations (the identity is imagehash's phash)."""
    block = phash_block(image)
    return {name: hash_of(_oriented(block, name)) for name in ORIENTATIONS}


def trim_borders(image: Image.Image, passes: int = 3) -> Image.Image:
    """The picture without rows and columns of (nearly) the border colour along each edge, again while a border
    remains (a frame around a picture with white margins); unchanged when that would leave less than a quarter
    of it, or none is found."""
    for _ in range(passes):
        trimmed = _trim_once(image)
        if trimmed is image:
            return image
        image = trimmed
    return image


def _trim_once(image: Image.Image) -> Image.Image:
    grey = np.asarray(image if image.mode == "L" else image.convert("L"), dtype=np.int16)
    height, width = grey.shape
    if height < 8 or width < 8:
        return image
    colour = int(np.median(np.concatenate([grey[0], grey[-1], grey[:, 0], grey[:, -1]])))
    near = np.abs(grey - colour) <= BORDER_TOLERANCE
    rows = np.flatnonzero(near.mean(axis=1) < BORDER_SHARE)
    columns = np.flatnonzero(near.mean(axis=0) < BORDER_SHARE)
    if not len(rows) or not len(columns):
        return image
    top, bottom, left, right = int(rows[0]), int(rows[-1]) + 1, int(columns[0]), int(columns[-1]) + 1
    # one more line where a border was cut: resampling blends the border into the picture's first line
    top, left = top + (top > 0), left + (left > 0)
    bottom, right = bottom - (bottom < height), right - (right < width)
    if (bottom - top) * (right - left) < 0.25 * height * width or (top, bottom, left, right) == (0, height, 0, width):
        return image
    return image.crop((left, top, right, bottom))


def centre(image: Image.Image) -> Image.Image:
    width, height = image.size
    dx, dy = round(width * (1 - CENTRE_KEEP) / 2), round(height * (1 - CENTRE_KEEP) / 2)
    return image.crop((dx, dy, width - dx, height - dy)) if width - 2 * dx > 0 and height - 2 * dy > 0 else image


def small_grey(image: Image.Image, side: int = 128) -> Image.Image:
    """A greyscale copy no larger than `side` on its longer side, for the border and centre hashes."""
    grey = image if image.mode == "L" else image.convert("L")
    scale = side / max(grey.size)
    if scale >= 1:
        return grey
    return grey.resize((max(1, round(grey.width * scale)), max(1, round(grey.height * scale))),
                       Image.Resampling.BILINEAR, reducing_gap=2.0)


def likeness_hashes(grey: Image.Image, block: np.ndarray | None = None) -> dict[str, str]:
    """The hashes the near-duplicate search uses besides the pHash (16 hex digits each): the other 7 orientations
    (comma-separated in TURNS order, from the pHash's own DCT block when given), the pHash without borders and that
    of its centre (both from a copy of at most 128 px: the same for every picture, so comparable)."""
    block = phash_block(grey) if block is None else block
    trimmed = trim_borders(small_grey(grey))
    return {"phash_orientations": ",".join(hash_of(_oriented(block, name)) for name in TURNS),
            "phash_trimmed": hash_of(phash_block(trimmed)), "phash_centre": hash_of(phash_block(centre(trimmed)))}


# --- thumbnails and the verification of a candidate pair -----------------------------------------------------------

VIEWS = ("full", "trimmed", "centre")


def thumbnails(image: Image.Image) -> np.ndarray:
    """(3, 64, 64) uint8 greyscale thumbnails of the picture: whole, without borders, its centre."""
    trimmed = trim_borders(image)
    views = (image, trimmed, centre(trimmed))
    return np.stack([np.asarray(view.convert("L").resize((THUMB_SIDE, THUMB_SIDE), Image.Resampling.LANCZOS))
                     for view in views])


def orient_thumbnail(thumb: np.ndarray, orientation: str) -> np.ndarray:
    transpose = PIL_TRANSPOSE[orientation]
    return thumb if transpose is None else np.asarray(Image.fromarray(thumb).transpose(transpose))


class Comparison(NamedTuple):
    hash256_distance: int  # of 256 bits
    local_difference: float  # the largest block difference above the median block's, in the first's std devs

    def evidence(self) -> dict[str, float]:
        return {"hash256_distance": self.hash256_distance, "local_difference": round(self.local_difference, 3)}


SHIFT = 1  # pixels the second thumbnail may be moved to line up with the first (resampling, trimming)
CROP_SHIFT, CROP_BLUR = 4, 1.5  # centres of a picture and of a crop of it are a few pixels and percent apart
ALIGNED_BLUR = 1.0  # pixels: two aligned pictures still differ by resampling within a pixel


def hash256_distance(first: np.ndarray, second: np.ndarray) -> int:
    """Bits apart of the 256-bit pHashes (16 x 16 DCT block) of two thumbnails."""
    bits_a, bits_b = (_dct2(np.asarray(t, dtype=np.float64))[:16, :16] for t in (first, second))
    return int(np.count_nonzero((bits_a > np.median(bits_a)) != (bits_b > np.median(bits_b))))


def compare(first: np.ndarray, second: np.ndarray, view: str = "full") -> Comparison:
    """Two 64x64 uint8 thumbnails in the same geometry. Centres (`view="centre"`, crops) are compared blurred and
    with a wider shift: their alignment is looser, so a small local change is missed more often there."""
    a, b = (np.asarray(thumb, dtype=np.float64) for thumb in (first, second))
    shift = SHIFT
    if view in ("centre", "aligned"):
        from scipy.ndimage import gaussian_filter

        blur, shift = (CROP_BLUR, CROP_SHIFT) if view == "centre" else (ALIGNED_BLUR, SHIFT)
        a, b = gaussian_filter(a, blur), gaussian_filter(b, blur)
    distance = hash256_distance(a, b)
    matched = np.empty(b.size)
    matched[np.argsort(b.ravel(), kind="stable")] = np.sort(a.ravel())  # b's grey levels mapped onto a's
    matched = matched.reshape(b.shape)
    inner = slice(shift, THUMB_SIDE - shift)
    side = (THUMB_SIDE - 2 * shift) // BLOCK * BLOCK
    offsets = range(-shift, shift + 1)
    moved = np.stack([np.roll(matched, (dy, dx), axis=(0, 1)) for dy in offsets for dx in offsets])
    difference = (np.abs(a[None] - moved)[:, inner, inner] / max(a.std(), 1.0))[:, :side, :side]
    grid = difference.reshape(len(moved), side // BLOCK, BLOCK, side // BLOCK, BLOCK).mean(axis=(2, 4))
    flat = grid.reshape(len(moved), -1)
    local = float((flat.max(axis=1) - np.median(flat, axis=1)).min())  # at the best of the shifts
    return Comparison(distance, local)


# --- aligned verification: a crop or an added frame moves and rescales everything ---------------------------------

ALIGN_SIDE = 128          # side of the content thumbnail the alignment cuts windows from
MIN_WINDOW = 0.8          # the smaller picture covers at least this share of the larger's side (a crop of <= 20%)
COARSE = 32               # side of the coarse search
COARSE_MARGIN = 0.15      # a place correlating this far below MIN_CORRELATION on a coarse copy is not refined


class Window(NamedTuple):
    """Where the smaller picture lies in the larger's content, as shares of its sides, and how well it fits."""

    left: float
    top: float
    width: float
    height: float
    correlation: float    # normalised cross-correlation of the two at that place (1: identical up to gain)


def _resized(pixels: np.ndarray, width: int, height: int) -> np.ndarray:
    return np.asarray(Image.fromarray(pixels).resize((width, height), Image.Resampling.BILINEAR, reducing_gap=2.0),
                      dtype=np.float32)


def _correlations(big: np.ndarray, small: np.ndarray, lefts: range, tops: range) -> np.ndarray:
    """Normalised cross-correlation of `small` with each window of `big` at the given offsets (tops x lefts)."""
    from numpy.lib.stride_tricks import sliding_window_view

    height, width = small.shape
    template = small - small.mean()
    template /= max(float(np.linalg.norm(template)), 1e-6)
    windows = sliding_window_view(big, (height, width))[tops.start:tops.stop, lefts.start:lefts.stop]
    count = height * width
    sums = windows.sum(axis=(2, 3))
    squares = np.einsum("ijkl,ijkl->ij", windows, windows)
    spread = np.sqrt(np.maximum(squares - sums * sums / count, 1e-6))
    return np.einsum("ijkl,kl->ij", windows, template) / spread


def _sizes(side: int, ratio: float) -> list[tuple[int, int]]:
    """(width, height) of the smaller picture's window in a side x side grid, for window sides from MIN_WINDOW to
    1 of the larger one's (`ratio`: the window's width share over its height share, from the two aspect ratios)."""
    found = []
    for longer in range(int(np.ceil(MIN_WINDOW * side)), side + 1):
        width, height = (longer, round(longer / ratio)) if ratio >= 1 else (round(longer * ratio), longer)
        if MIN_WINDOW * side <= min(width, height) and max(width, height) <= side:
            found.append((width, height))
    return found


def _best(big: np.ndarray, small: np.ndarray, sizes: list[tuple[int, int]], near: tuple | None
          ) -> tuple[float, int, int, int, int]:
    """(correlation, left, top, width, height) of the best window of `big` for `small` over `sizes` (within two
    pixels of `near`, a place found at half this resolution, when given) and every offset (within two pixels)."""
    side = big.shape[0]
    best = (-2.0, 0, 0, 0, 0)
    for width, height in sizes:
        lefts, tops = range(0, side - width + 1), range(0, side - height + 1)
        if near is not None:
            _, left, top, near_width, near_height = near
            if abs(width - 2 * near_width) > 2 or abs(height - 2 * near_height) > 2:
                continue
            lefts = range(max(0, 2 * left - 2), min(side - width, 2 * left + 2) + 1)
            tops = range(max(0, 2 * top - 2), min(side - height, 2 * top + 2) + 1)
            if not len(lefts) or not len(tops):
                continue
        scores = _correlations(big, _resized(small, width, height), lefts, tops)
        row, column = np.unravel_index(int(np.argmax(scores)), scores.shape)
        if scores[row, column] > best[0]:
            best = (float(scores[row, column]), lefts.start + int(column), tops.start + int(row), width, height)
    return best


def place(big: np.ndarray, small: np.ndarray, ratio: float) -> Window | None:
    """Where `small` (a content thumbnail, ALIGN_SIDE square) lies inside `big`, searched over window sizes of
    MIN_WINDOW..1 of big's sides (tied by `ratio`) and every offset on COARSE-pixel copies, then refined within
    two pixels at twice and four times that; None when the aspect ratios allow no such window."""
    if not _sizes(COARSE, ratio):
        return None
    found = None
    side = COARSE
    while side <= ALIGN_SIDE:
        level = big.astype(np.float32) if side == ALIGN_SIDE else _resized(big, side, side)
        refined = _best(level, small, _sizes(side, ratio), found)
        if refined[0] <= -2:
            break
        found = refined
        side *= 2
        if found[0] < MIN_CORRELATION - COARSE_MARGIN:  # two pictures already: no need to refine
            break
    score, left, top, width, height = found
    scale = side // 2  # the resolution `found` was made at
    return Window(left / scale, top / scale, width / scale, height / scale, score)


def window_thumbnail(content: np.ndarray, window: Window) -> np.ndarray:
    """The part of a content thumbnail a window covers, as a THUMB_SIDE square."""
    side = content.shape[0]
    box = (window.left * side, window.top * side, (window.left + window.width) * side,
           (window.top + window.height) * side)
    return np.asarray(Image.fromarray(content).resize((THUMB_SIDE, THUMB_SIDE), Image.Resampling.LANCZOS, box=box))


# --- what the verification and the keep rule read of a picture, from one decode ------------------------------------

DECODE_SIDE = 256         # the picture is decoded reduced, no side under this (JPEG draft, box average otherwise)
MIN_CORRELATION = 0.9     # an aligned pair correlating less is two pictures
FULL_WINDOW = 0.99        # a window this close to the whole content is no crop: compared unblurred


class Picture(NamedTuple):
    full: np.ndarray                    # THUMB_SIDE square greyscale thumbnail of the whole picture
    content: np.ndarray                 # ALIGN_SIDE square greyscale thumbnail without uniform borders
    content_size: tuple[float, float]   # the content's width and height in full-size pixels
    traits: "Traits"


def picture(path: Path, max_pixels: int, data: bytes | None = None) -> Picture:
    """Thumbnails and keep-rule traits of one file, from one reduced RGB decode (raises ImageDecodeError)."""
    from benchcurate.curation.images.decode import decode_image
    from benchcurate.curation.images.survivor import traits

    data = path.read_bytes() if data is None else data
    decoded = decode_image(path, max_pixels, DECODE_SIDE, data, shrink_all=True)
    grey = decoded.image.convert("L")
    trimmed = trim_borders(grey)
    share = trimmed.width * trimmed.height / (grey.width * grey.height)
    full = np.asarray(grey.resize((THUMB_SIDE, THUMB_SIDE), Image.Resampling.LANCZOS))
    content = np.asarray(trimmed.resize((ALIGN_SIDE, ALIGN_SIDE), Image.Resampling.LANCZOS))
    size = (decoded.width * trimmed.width / grey.width, decoded.height * trimmed.height / grey.height)
    return Picture(full, content, size, traits(decoded.image, grey, data, decoded.format, share,
                                                decoded.width * decoded.height))


def pack(found: Picture) -> bytes:
    """A Picture as bytes for the run cache (`unpack` reads it)."""
    header = json.dumps({"content_size": found.content_size, "traits": found.traits._asdict()}).encode()
    return len(header).to_bytes(4, "little") + header + found.full.tobytes() + found.content.tobytes()


def unpack(raw: bytes) -> Picture:
    from benchcurate.curation.images.survivor import Traits

    length = int.from_bytes(raw[:4], "little")
    header = json.loads(raw[4:4 + length])
    pixels = np.frombuffer(raw[4 + length:], dtype=np.uint8)
    full = pixels[:THUMB_SIDE ** 2].reshape(THUMB_SIDE, THUMB_SIDE)
    content = pixels[THUMB_SIDE ** 2:].reshape(ALIGN_SIDE, ALIGN_SIDE)
    return Picture(full, content, tuple(header["content_size"]), Traits(**header["traits"]))


def compare_pictures(first: Picture, second: Picture, orientation: str, aligned: bool = True
                     ) -> Iterator[tuple[Comparison, dict]]:
    """The comparisons of a candidate pair (`first` turned by `orientation` to match `second`), cheapest first:
    whole thumbnails, then (with `aligned`) each content placed inside the other (`place`: a crop, or a frame
    that trimming did not remove), compared on the part they share. Yields (comparison, what was compared)."""
    whole = compare(orient_thumbnail(first.full, orientation), second.full)
    yield whole, {"compared_on": "full"}
    if not aligned:
        return
    turned = orient_thumbnail(first.content, orientation)
    size = first.content_size[::-1] if ORIENTATIONS[orientation][0] else first.content_size
    for big, small, big_size, small_size, inside in ((turned, second.content, size, second.content_size, "second"),
                                                     (second.content, turned, second.content_size, size, "first")):
        ratio = (small_size[0] / big_size[0]) / (small_size[1] / big_size[1])
        window = place(big, small, ratio)
        if window is None:
            continue
        whole_window = window.width >= FULL_WINDOW and window.height >= FULL_WINDOW
        small_thumb = np.asarray(Image.fromarray(small).resize((THUMB_SIDE, THUMB_SIDE), Image.Resampling.LANCZOS))
        found = compare(window_thumbnail(big, window), small_thumb, "trimmed" if whole_window else "aligned")
        yield found, {"compared_on": "trimmed" if whole_window else "aligned", "inside": inside,
                      "window": [round(value, 3) for value in window[:4]],
                      "correlation": round(window.correlation, 3)}

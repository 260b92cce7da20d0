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

from typing import NamedTuple

import numpy as np
from PIL import Image

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


def compare(first: np.ndarray, second: np.ndarray, view: str = "full") -> Comparison:
    """Two 64x64 uint8 thumbnails in the same geometry. Centres (`view="centre"`, crops) are compared blurred and
    with a wider shift: their alignment is looser, so a small local change is missed more often there."""
    a, b = (np.asarray(thumb, dtype=np.float64) for thumb in (first, second))
    shift = SHIFT
    if view == "centre":
        from scipy.ndimage import gaussian_filter

        a, b, shift = gaussian_filter(a, CROP_BLUR), gaussian_filter(b, CROP_BLUR), CROP_SHIFT
    bits_a, bits_b = (_dct2(t)[:16, :16] for t in (a, b))
    distance = int(np.count_nonzero((bits_a > np.median(bits_a)) != (bits_b > np.median(bits_b))))
    matched = np.empty(b.size)
    matched[np.argsort(b.ravel(), kind="stable")] = np.sort(a.ravel())  # b's grey levels mapped onto a's
    matched = matched.reshape(b.shape)
    inner = slice(shift, THUMB_SIDE - shift)
    side = (THUMB_SIDE - 2 * shift) // BLOCK * BLOCK
    local = None
    for dy in range(-shift, shift + 1):
        for dx in range(-shift, shift + 1):
            moved = np.roll(matched, (dy, dx), axis=(0, 1))
            difference = (np.abs(a - moved)[inner, inner] / max(a.std(), 1.0))[:side, :side]
            grid = difference.reshape(side // BLOCK, BLOCK, side // BLOCK, BLOCK).mean(axis=(1, 3))
            value = float(grid.max() - np.median(grid))
            local = value if local is None else min(local, value)
    return Comparison(distance, local)

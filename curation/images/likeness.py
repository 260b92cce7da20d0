"""How alike two pictures are, beyond one 64-bit pHash: the pHash of each of the 8 flips and quarter turns, of the
picture without uniform borders and of its centre (candidates for `image_near_dedup`), and where a crop lies in
its original (the verification's first guess for a crop, refined in `verify.py`).

- Dihedral hashes. pHash is a sign pattern of the 8x8 lowest DCT coefficients of a 32x32 greyscale copy. A
  mirror image negates the odd coefficients along its axis and a transposed image transposes the block, so all 8
  orientations come from one DCT (each against its own median), equal to pHash of the turned picture.
- Borders and crops. `trimmed` is the pHash of the picture with uniform borders (letterboxes, frames, padding)
  cut away; `centre` the pHash of the middle 80% of that, which a few percent cut from any side barely moves.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from PIL import Image

BORDER_TOLERANCE = 24  # grey levels from the border colour that still count as border (JPEG rings near edges)
BORDER_SHARE = 0.97  # of a row or column's pixels near the border colour, for the row or column to be border
CENTRE_KEEP = 0.8
# the 8 orientations: name -> (transposed, rows negated, columns negated) on the DCT block; identity first
ORIENTATIONS = {
    "identity": (False, False, False),
    "flip_left_right": (False, False, True),
    "flip_top_bottom": (False, True, False),
    "rotate_180": (False, True, True),
    "transpose": (True, False, False),
    "rotate_90": (True, False, True),
    "rotate_270": (True, True, False),
    "transverse": (True, True, True),
}
TURNS = tuple(name for name in ORIENTATIONS if name != "identity")
# the same as PIL transposes of the image, for thumbnails
PIL_TRANSPOSE = {
    "identity": None,
    "flip_left_right": Image.Transpose.FLIP_LEFT_RIGHT,
    "flip_top_bottom": Image.Transpose.FLIP_TOP_BOTTOM,
    "rotate_180": Image.Transpose.ROTATE_180,
    "transpose": Image.Transpose.TRANSPOSE,
    "rotate_90": Image.Transpose.ROTATE_270,
    "rotate_270": Image.Transpose.ROTATE_90,
    "transverse": Image.Transpose.TRANSVERSE,
}


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
    box = trim_box(image, passes)
    return image if box == (0, 0, image.width, image.height) else image.crop(box)


def trim_box(
    image: Image.Image, passes: int = 3, tolerance: int = BORDER_TOLERANCE, share: float = BORDER_SHARE
) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of `trim_borders`' result in the picture (`tolerance`: grey levels from the
    border colour that still count as border; `share`: of a row or column's pixels, for it to be border)."""
    grey = np.asarray(image if image.mode == "L" else image.convert("L"), dtype=np.int16)
    steps = trim_steps(grey, passes, tolerance, share)
    return steps[-1][0] if steps else (0, 0, grey.shape[1], grey.shape[0])


def trim_steps(
    grey: np.ndarray, passes: int, tolerance: int, share: float
) -> list[tuple[tuple[int, int, int, int], int]]:
    """Each pass of `trim_box` that trimmed something: the box left after it (in the picture's pixels) and the
    border colour it trimmed."""
    left, top, right, bottom = 0, 0, grey.shape[1], grey.shape[0]
    steps = []
    for _ in range(passes):
        found = _trim_once(grey[top:bottom, left:right], tolerance, share)
        if found is None:
            break
        box, colour = found
        left, top, right, bottom = left + box[0], top + box[1], left + box[2], top + box[3]
        steps.append(((left, top, right, bottom), colour))
    return steps


def _trim_once(grey: np.ndarray, tolerance: int, share: float) -> tuple[tuple[int, int, int, int], int] | None:
    height, width = grey.shape
    if height < 8 or width < 8:
        return None
    colour = int(np.median(np.concatenate([grey[0], grey[-1], grey[:, 0], grey[:, -1]])))
    near = np.abs(grey - colour) <= tolerance
    rows = np.flatnonzero(near.mean(axis=1) < share)
    columns = np.flatnonzero(near.mean(axis=0) < share)
    if not len(rows) or not len(columns):
        return None
    top, bottom, left, right = int(rows[0]), int(rows[-1]) + 1, int(columns[0]), int(columns[-1]) + 1
    # one more line where a border was cut: resampling blends the border into the picture's first line
    top, left = top + (top > 0), left + (left > 0)
    bottom, right = bottom - (bottom < height), right - (right < width)
    if (bottom - top) * (right - left) < 0.25 * height * width or (top, bottom, left, right) == (0, height, 0, width):
        return None
    return (left, top, right, bottom), colour


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
    return grey.resize(
        (max(1, round(grey.width * scale)), max(1, round(grey.height * scale))),
        Image.Resampling.BILINEAR,
        reducing_gap=2.0,
    )


def likeness_hashes(grey: Image.Image, block: np.ndarray | None = None) -> dict[str, str]:
    """The hashes the near-duplicate search uses besides the pHash (16 hex digits each): the other 7 orientations
    (comma-separated in TURNS order, from the pHash's own DCT block when given), the pHash without borders and that
    of its centre (both from a copy of at most 128 px: the same for every picture, so comparable)."""
    block = phash_block(grey) if block is None else block
    trimmed = trim_borders(small_grey(grey))
    return {
        "phash_orientations": ",".join(hash_of(_oriented(block, name)) for name in TURNS),
        "phash_trimmed": hash_of(phash_block(trimmed)),
        "phash_centre": hash_of(phash_block(centre(trimmed))),
    }


VIEWS = ("full", "trimmed", "centre")  # the hashes a candidate pair can match on, preferred first


# --- placing a crop inside its original (the verification's first guess for a crop: `verify.py`) ----------------

ALIGN_SIDE = 128  # side of the content thumbnail the alignment cuts windows from
MIN_WINDOW = 0.8  # the smaller picture covers at least this share of the larger's side (a crop of <= 20%)
COARSE = 32  # side of the coarse search
PLACE_FLOOR = 0.75  # a place correlating less on a coarse copy is not refined (two pictures already)


class Window(NamedTuple):
    """Where the smaller picture lies in the larger's content, as shares of its sides, and how well it fits."""

    left: float
    top: float
    width: float
    height: float
    correlation: float  # normalised cross-correlation of the two at that place (1: identical up to gain)


def _resized(pixels: np.ndarray, width: int, height: int) -> np.ndarray:
    return np.asarray(
        Image.fromarray(pixels).resize((width, height), Image.Resampling.BILINEAR, reducing_gap=2.0), dtype=np.float32
    )


class _Integral(NamedTuple):
    """Summed-area tables of a picture and of its squares (float64, a zero row and column first): the sum over any
    window in four reads, where summing each window of a search costs its area."""

    values: np.ndarray
    squares: np.ndarray

    @classmethod
    def of(cls, pixels: np.ndarray) -> _Integral:
        def table(values: np.ndarray) -> np.ndarray:
            out = np.zeros((values.shape[0] + 1, values.shape[1] + 1))
            np.cumsum(values, axis=0, out=out[1:, 1:])
            np.cumsum(out[1:, 1:], axis=1, out=out[1:, 1:])
            return out

        wide = pixels.astype(np.float64)
        return cls(table(wide), table(wide * wide))

    def windows(self, height: int, width: int, lefts: range, tops: range) -> tuple[np.ndarray, np.ndarray]:
        """The sums of the values and of the squares over each height x width window at the offsets."""

        def summed(table: np.ndarray) -> np.ndarray:
            top, left = slice(tops.start, tops.stop), slice(lefts.start, lefts.stop)
            bottom = slice(tops.start + height, tops.stop + height)
            right = slice(lefts.start + width, lefts.stop + width)
            return table[bottom, right] - table[top, right] - table[bottom, left] + table[top, left]

        return summed(self.values), summed(self.squares)


def _correlations(big: np.ndarray, integral: _Integral, small: np.ndarray, lefts: range, tops: range) -> np.ndarray:
    """Normalised cross-correlation of `small` with each window of `big` (`integral`: its `_Integral`) at the given
    offsets (tops x lefts)."""
    from numpy.lib.stride_tricks import sliding_window_view

    height, width = small.shape
    template = small - small.mean()
    template /= max(float(np.linalg.norm(template)), 1e-6)
    windows = sliding_window_view(big, (height, width))[tops.start : tops.stop, lefts.start : lefts.stop]
    sums, squares = integral.windows(height, width, lefts, tops)
    # a window flat to within a grey level in all (exact sums leave it 0) correlates with nothing: 0, not noise
    spread = np.sqrt(np.maximum(squares - sums * sums / (height * width), 1.0))
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


def _best(
    big: np.ndarray, small: np.ndarray, sizes: list[tuple[int, int]], near: tuple | None
) -> tuple[float, int, int, int, int]:
    """(correlation, left, top, width, height) of the best window of `big` for `small` over `sizes` (within two
    pixels of `near`, a place found at half this resolution, when given) and every offset (within two pixels)."""
    side = big.shape[0]
    integral = _Integral.of(big)
    best = (-2.0, 0, 0, 0, 0)
    for width, height in sizes:
        lefts, tops = range(side - width + 1), range(side - height + 1)
        if near is not None:
            _, left, top, near_width, near_height = near
            if abs(width - 2 * near_width) > 2 or abs(height - 2 * near_height) > 2:
                continue
            lefts = range(max(0, 2 * left - 2), min(side - width, 2 * left + 2) + 1)
            tops = range(max(0, 2 * top - 2), min(side - height, 2 * top + 2) + 1)
            if not len(lefts) or not len(tops):
                continue
        scores = _correlations(big, integral, _resized(small, width, height), lefts, tops)
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
        if found[0] < PLACE_FLOOR:  # two pictures already: no need to refine
            break
    score, left, top, width, height = found
    scale = side // 2  # the resolution `found` was made at
    return Window(left / scale, top / scale, width / scale, height / scale, score)

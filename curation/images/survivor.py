"""Which copy of a picture to keep (`image_near_dedup`'s `keep_rule: least_processed`): the one that lost least.

A copy is ranked first by what it lost, then by the marks processing left (smaller `rank` is kept):
1. colour beats greyscale (a greyscale copy has lost its colour; a greyscale original ties with its copies);
2. more pixels of content beat fewer (content: the picture without uniform borders, so an added frame adds none;
   a downscaled or cropped copy has fewer);
3. no added frame beats a frame;
4. the orientation most of its near copies share beats a mirror image or a turn (counted by the caller);
5. less compression: a lossless file, then the higher JPEG quality setting (read from its quantisation tables);
6. fewer processing marks: rims beside edges (sharpening), less fine detail above the noise (blurring).
"Less cut beats more cut" follows from 2 at one scale. All of it comes from the one reduced decode the
verification makes anyway (`Traits`, from a picture no side of which is under 256 pixels) and the file's header,
so choosing costs no further decode; marks of sharpening or blurring finer than that scale are not seen.
`bench/near_dup_quality.py` reports who was kept, per kind of edit, on tests/dedup_set.py.
"""

from __future__ import annotations

import io
from typing import NamedTuple

import numpy as np
from PIL import Image

TILE = 128          # tile side in pixels of the reduced decode
GRID = 2            # tiles per side at most
HALO_STEP = 24.0    # grey levels between pixels 2 * HALO_GAP apart that make an edge
HALO_GAP = 4        # pixels from an edge to its two sides
# libjpeg's (IJG) standard luminance table at quality 50
IJG_LUMINANCE = np.array([16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69,
                          56, 14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81,
                          104, 113, 92, 49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99],
                         dtype=np.float64)


def _table_sum(quality: int) -> float:
    scale = 5000 / quality if quality < 50 else 200 - 2 * quality
    return float(np.clip(np.floor((IJG_LUMINANCE * scale + 50) / 100), 1, 255).sum())


TABLE_SUMS = np.array([_table_sum(quality) for quality in range(1, 101)])


def jpeg_quality(data: bytes) -> int | None:
    """The IJG quality whose luminance table sums as the file's does (a sum ignores the coefficients' order);
    None for a file that is not a JPEG."""
    with Image.open(io.BytesIO(data)) as opened:
        tables = getattr(opened, "quantization", None)
        if opened.format != "JPEG" or not tables:
            return None
        luminance = np.asarray(tables[min(tables)], dtype=np.float64)
    return int(np.argmin(np.abs(TABLE_SUMS - luminance.sum())) + 1)


def _tiles(grey: Image.Image) -> np.ndarray:
    """(k, t, t) float32: up to GRID x GRID tiles of the picture centred on a regular grid."""
    width, height = grey.size
    across, down = max(1, min(GRID, width // TILE)), max(1, min(GRID, height // TILE))
    tile_w, tile_h = min(TILE, width), min(TILE, height)
    tiles = []
    for row in range(down):
        for column in range(across):
            x = int(min(max(0.0, (column + 0.5) * width / across - tile_w / 2), width - tile_w))
            y = int(min(max(0.0, (row + 0.5) * height / down - tile_h / 2), height - tile_h))
            tiles.append(np.asarray(grey.crop((x, y, x + tile_w, y + tile_h)), dtype=np.float32))
    return np.stack(tiles)


def _halo(y: np.ndarray) -> float:
    """How far pixels beside strong edges overshoot both sides (sharpening's rims), per unit of edge step."""
    over = steps = 0.0
    gap = HALO_GAP
    for before, middle, after in ((y[:, :, :-2 * gap], y[:, :, gap:-gap], y[:, :, 2 * gap:]),
                                  (y[:, :-2 * gap], y[:, gap:-gap], y[:, 2 * gap:])):
        high, low = np.maximum(before, after), np.minimum(before, after)
        step = high - low
        edge = step > HALO_STEP
        beyond = np.maximum(middle - high, 0) + np.maximum(low - middle, 0)
        over += float(np.dot(beyond.ravel(), edge.ravel()))
        steps += float(np.dot(step.ravel(), edge.ravel()))
    return float(np.log2(over / steps + 0.01)) if steps else float(np.log2(0.01))


def marks(grey: Image.Image) -> float:
    """The marks processing left on a picture (log2 units, smaller is fewer): rims beside edges (sharpening),
    clipped levels and levels left unused (brightness and contrast), less fine detail above the noise (blurring)."""
    y = _tiles(grey)
    histogram = np.cumsum(grey.histogram()) / (grey.width * grey.height)
    low, high = int(np.searchsorted(histogram, 0.005)), int(np.searchsorted(histogram, 0.995))
    clipped = float(histogram[0] + 1 - histogram[254])
    level_range = -float(np.log2(max(high - low, 1) / 255))
    if min(y.shape[1:]) < 2 * HALO_GAP + 3:
        return RANK_WEIGHTS["clip"] * float(np.log2(clipped + 0.01)) + RANK_WEIGHTS["range"] * level_range
    centre = y[:, 1:-1, 1:-1]
    cross = y[:, 1:-1, :-2] + y[:, 1:-1, 2:] + y[:, :-2, 1:-1] + y[:, 2:, 1:-1]
    laplacian = np.abs(cross - 4 * centre)
    corners = y[:, :-2, :-2] + y[:, :-2, 2:] + y[:, 2:, :-2] + y[:, 2:, 2:]
    noise_mask = np.abs(corners - 2 * cross + 4 * centre)  # blind to smooth ramps: what is left is noise
    threshold = max(4.0, 2.0 * 1.1 * float(np.median(noise_mask[:, ::2, ::2])))
    energy = float(np.square(np.maximum(laplacian - threshold, 0.0)).mean())
    detail = float(np.log2(energy / (float(y.var(axis=(1, 2)).mean()) + 1.0) + 1e-6))
    return RANK_WEIGHTS["halo"] * _halo(y) + RANK_WEIGHTS["clip"] * float(np.log2(clipped + 0.01)) - detail \
        + RANK_WEIGHTS["range"] * level_range


LOSSLESS = ("PNG", "BMP", "TIFF", "GIF", "PPM", "TGA")
UNKNOWN_LOSSY_QUALITY = 75   # a lossy file whose quality setting cannot be read (WebP)
COLOUR_CHROMA = 4.0          # mean of max - min over R, G, B above which a picture is in colour (grey levels)
COLOUR_SIDE = 64             # side of the copy colour is judged on
PIXEL_STEP = 1 / 32          # log2 units: content sizes closer than this (2%) tie (blur moves a trimmed edge)
FRAME_SHARE = 0.005          # of the area: a uniform border this large is a frame
RANK_WEIGHTS = {"halo": 3.0, "clip": 1.0, "range": 0.0}  # of the marks, in log2 units


class Traits(NamedTuple):
    """What the keep rule reads of one picture."""

    colour: bool
    content_pixels: float    # of the full-size picture, without uniform borders
    frame_share: float       # share of the area that is uniform border
    lossless: bool
    quality: int             # JPEG quality setting (100 for a lossless file)
    marks: float             # log2 units, smaller is fewer marks


def traits(rgb: Image.Image, grey: Image.Image, data: bytes, fmt: str, content_share: float,
           full_pixels: int) -> Traits:
    """The keep rule's view of a decoded picture (upright, RGB and its greyscale, any scale of at least 256
    pixels a side), its file bytes and the share of it that is content (`likeness.trim_borders`)."""
    small = np.asarray(rgb.resize((COLOUR_SIDE, COLOUR_SIDE), Image.Resampling.BOX), dtype=np.int16)
    chroma = float((small.max(axis=2) - small.min(axis=2)).mean())
    lossless = fmt in LOSSLESS
    quality = 100 if lossless else (jpeg_quality(data) if fmt == "JPEG" else None) or UNKNOWN_LOSSY_QUALITY
    return Traits(chroma > COLOUR_CHROMA, full_pixels * content_share, 1 - content_share, lossless, int(quality),
                  round(marks(grey), 3))


def rank(found: Traits, turned: bool = False) -> tuple:
    """Sort key of the least_processed rule: smaller is kept."""
    return (not found.colour, -round(np.log2(max(found.content_pixels, 1.0)) / PIXEL_STEP),
            found.frame_share > FRAME_SHARE, turned, not found.lossless, -found.quality,
            found.marks)

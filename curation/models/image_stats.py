"""Pixel statistics the offline heuristic backend reasons from. Computed on a thumbnail, so cheap."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image

from benchcurate.curation.core.cache import Cache
from benchcurate.curation.core.decode import decode_image

THUMB_SIDE_PX = 256  # sharpness, edges, colour
STRUCTURE_SIDE_PX = 512  # text lines and axes need more resolution than that

PALETTE = {
    "black": (20, 20, 20),
    "grey": (128, 128, 128),
    "white": (245, 245, 245),
    "red": (200, 40, 40),
    "orange": (240, 140, 30),
    "yellow": (235, 215, 50),
    "green": (60, 160, 70),
    "teal": (30, 150, 150),
    "blue": (40, 90, 200),
    "purple": (130, 60, 170),
    "pink": (235, 130, 180),
    "brown": (130, 85, 45),
}


@dataclass(frozen=True)
class ImageStats:
    width: int
    height: int
    near_white_fraction: float  # share of pixels with every channel > 235
    flat_fraction: float  # share of pixels with no luminance gradient: high for rendered graphics
    dark_fraction: float  # share with luminance < 80
    contrast: float  # luminance standard deviation, 0-255
    sharpness: float  # mean absolute Laplacian of the thumbnail's luminance
    edge_density: float  # share of pixels with a strong gradient
    entropy_bits: float  # luminance histogram entropy, 0-8
    colourfulness: float  # Hasler and Suesstrunk's metric
    strong_colour_share: float  # share of clearly saturated, not dark pixels (bars, slices, banners)
    tinted_share: float  # share of pixels with any visible tint, pastel included (diagram fills)
    palette_size: int  # quantised colours covering >= 0.5% of pixels each
    text_row_bands: int  # alternations between inked and blank rows (text lines give many)
    axis_lines: bool  # a long line across the lower half and one down the left part (chart axes)
    top_bar: bool  # a band across the top mostly of one saturated or dark colour (app chrome)
    grayscale: bool
    dominant_colours: tuple[str, ...]

    @property
    def aspect(self) -> float:
        return self.height / self.width


def _luminance(rgb: np.ndarray) -> np.ndarray:
    return rgb[..., 0] * 0.299 + rgb[..., 1] * 0.587 + rgb[..., 2] * 0.114


def _entropy(lum: np.ndarray) -> float:
    hist = np.bincount(lum.astype(np.uint8).ravel(), minlength=256).astype(float)
    p = hist[hist > 0] / hist.sum()
    return float(-(p * np.log2(p)).sum())


def _colourfulness(rgb: np.ndarray) -> float:
    rg = rgb[..., 0] - rgb[..., 1]
    yb = 0.5 * (rgb[..., 0] + rgb[..., 1]) - rgb[..., 2]
    return float(np.hypot(rg.std(), yb.std()) + 0.3 * np.hypot(rg.mean(), yb.mean()))


def _palette(rgb: np.ndarray) -> tuple[int, tuple[str, ...]]:
    quantised = (rgb.astype(np.uint16) // 32).reshape(-1, 3)
    codes = quantised[:, 0] * 64 + quantised[:, 1] * 8 + quantised[:, 2]
    counts = np.bincount(codes, minlength=512)
    size = int((counts >= 0.005 * codes.size).sum())
    names = np.array(list(PALETTE))
    centres = np.array(list(PALETTE.values()), dtype=float)
    pixels = rgb.reshape(-1, 3)[:: max(1, codes.size // 4096)]
    nearest = np.argmin(((pixels[:, None, :] - centres[None]) ** 2).sum(-1), axis=1)
    ranked = np.bincount(nearest, minlength=len(names)).argsort()[::-1]
    share = np.bincount(nearest, minlength=len(names)) / len(nearest)
    return size, tuple(str(names[i]) for i in ranked[:3] if share[i] >= 0.03)


def _ink(lum: np.ndarray) -> np.ndarray:
    """Pixels clearly darker than the background."""
    return lum < min(200.0, float(np.median(lum)) - 40)


def _text_row_bands(ink: np.ndarray) -> int:
    height, width = ink.shape
    inner = ink[
        height // 16 : height - height // 16, width // 16 : width - width // 16
    ]  # borders are not lines of text
    rows = inner.mean(axis=1) > 0.01
    return int(np.count_nonzero(rows[1:] != rows[:-1]))


def _axis_lines(ink: np.ndarray) -> bool:
    height, width = ink.shape
    horizontal = (ink[height // 2 :].mean(axis=1) > 0.5).any()
    vertical = (ink[:, : width * 35 // 100].mean(axis=0) > 0.5).any()
    return bool(horizontal and vertical)


def _colour_shares(rgb: np.ndarray) -> tuple[float, float]:
    """(strong colour share, tinted share): saturated and not dark pixels, and pixels with any visible tint."""
    brightest = _channel_max(rgb)
    saturation = (brightest - _channel_min(rgb)) / np.maximum(brightest, 1)
    return (
        float(((saturation > 0.45) & (brightest > 80)).mean()),
        float(((saturation > 0.12) & (brightest > 120)).mean()),
    )


def _channel_max(rgb: np.ndarray) -> np.ndarray:
    """Per-pixel max over the three channels; elementwise, several times faster than `max(axis=-1)`."""
    return np.maximum(np.maximum(rgb[..., 0], rgb[..., 1]), rgb[..., 2])


def _channel_min(rgb: np.ndarray) -> np.ndarray:
    return np.minimum(np.minimum(rgb[..., 0], rgb[..., 1]), rgb[..., 2])


def _saturation(rgb: np.ndarray) -> np.ndarray:
    brightest = _channel_max(rgb)
    return (brightest - _channel_min(rgb)) / np.maximum(brightest, 1)


def _top_bar(rgb: np.ndarray) -> bool:
    band = rgb[: max(2, rgb.shape[0] // 14)].reshape(-1, 3)
    codes = (band // 16).astype(int) @ np.array([256, 16, 1])
    counts = np.bincount(codes)
    mode = counts.argmax()
    colour = np.array([mode // 256, (mode // 16) % 16, mode % 16], dtype=float) * 16 + 8
    coloured = _saturation(colour[None])[0] > 0.3 or _luminance(colour) < 100
    return bool(counts.max() / len(codes) >= 0.65 and coloured)


def _thumbnail(image: Image.Image, side: int) -> np.ndarray:
    thumb = image.copy()
    thumb.thumbnail((side, side), Image.BOX)
    return np.asarray(thumb, dtype=float)


def compute_stats(image: Image.Image) -> ImageStats:
    rgb = _thumbnail(image, THUMB_SIDE_PX)
    lum = _luminance(rgb)
    structure = _ink(_luminance(_thumbnail(image, STRUCTURE_SIDE_PX)))
    laplacian = np.abs(4 * lum[1:-1, 1:-1] - lum[:-2, 1:-1] - lum[2:, 1:-1] - lum[1:-1, :-2] - lum[1:-1, 2:])
    gradient = np.hypot(np.diff(lum, axis=0)[:, :-1], np.diff(lum, axis=1)[:-1, :])
    near_white = _channel_min(rgb) > 235
    palette_size, dominant = _palette(rgb)
    strong_colour_share, tinted_share = _colour_shares(rgb)
    return ImageStats(
        width=image.width,
        height=image.height,
        near_white_fraction=float(near_white.mean()),
        flat_fraction=float((gradient < 1).mean()),
        dark_fraction=float((lum < 80).mean()),
        strong_colour_share=strong_colour_share,
        tinted_share=tinted_share,
        contrast=float(lum.std()),
        sharpness=float(laplacian.mean()),
        edge_density=float((gradient > 40).mean()),
        entropy_bits=_entropy(lum),
        colourfulness=_colourfulness(rgb),
        palette_size=palette_size,
        text_row_bands=_text_row_bands(structure),
        axis_lines=_axis_lines(structure),
        top_bar=_top_bar(rgb),
        grayscale=bool(np.abs(rgb[..., 0] - rgb[..., 1]).mean() < 2 and np.abs(rgb[..., 1] - rgb[..., 2]).mean() < 2),
        dominant_colours=dominant,
    )


STATS_NAMESPACE = "image_stats"
# Stored statistics are keyed by this file's own hash as well as the image's: any edit to how they are computed
# makes new keys, so a stale entry can never be read back.
STATS_CODE_VERSION = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


@lru_cache(maxsize=512)
def stats_for_file(path: str, sha256: str) -> ImageStats:
    """Stats of a file, memoised per content (the sha256 is part of the key so an edited file is recomputed)."""
    return compute_stats(decode_image(Path(path)).image)


def stored_stats(path: str, sha256: str, cache: Cache | None) -> ImageStats:
    """Stats of a file, kept in the run store's cache when there is one: every offline stage after the first
    (quality, category, persona, ...) reads them there instead of decoding the image again, in any process."""
    if cache is None:
        return stats_for_file(path, sha256)
    key = f"{STATS_CODE_VERSION}:{sha256}"
    stored = cache.get(STATS_NAMESPACE, key)
    if isinstance(stored, dict):
        return ImageStats(**{**stored, "dominant_colours": tuple(stored["dominant_colours"])})
    stats = stats_for_file(path, sha256)
    cache.put(STATS_NAMESPACE, key, asdict(stats))
    return stats

"""Which copy of a picture to keep: the least worked on (`image_near_dedup`'s `keep_rule: least_processed`).

Each picture gets a score for the fine detail it carries above its own noise level (its pixel count times its
edge energy per pixel, relative to its contrast), less penalties for the marks processing leaves: bright or dark
rims beside edges (sharpening), clipped pixels (contrast boosts), 8x8 block edges and a low JPEG quality setting
(re-compression). The best score is kept, so a larger original beats a downscaled copy while an upscaled copy
(more pixels, no more detail) does not beat its source.

Measured on 96 originals (Debian wallpapers, the demo's photos and renders) and 18 kinds of copy, on the held-out
half: the original is kept in 78% of pairs (the "most pixels, then largest file" rule: 32%); blur 99-100%,
re-compression at quality 30-50 98%, upscaling 86-88%, downscaling 77-91%, contrast boosts 86%, noise 74%; strong
sharpening only 48% and a watermark 25% (the local-difference check of the verification is what tells a
watermark). Scores closer than 1 unit count as a tie (`near_dedup.PROCESSING_STEP`), which the stage breaks by the
number of near copies, then size. It needs the full-resolution picture (a reduced decode hides upscaling), but looks at 16 tiles of
128 x 128 pixels, so it costs about 5 ms past the decode whatever the size; the stage computes it only for pictures
that have a near copy.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

TILE = 128          # tile side in native pixels
GRID = 4            # tiles per side at most
HALO_STEP = 24.0    # grey levels between pixels 2 * HALO_GAP apart that make an edge
HALO_GAP = 4        # pixels from an edge to its two sides
WEIGHTS = {"halo": 1.5, "clip": 1.0, "block": 0.5, "jpeg": 0.25}
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


def _tiles(rgb: Image.Image) -> np.ndarray:
    """(k, t, t, 3) uint8: up to GRID x GRID native tiles centred on a regular grid, on the JPEG 8-pixel grid."""
    width, height = rgb.size
    across, down = max(1, min(GRID, width // TILE)), max(1, min(GRID, height // TILE))
    tile_w, tile_h = min(TILE, width), min(TILE, height)
    tiles = []
    for row in range(down):
        for column in range(across):
            x = int(min(max(0.0, (column + 0.5) * width / across - tile_w / 2), width - tile_w)) // 8 * 8
            y = int(min(max(0.0, (row + 0.5) * height / down - tile_h / 2), height - tile_h)) // 8 * 8
            tiles.append(np.asarray(rgb.crop((x, y, x + tile_w, y + tile_h))))
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


def parts(rgb: Image.Image, quality: int | None) -> dict[str, float]:
    """The score's parts, in log2 units, of an upright RGB picture at full resolution."""
    width, height = rgb.size
    pixels = _tiles(rgb)
    y = pixels.astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    if min(y.shape[1:]) < 2 * HALO_GAP + 3:
        return {"detail": float(np.log2(width * height)), "halo": 0.0, "clip": 0.0, "block": 0.0, "jpeg": 0.0}
    centre = y[:, 1:-1, 1:-1]
    cross = y[:, 1:-1, :-2] + y[:, 1:-1, 2:] + y[:, :-2, 1:-1] + y[:, 2:, 1:-1]
    laplacian = np.abs(cross - 4 * centre)
    corners = y[:, :-2, :-2] + y[:, :-2, 2:] + y[:, 2:, :-2] + y[:, 2:, 2:]
    noise_mask = np.abs(corners - 2 * cross + 4 * centre)  # blind to smooth ramps: what is left is noise
    threshold = max(4.0, 2.0 * 1.1 * float(np.median(noise_mask[:, ::2, ::2])))
    energy = float(np.square(np.maximum(laplacian - threshold, 0.0)).mean())
    variance = float(y.var(axis=(1, 2)).mean())
    at_ends = (pixels == 0) | (pixels == 255)
    clipped = float((at_ends[..., 0] | at_ends[..., 1] | at_ends[..., 2]).mean())
    across, down = np.abs(np.diff(y, axis=2)), np.abs(np.diff(y, axis=1))
    on_grid = across[:, :, 7::8].sum() + down[:, 7::8, :].sum()
    grid_count = across[:, :, 7::8].size + down[:, 7::8, :].size
    elsewhere = (across.sum() + down.sum() - on_grid) / max(1, across.size + down.size - grid_count)
    return {"detail": float(np.log2(width * height) + np.log2(energy / (variance + 1.0) + 1e-6)),
            "halo": _halo(y), "clip": float(np.log2(clipped + 0.01)),
            "block": float(np.log2((on_grid / max(1, grid_count) + 1e-3) / (elsewhere + 1e-3))),
            "jpeg": max(0.0, 90.0 - quality) / 10.0 if quality is not None else 0.0}


def processing_score(path: Path, max_pixels: int) -> float:
    """Smaller is less processed: minus the detail, plus the weighted marks of processing."""
    from benchcurate.curation.core.decode import decode_image

    data = path.read_bytes()
    decoded = decode_image(path, max_pixels, None, data)
    found = parts(decoded.image.convert("RGB"), jpeg_quality(data))
    return round(-found["detail"] + sum(weight * found[name] for name, weight in WEIGHTS.items()), 3)

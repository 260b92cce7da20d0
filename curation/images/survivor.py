"""Which copy of a picture to keep (`image_near_dedup`'s `keep_rule: least_processed`): the one that lost least.

The stage first takes a provisional centre for each group from cheap traits (`provisional`: colour, the size most
pictures linked to it through candidate pairs share, no frame, most pixels, least compression) and verifies the others
against it; then `elect` chooses, among the centre and the copies verified with it, by what each copy lost, read from
where the verification placed it on the centre:

1. colour beats greyscale (`Traits.chroma`; noise adds no colour to blocks of 8 pixels; a greyscale original
   ties with its copies; a faintly coloured picture's copies in colour show half its colour or more);
2. more pixels beat fewer: pixels per unit of the scene (the placement's scale times the sizes in the headers),
   within 3% of the most; a copy whose framing no other copy shares (a frame or crop, placed alone) sets the most
   only when over 5% above the others, as its scale may be misread by a few percent;
3. the framing most of the group shares: each copy's whole picture placed on the centre's, to 0.4% of its sides.
   Resized, recompressed, brightened, sharpened, blurred, re-saved and turned copies keep the original's
   framing; a crop cuts it and an added frame widens it, each a copy of its own. Between framings that as many
   copies share, the one showing more of the content without uniform borders is less cut, then the one with
   less uniform border has no added frame;
4. the orientation most of the group shares (a mirror image or a turn is the minority);
5. less compression: a lossless file, then the higher JPEG quality (read from its quantisation tables), then
   other lossy files; a lossless file whose full-size pixels equal a tied JPEG's is that JPEG re-saved and
   ranks as it;
6. fewer marks of processing, on the copies still tied, decoded again at full size (only those), in the pixel size
   most of them have (`size`: one of another size is a crop or frame the placement misread): any colour
   beats none (R = G = B everywhere is a greyscale copy of a faintly coloured picture); then the sharpness most
   copies share (a sharpened copy is sharper than the original and the copies that kept its sharpness, a blurred
   one less sharp); then the copy from which the others are predicted best by a tone curve and a 3x3 filter is
   the one they were made from (a brightened or blurred copy lost what the edit clipped, merged or smoothed
   away, so the original is not predicted back from it); then, among those within 10% of it, the ones in the
   tone most copies share (mean grey; a brightened or darkened copy is off from most others by a common factor,
   and re-saved as a JPEG it uses as many levels as the original or more); then the one using more grey levels
   and skipping fewer inside its range (`fewest_marks`); a copy with the chosen one's pixels (within a grey level
   everywhere: the same file re-saved, as a greyscale picture saved again as greyscale) ties with it.
Then the provisional order (then the stage's `source_priority`, then the smaller id). `bench/near_dup_quality.py`
reports who was kept, per kind of edit, on tests/dedup_set.py, and by which of these rules.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from PIL import Image

from benchcurate.curation.images.likeness import ORIENTATIONS
from benchcurate.curation.images.tones import TONE_BINS, isotonic

# libjpeg's (IJG) standard luminance table at quality 50
IJG_LUMINANCE = np.array(
    [
        16,
        11,
        10,
        16,
        24,
        40,
        51,
        61,
        12,
        12,
        14,
        19,
        26,
        58,
        60,
        55,
        14,
        13,
        16,
        24,
        40,
        57,
        69,
        56,
        14,
        17,
        22,
        29,
        51,
        87,
        80,
        62,
        18,
        22,
        37,
        56,
        68,
        109,
        103,
        77,
        24,
        35,
        55,
        64,
        81,
        104,
        113,
        92,
        49,
        64,
        78,
        87,
        103,
        121,
        120,
        101,
        72,
        92,
        95,
        98,
        112,
        100,
        103,
        99,
    ],
    dtype=np.float64,
)
LOSSLESS = ("PNG", "BMP", "TIFF", "GIF", "PPM", "TGA")
UNKNOWN_LOSSY_QUALITY = 75  # a lossy file whose quality setting cannot be read (WebP)
COLOUR_CHROMA = 4.0  # max - min over R, G, B (grey levels) above which a picture is in colour
COLOUR_SIDE = 32  # side of the copy colour is judged on: blocks of about 8 pixels average noise away
COLOUR_PERCENTILE = 95  # of the blocks: colour anywhere in the picture counts
FRAME_SHARE = 0.02  # of the area: a uniform border this large is a frame (provisional order)
DENSITY_TOLERANCE = 0.03  # pixels per unit of scene within this share of the most tie
LONE_SCALE_ERROR = 0.05  # how far the scale of a copy placed alone may be misread (a frame or crop: up to 3%)
FRAMING_TOLERANCE = 0.004  # of the centre's sides: framings closer than this on every edge are one framing
CONTENT_TOLERANCE = 0.01  # of the centre's area: content areas closer than this tie
SAME_PIXELS = 1  # grey levels: full-size pictures this close everywhere are one file re-saved


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


class Traits(NamedTuple):
    """What the keep rule reads of one picture without decoding it again."""

    chroma: float  # max - min over R, G, B of the content's most colourful blocks, in grey levels
    pixels: int  # of the full-size picture (its header)
    frame_share: float  # share of the area that is uniform border
    lossless: bool
    quality: int  # JPEG quality setting (100 for a lossless file)
    size_bytes: int
    detail: float  # fine detail of the reduced copy (`_detail`): a blurred copy has less


def traits(
    rgb: Image.Image, grey: Image.Image, content: tuple[float, float, float, float], data: bytes, fmt: str, pixels: int
) -> Traits:
    """The keep rule's view of a decoded picture (upright RGB and its greyscale at any reduced scale, the
    content box in its pixels), from its file bytes and format."""
    box = tuple(round(value) for value in content)
    small = np.asarray(rgb.crop(box).resize((COLOUR_SIDE, COLOUR_SIDE), Image.Resampling.BOX), dtype=np.int16)
    chroma = float(np.percentile(small.max(axis=2) - small.min(axis=2), COLOUR_PERCENTILE))
    lossless = fmt in LOSSLESS
    quality = 100 if lossless else (jpeg_quality(data) if fmt == "JPEG" else None) or UNKNOWN_LOSSY_QUALITY
    share = (box[2] - box[0]) * (box[3] - box[1]) / max(grey.width * grey.height, 1)
    return Traits(
        round(chroma, 3),
        pixels,
        round(1 - share, 4),
        lossless,
        int(quality),
        len(data),
        round(_detail(np.asarray(grey)), 3),
    )


def provisional(found: Traits, odd_size: bool = False) -> tuple:
    """Sort key of a group's provisional centre, smaller first: colour, the size most pictures linked to it
    through candidate pairs share (not `odd_size`, `near_dedup.order_keys`), no frame, most pixels, least
    compression."""
    return (
        found.chroma < COLOUR_CHROMA,
        odd_size,
        found.frame_share > FRAME_SHARE,
        -found.pixels,
        not found.lossless,
        -found.quality,
    )


# --- marks of processing, at full size ---------------------------------------------------------------------------

SAMPLES = 4_000  # pixels each prediction is fitted and measured on
EDGE_SAMPLES = 4_000  # pixels where the copies' mean grey bends most: each pair's sharpening is measured there
MARK_PIXELS = 4_000_000  # pixels the marks are measured on, at most
SHARPNESS_TOLERANCE = 0.05  # weight of the Laplacian: copies this much further from the group's middle sharpness
SCORE_TOLERANCE = 0.1  # predictions this close (share of the best) tie on it
LEVELS_TOLERANCE = 4.0  # levels used per channel: fewer by more than this is a lossy tone change
LEVEL_RANGE = (0.01, 0.99)  # shares of the pixels between which a skipped level is a mark (`_levels`)
TONE_TOLERANCE = 0.01  # natural log of mean grey: copies this much further from most others' tone are retoned


def _grey(rgb: np.ndarray) -> np.ndarray:
    """Grey levels (uint8) of an RGB picture, box-averaged by a whole factor when it has more than MARK_PIXELS
    pixels (a 16-megapixel wallpaper is judged at 4 megapixels)."""
    grey = rgb[..., 0] * np.float32(0.299) + rgb[..., 1] * np.float32(0.587) + rgb[..., 2] * np.float32(0.114)
    factor = int(np.ceil((grey.size / MARK_PIXELS) ** 0.5))
    if factor > 1:
        height, width = grey.shape[0] // factor * factor, grey.shape[1] // factor * factor
        grey = grey[:height, :width].reshape(height // factor, factor, width // factor, factor).mean(axis=(1, 3))
    return np.rint(grey).astype(np.uint8)


def prediction_error(around: np.ndarray, wanted: np.ndarray) -> float:
    """How far a target picture is from the best prediction of it made from a source picture of one size by a
    monotone tone curve then a 3x3 linear filter, fitted and measured on sampled pixels (root mean square, grey
    levels): `around` holds the source's 3x3 neighbourhood of each sampled pixel (9 x samples, uint8, the
    centre in row 4: `_neighbourhoods`), `wanted` the target's grey levels there. A copy made from another by
    a tone change, a blur or a sharpening is predicted from it almost exactly; the other way round, what the
    edit lost (clipped or merged levels, fine detail) is missing."""
    centre = around[4].astype(np.intp)
    bins = centre * TONE_BINS >> 8
    counts = np.bincount(bins, minlength=TONE_BINS)
    used = counts > 0
    curve = isotonic(
        np.bincount(bins, wanted, minlength=TONE_BINS)[used] / counts[used], counts[used].astype(np.float64)
    )
    levels = np.bincount(bins, centre, minlength=TONE_BINS)[used] / counts[used]
    table = np.interp(np.arange(256), levels, curve)
    design = np.vstack([table[around], np.ones((1, around.shape[1]))]).T
    weights = np.linalg.solve(design.T @ design + 1e-3 * np.eye(design.shape[1]), design.T @ wanted)
    return float(np.sqrt(np.mean((design @ weights - wanted) ** 2)))


def _neighbourhoods(grey: np.ndarray, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    return np.stack([grey[rows + dy, columns + dx] for dy in (-1, 0, 1) for dx in (-1, 0, 1)])


def sharpening(around: np.ndarray, wanted: np.ndarray) -> float:
    """How much sharper a target copy is than a source copy of one size: the weight of the source's Laplacian
    (4 x the centre less its four neighbours) when the target is fitted as a linear tone of the source plus that
    weight of it (unsharp masking adds the Laplacian, a blur takes it away; a tone change or a re-save adds
    none). `around` and `wanted` as `prediction_error` reads them, on pixels near edges (`sharpness`)."""
    source = around.astype(np.float64)
    bends = 4 * source[4] - source[1] - source[3] - source[5] - source[7]  # `laplacian` at each sampled pixel
    design = np.vstack([source[4], bends, np.ones_like(bends)]).T
    weights = np.linalg.solve(design.T @ design + 1e-3 * np.eye(3), design.T @ wanted)
    return float(weights[1])


def _largest(values: np.ndarray, count: int) -> np.ndarray:
    """Indices of the `count` largest values, ties at the last one taken in order (the same pixels whatever the
    selection algorithm; partitioning the negated values is fast even when most are equal, as on a page)."""
    count = min(count, values.size)
    threshold = -np.partition(-values, count - 1)[count - 1]
    above = np.flatnonzero(values > threshold)
    return np.concatenate([above, np.flatnonzero(values == threshold)[: count - above.size]])


def sharpness(greys: list[np.ndarray]) -> np.ndarray:
    """Each copy's sharpness on one scale, from every pair's `sharpening` (made antisymmetric: each copy's
    sharpening over another less the other's over it, halved; then the median over the others, as a strongly
    blurred copy shows almost no Laplacian to weigh and gives wild weights), read on the EDGE_SAMPLES pixels
    where the copies' mean grey bends most (a smooth sky shows no sharpening)."""
    bend = np.abs(laplacian(_mean(greys)))
    rows, columns = np.unravel_index(_largest(bend.ravel(), EDGE_SAMPLES), bend.shape)
    rows, columns = rows + 1, columns + 1  # `laplacian` has no edge row or column
    around = [_neighbourhoods(grey, rows, columns) for grey in greys]
    pairs = np.full((len(greys), len(greys)), np.nan)
    for j, source in enumerate(around):
        for k, target in enumerate(around):
            if j != k:
                pairs[j, k] = sharpening(source, target[4].astype(np.float64))
    return np.nanmedian((pairs - pairs.T) / 2, axis=0)


def _mean(greys: list[np.ndarray]) -> np.ndarray:
    """The pixel-wise mean of pictures of one size (float32): `np.mean` of them stacked, the same sums in the same
    order, without the stack (a group of 20 wallpapers would stack 20 full-size copies)."""
    total = greys[0].astype(np.float32)
    for grey in greys[1:]:
        np.add(total, grey, out=total)
    return np.divide(total, np.float32(len(greys)), out=total)


def fewest_marks(pictures: list[np.ndarray]) -> list[int]:
    """Indices of the copies with the fewest marks of processing among copies of one size tied on everything
    else (full-size upright RGB, uint8). First the copies with any colour, when some have none (R = G = B
    everywhere). Then those in the sharpness most of the copies share (`sharpness`: within SHARPNESS_TOLERANCE
    of the nearest to the median; a sharpened copy is sharper than the original and most of its copies, a
    blurred one less sharp; two copies have no middle). Among those, the copies from which the others are
    predicted best (`prediction_error`, summed over all the others): a darkened copy is predicted back almost
    exactly too, so among those within SCORE_TOLERANCE: the ones whose mean grey (over the sampled pixels) is
    in the tone most of the copies share (TONE_TOLERANCE of the median ratio to the others, the closest first);
    then the ones using the most grey levels and skipping the fewest (`_levels`: a tone change merges or skips
    levels); then the best predictor."""
    greys = [_grey(rgb) for rgb in pictures]
    height, width = greys[0].shape
    if height < 3 or width < 3:
        return list(range(len(pictures)))
    generator = np.random.default_rng(0)
    rows = generator.integers(1, height - 1, SAMPLES)
    columns = generator.integers(1, width - 1, SAMPLES)
    around = [_neighbourhoods(grey, rows, columns) for grey in greys]
    wanted = [found[4].astype(np.float64) for found in around]
    coloured = [k for k, rgb in enumerate(pictures) if not _grey_only(rgb)]
    chosen = coloured or list(range(len(greys)))  # a faint colour beats none: R = G = B is a greyscale copy
    if len(greys) > 2:
        levels = sharpness(greys)
        off = np.abs(levels - np.median(levels))
        closest = min(off[k] for k in chosen)
        chosen = [k for k in chosen if off[k] <= closest + SHARPNESS_TOLERANCE]
    scores = {  # only the copies still chosen are read
        j: sum(prediction_error(around[j], wanted[k]) for k in range(len(greys)) if k != j) for j in chosen
    }
    best = min(scores[k] for k in chosen)
    chosen = [k for k in chosen if scores[k] <= best * (1 + SCORE_TOLERANCE) + 1e-9]
    if len(chosen) > 1:  # most copies keep the original's tone: a brightened or darkened copy is off from most
        level = np.log([max(float(found.mean()), 1.0) for found in wanted])  # mean grey of the sampled pixels
        tone_off = {k: abs(float(np.median(np.delete(level, k) - level[k]))) for k in chosen}
        closest = min(tone_off.values())
        chosen = [k for k in chosen if tone_off[k] <= closest + TONE_TOLERANCE]
    if len(chosen) > 1:  # a tone change merges or skips levels (even re-encoded, fewer remain)
        used = {k: _levels(pictures[k]) for k in chosen}
        most = max(used.values())
        chosen = [k for k in chosen if used[k] >= most - LEVELS_TOLERANCE]
    best = min(scores[k] for k in chosen)
    return [k for k in chosen if scores[k] <= best + 1e-9]


def _grey_only(rgb: np.ndarray) -> bool:
    """Whether each pixel's R, G and B are equal."""
    return bool(np.array_equal(rgb[..., 0], rgb[..., 1]) and np.array_equal(rgb[..., 1], rgb[..., 2]))


def _levels(rgb: np.ndarray) -> float:
    """Grey levels a picture uses per channel (mean over R, G, B), less the levels it skips between its 1st and
    99th percentile: a darkened copy merges levels, a brightened one skips some inside its range."""
    found = []
    for channel in range(3):
        counts = np.bincount(rgb[..., channel].ravel(), minlength=256)
        share = np.cumsum(counts) / max(int(counts.sum()), 1)
        low, high = np.searchsorted(share, LEVEL_RANGE)
        found.append(np.count_nonzero(counts) - np.count_nonzero(counts[low : high + 1] == 0))
    return float(np.mean(found))


def laplacian(values: np.ndarray) -> np.ndarray:
    """4 x each pixel less its four neighbours, for the pixels inside the edge (float)."""
    return 4 * values[1:-1, 1:-1] - values[:-2, 1:-1] - values[2:, 1:-1] - values[1:-1, :-2] - values[1:-1, 2:]


def _detail(grey: np.ndarray) -> float:
    """log2 of fine detail over detail at half size (blurring lowers it, sharpening raises it)."""

    def fine(values: np.ndarray) -> float:
        return float(np.abs(laplacian(values)).mean()) if min(values.shape) > 2 else 0.0

    return float(np.log2((fine(grey.astype(np.float32)) + 1e-3) / (fine(halved(grey)) + 1e-3)))


def halved(grey: np.ndarray) -> np.ndarray:
    """A greyscale picture (uint8) box-averaged to half size, as float32: each 2 x 2 block's sum over 4 (exact:
    whole grey levels add and quarter without rounding, so the order of the sums does not matter; numpy's
    mean over two inner axes costs several times these four slices)."""
    height, width = grey.shape[0] // 2 * 2, grey.shape[1] // 2 * 2
    pixels = grey[:height, :width].astype(np.float32)
    half = pixels[0::2, 0::2] + pixels[0::2, 1::2]
    half += pixels[1::2, 0::2]
    half += pixels[1::2, 1::2]
    return np.multiply(half, 0.25, out=half)


# --- the election --------------------------------------------------------------------------------------------------


class Member(NamedTuple):
    """A picture of a verified group, as the centre's placement sees it."""

    index: int
    traits: Traits
    density: float  # full-size pixels per pixel of the centre, along a side
    framing: tuple[float, float, float, float]  # its whole picture on the centre's, in shares of its sides
    content_area: float  # its content on the centre's, in shares of its area
    orientation: str  # its turn relative to the centre


def _framings(group: list[Member]) -> dict[int, set[int]]:
    """Each member's framing: the members linked to it by framings within FRAMING_TOLERANCE on every edge."""
    found: dict[int, set[int]] = {m.index: {m.index} for m in group}
    for first in group:
        for second in group:
            if (
                found[first.index] is not found[second.index]
                and max(abs(a - b) for a, b in zip(first.framing, second.framing)) <= FRAMING_TOLERANCE
            ):
                merged = found[first.index] | found[second.index]
                for index in merged:
                    found[index] = merged
    return found


def _keep(members: list[Member], test: Callable[[Member], bool]) -> list[Member]:
    kept = [member for member in members if test(member)]
    return kept or members


def elect(
    members: list[Member], full_size: Callable[[int], np.ndarray | None], tie_break: Callable[[int], tuple]
) -> tuple[int, str]:
    """The index of the copy to keep among a verified group (the centre and its copies), and the rule that
    decided it (see the module). `full_size(index)` decodes a picture at full size, upright (RGB uint8; None when
    it cannot be decoded); it is asked only for copies tied up to the compression or the marks."""
    if len(members) == 1:
        return members[0].index, "alone"
    group = members
    most = max(m.traits.chroma for m in group)
    # in colour: COLOUR_CHROMA, or half the most colourful copy's when it is faint (a brightened copy of a faintly
    # coloured picture reads 4 grey levels where the original reads 3: both are in colour, a greyscale copy 0)
    least = min(COLOUR_CHROMA, most / 2) if most >= COLOUR_CHROMA else COLOUR_CHROMA
    remaining = _keep(group, lambda m: m.traits.chroma >= least)
    if len(remaining) == 1:
        return remaining[0].index, "colour"
    clusters = _framings(group)
    # a scale read through a framing no other copy shares (a frame or crop placed alone) may be off by a few
    # percent: within LONE_SCALE_ERROR above the others it ties with the most pixels, it does not set them
    shared = max(m.density for m in _keep(remaining, lambda m: len(clusters[m.index]) > 1))
    densest = max([shared] + [m.density for m in remaining if m.density > shared * (1 + LONE_SCALE_ERROR)])
    remaining = [m for m in remaining if m.density >= densest * (1 - DENSITY_TOLERANCE)]
    if len(remaining) == 1:
        return remaining[0].index, "pixels"
    top = max(len(clusters[m.index]) for m in remaining)
    remaining = [m for m in remaining if len(clusters[m.index]) == top]
    if len({id(clusters[m.index]) for m in remaining}) > 1:  # framings as many copies share: the one showing
        widest = max(m.content_area for m in remaining)  # more of the content, then the one with less border
        remaining = [m for m in remaining if m.content_area >= widest - CONTENT_TOLERANCE]
        least = min(m.traits.frame_share for m in remaining)
        remaining = [m for m in remaining if m.traits.frame_share <= least + CONTENT_TOLERANCE]
    if len(remaining) == 1:
        return remaining[0].index, "framing"
    turns = Counter(m.orientation for m in group)
    top = max(turns[m.orientation] for m in remaining)
    remaining = [m for m in remaining if turns[m.orientation] == top]
    if len(remaining) == 1:
        return remaining[0].index, "orientation"
    remaining, by = _least_compressed(remaining, full_size)
    if len(remaining) == 1:
        return remaining[0].index, by
    decoded = [(m, pixels) for m in remaining if (pixels := full_size(m.index)) is not None]
    found = _commonest_shape(decoded)
    if len(found) == 1 and len(decoded) > 1:
        return found[0][0].index, "size"
    if len(found) > 1 and len({pixels.shape for _, pixels in found}) == 1:  # turned copies tied on the turn: no marks
        best = [found[k][1] for k in fewest_marks([pixels for _, pixels in found])]
        # a copy with the pixels of one the marks chose is that file re-saved: the marks cannot tell which came first
        remaining = [m for m, pixels in found if any(_resaved(pixels, other) for other in best)]
        if len(remaining) == 1:
            return remaining[0].index, "marks"
    return min(remaining, key=lambda m: tie_break(m.index)).index, "order"


def _commonest_shape(found: list[tuple[Member, np.ndarray]]) -> list[tuple[Member, np.ndarray]]:
    """The decoded copies in the pixel size most of them have (then the larger): copies still tied up to the marks
    were placed on one framing at one scale, so one of another size is a crop or a frame the placement misread
    (a 2% crop of a galaxy on a black sky reads as the whole picture), and the marks compare copies of one size."""
    sizes = Counter(_unturned_shape(m, pixels) for m, pixels in found)
    if len(sizes) < 2:
        return found
    shape = max(sizes, key=lambda size: (sizes[size], size[0] * size[1], size))
    return [(m, pixels) for m, pixels in found if _unturned_shape(m, pixels) == shape]


def _unturned_shape(member: Member, pixels: np.ndarray) -> tuple[int, int]:
    """(height, width) of a copy's pixels as the centre has them: a quarter turn's sides swapped back."""
    height, width = pixels.shape[:2]
    return (width, height) if ORIENTATIONS[member.orientation][0] else (height, width)  # (transposed, ...)


def _resaved(first: np.ndarray, second: np.ndarray) -> bool:
    """Whether two full-size pictures are one file re-saved: one size, within SAME_PIXELS everywhere (every 16th
    row and column first: an edited copy differs there already, and a wallpaper's whole pixels cost 0.1 s)."""
    if first.shape != second.shape:
        return False
    return all(
        int((np.maximum(a, b) - np.minimum(a, b)).max()) <= SAME_PIXELS  # |a - b| in uint8
        for a, b in ((first[::16, ::16], second[::16, ::16]), (first, second))
    )


def _least_compressed(members: list[Member], full_size: Callable[[int], np.ndarray | None]) -> tuple[list[Member], str]:
    """The members with the least compression; a lossless one with a tied JPEG's pixels ranks as that JPEG."""
    lossy = [m for m in members if not m.traits.lossless]
    lossless = [m for m in members if m.traits.lossless]
    if lossless and lossy:
        best = max(m.traits.quality for m in lossy)
        jpegs = [(m, full_size(m.index)) for m in lossy if m.traits.quality == best]
        resaved = set()
        for member in lossless:
            pixels = full_size(member.index)
            if pixels is not None and any(other is not None and _resaved(other, pixels) for _, other in jpegs):
                resaved.add(member.index)
        if resaved:  # a re-save ranks just below the JPEG it was made from
            ranked = {
                m.index: (best - 0.5 if m.index in resaved else 101) if m.traits.lossless else m.traits.quality
                for m in members
            }
            top = max(ranked.values())
            return [m for m in members if ranked[m.index] == top], "compression (a lossless re-save of a JPEG)"
    top = max((m.traits.lossless, m.traits.quality) for m in members)
    return [m for m in members if (m.traits.lossless, m.traits.quality) == top], "compression"

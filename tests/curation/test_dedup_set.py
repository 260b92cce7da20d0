"""Near-duplicate images on our labelled set (tests/dedup_set.py): every kind of benign edit is grouped with its
original at least as often as plain pHash finds it, no hard negative is, and the original is the copy kept; and the
pieces under it (placement, local change, keep rule), checked alone."""

from __future__ import annotations

import random
from types import SimpleNamespace

import imagehash
import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageEnhance, ImageFilter, ImageFont, ImageOps

from benchcurate.curation.images import near_dedup, survivor, verify
from benchcurate.curation.images.likeness import PIL_TRANSPOSE, dihedral_hashes, likeness_hashes, trim_borders
from benchcurate.curation.images.near_dedup import NearDedupConfig
from tests import dedup_set
from tests.factories import without
from tests.helpers import SHARED_DIR, shared_lock

# The part of the set the tests build: photos in colour (PNG), of the night sky (JPEG: copies carry its compression)
# and of handwriting (greyscale), a table screenshot (pale rows that a brightened copy turns white) and a long
# receipt (small print and a barcode), with all their copies and hard negatives (170 files). The whole set's
# figures (878 files, and 1,864 with every render of the demo) are in bench/results/near_dup_quality.md.
SUBSET = ("astronaut", "hubble_deep_field", "text", "table-01", "receipt-01")
CONFIG = NearDedupConfig()


@pytest.fixture(scope="module")
def labelled():
    with shared_lock("dedup-set-v3"):
        entries = dedup_set.build(SHARED_DIR / "dedup-set-v3", names=SUBSET)
    items = dedup_set.keys(entries)
    dropped, summary = dedup_set.group(items)
    return entries, items, dropped, summary


def distance(first: str, second: str) -> int:
    return (int(first, 16) ^ int(second, 16)).bit_count()


def photo(name: str = "astronaut") -> Image.Image:
    path = next(path for path, _ in dedup_set.sources(names=(name,)))
    with Image.open(path) as image:
        return image.convert("RGB")


def fine(image: Image.Image, tmp_path, name: str) -> verify.Picture:
    path = tmp_path / f"{name}.png"
    image.save(path)
    return verify.picture(path, 10**9)


def test_the_orientation_hashes_are_the_phash_of_the_turned_picture():
    for path, _ in dedup_set.sources(photos=6, renders_per_kind=0):
        image = Image.open(path).convert("RGB")
        hashes = dihedral_hashes(image)
        assert hashes["identity"] == str(imagehash.phash(image))
        for name, transpose in PIL_TRANSPOSE.items():
            if transpose is not None:  # equal up to ties at the median
                assert distance(hashes[name], str(imagehash.phash(image.transpose(transpose)))) <= 2, (path, name)


def test_a_frame_is_trimmed_and_a_picture_without_one_is_left_alone():
    original = photo()
    framed = Image.new("RGB", (original.width + 60, original.height + 40), (0, 0, 0))
    framed.paste(original, (30, 20))
    assert trim_borders(original) is original
    assert abs(trim_borders(framed).width - original.width) <= 2
    assert abs(trim_borders(framed).height - original.height) <= 2
    grey = framed.convert("L")
    assert (
        distance(likeness_hashes(grey)["phash_trimmed"], likeness_hashes(original.convert("L"))["phash_trimmed"]) <= 4
    )
    box = verify.content_box(framed.convert("L").resize((framed.width // 2, framed.height // 2)))
    assert box == pytest.approx((15, 10, 15 + original.width / 2, 10 + original.height / 2), abs=2)


def test_a_crop_lies_inside_its_original_and_a_camera_shift_does_not(tmp_path):
    """The placement is refined to about a pixel of the 256-pixel copies: a 5% crop maps to the part of the
    original it shows and leaves nothing uncovered; a view moved 5% diagonally shows what the other does not."""
    original = photo()
    width, height = original.size
    cut = round(width * 0.05)
    first, crop = fine(original, tmp_path, "original"), fine(original.crop((cut, 0, width, height)), tmp_path, "crop")
    found = verify.compare(first, crop, "identity", CONFIG.max_local_difference, CONFIG.max_uncovered_share)
    assert found.same and found.evidence["uncovered"] <= 0.005, found
    left = found.placement.inverse().box((0, 0, *crop.fine.shape[::-1]))[0]
    assert left == pytest.approx(cut * first.fine.shape[1] / width, abs=1.5)
    inner = original.crop((cut, cut, width - cut, height - cut))
    shifted = original.crop((0, 0, width - 2 * cut, height - 2 * cut))
    found = verify.compare(
        fine(inner, tmp_path, "inner"),
        fine(shifted, tmp_path, "shifted"),
        "identity",
        CONFIG.max_local_difference,
        CONFIG.max_uncovered_share,
    )
    assert not found.same and found.evidence["uncovered"] > 3 * CONFIG.max_uncovered_share, found


def test_the_verification_tells_a_local_change_from_a_global_one(tmp_path):
    original = photo()
    first = fine(original, tmp_path, "original")
    edits = {
        "darker": ImageEnhance.Brightness(original).enhance(0.8),
        "sharpened": original.filter(ImageFilter.UnsharpMask(radius=2, percent=150, threshold=2)),
        "half": original.resize((original.width // 2, original.height // 2), Image.Resampling.LANCZOS),
    }
    for name, edited in edits.items():
        found = verify.compare(
            first, fine(edited, tmp_path, name), "identity", CONFIG.max_local_difference, CONFIG.max_uncovered_share
        )
        assert found.same, (name, found)
    found = verify.compare(
        first,
        fine(patched_copy(original), tmp_path, "patched"),
        "identity",
        CONFIG.max_local_difference,
        CONFIG.max_uncovered_share,
    )
    assert not found.same and found.evidence["local_difference"] > 2 * CONFIG.max_local_difference, found


def dark_wood(seed: int, side: int = 1280) -> Image.Image:
    """A dark wallpaper of vertical grain under a spot of light, its top and right edges nearly black (a black
    frame added there is hard to tell from the picture)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:side, 0:side] / side
    light = np.exp(-((x - 0.45) ** 2 / 0.06 + (y - 0.3) ** 2 / 0.12))
    grain = 0.6 + 0.4 * np.sin(2 * np.pi * (x * 48 + 0.3 * np.sin(2 * np.pi * y * 3)))
    base = (14 + 22 * (1 - x) * y + 150 * light) * grain
    rgb = np.stack([base, base * 0.72, base * 0.48], -1) + rng.normal(0, 1.5, (side, side, 1))
    return Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))


@pytest.mark.parametrize("seed", range(4))
def test_a_dark_picture_is_placed_inside_a_black_frame_added_to_it(seed, tmp_path):
    # a pass on a placement lining the two up loosely is checked against the next placement: before, the first
    # (0.97, scaled 0.97 x 0.92 for 0.89) was kept for seed 2, and the keep rule read a denser copy from it
    original = dark_wood(seed)
    width = original.width
    frame = round(width * 0.06)
    found = verify.compare(
        fine(original, tmp_path, "original"),
        fine(ImageOps.expand(original, border=frame, fill=(0, 0, 0)), tmp_path, "framed"),
        "identity",
        CONFIG.max_local_difference,
        CONFIG.max_uncovered_share,
    )
    inside = width / (width + 2 * frame)  # the original's side on the framed copy's, both 256 fine pixels
    assert found.same, found
    assert abs(found.placement.ax - inside) < 0.01 and abs(found.placement.ay - inside) < 0.01, found


def night_sky(seed: int, width: int = 640, height: int = 480) -> Image.Image:
    """A sky nearly black at the top and blue below, stars (one close to the top edge) and a green planet rising."""
    rng = np.random.default_rng(seed)
    level = np.linspace(0, 1, height)[:, None, None] * np.ones((1, width, 1))
    sky = Image.fromarray((np.array([5, 8, 12]) + np.array([25, 50, 110]) * level).astype(np.uint8))
    draw = ImageDraw.Draw(sky)
    stars = [(int(rng.integers(0, width)), int(rng.integers(0, height))) for _ in range(25)]
    for x, y in [*stars, (int(rng.integers(width // 4, 3 * width // 4)), 10)]:
        draw.ellipse((x - 2, y - 2, x + 2, y + 2), fill=(230, 230, 240))
    draw.ellipse((width // 4, int(height * 0.8), 3 * width // 4, int(height * 1.6)), fill=(40, 160, 60))
    return sky


def test_a_thin_black_frame_on_a_dark_sky_is_placed_whole_when_its_content_box_cuts_into_the_sky(tmp_path):
    """A real boot splash (a night sky) with a 1% black frame added failed against its original: the framed
    copy's content box trims the frame and the nearly black sky below it down to the first star, content on
    content then lines up at 0.998 a few pixels off and shows a change along the edge, and a failure lining two
    up that well ended the search. Whole on whole is tried too now, and passes (seed 4 failed before)."""
    cut_into_the_sky = 0
    for seed in range(12):
        sky = night_sky(seed)
        original = fine(sky, tmp_path, f"sky-{seed}")
        framed = fine(ImageOps.expand(sky, border=5, fill=(0, 0, 0)), tmp_path, f"framed-{seed}")
        left, top = framed.content[:2]
        cut_into_the_sky += top > left + 2  # the frame is as wide on every side: the rest at the top is sky
        found = verify.compare(original, framed, "identity", CONFIG.max_local_difference, CONFIG.max_uncovered_share)
        assert found.same, (seed, found.evidence)
    assert cut_into_the_sky >= 4


def test_a_placement_stretched_unlike_the_pictures_shapes_is_not_judged(tmp_path):
    def shaped(width: int, height: int) -> verify.Picture:
        return verify.Picture(np.zeros((height, width), np.uint8), (0, 0, width, height), (width, height), None, None)

    same_shape, wider = (shaped(256, 200), shaped(256, 200)), (shaped(256, 200), shaped(256, 160))
    assert not verify.stretched(verify.Placement(1.05, 0, 1.05, 0), *same_shape)  # a crop or a resize: no stretch
    assert not verify.stretched(verify.Placement(1.0, 0, 1.04, 0), *same_shape)  # within MAX_STRETCH
    assert verify.stretched(verify.Placement(0.9, 0, 1.33, 0), *same_shape)  # a real plain picture's wrong fit
    assert verify.stretched(verify.Placement(1.149, 0, 1.266, 0), *same_shape)  # a framed boot splash's wrong fit
    # a pixel over the shorter side on top: a real 16 x 12 thumbnail was placed on its 400 x 301 picture at 5.2%
    thumbnail = (shaped(296, 222), shaped(16, 12))
    assert not verify.stretched(verify.Placement(0.054, 0, 0.0569, 0), *thumbnail)
    assert verify.stretched(verify.Placement(0.054, 0, 0.0620, 0), *thumbnail)  # 13.8%: beyond a pixel too
    assert verify.stretched(verify.Placement(1.0, 0, 1.06, 0), *same_shape)  # 5.8%: a pixel over 200 is 0.5%
    assert not verify.stretched(verify.Placement(1.0, 0, 0.8, 0), *wider)  # squashed as the shapes say
    assert verify.stretched(verify.Placement(1.0, 0, 1.25, 0), *wider)
    assert verify.stretched(verify.Placement(1.0, 0, -1.0, 200), *same_shape)  # upside down: no placement of a copy
    # squashed copies of a photo still pass (a guard on any stretch of 5% would turn the last two away)
    original = photo()
    first = fine(original, tmp_path, "original")
    for factor in (1.05, 1.12, 1.25):
        squashed = original.resize((round(original.width * factor), original.height), Image.Resampling.LANCZOS)
        found = verify.compare(
            first,
            fine(squashed, tmp_path, f"squashed-{factor}"),
            "identity",
            CONFIG.max_local_difference,
            CONFIG.max_uncovered_share,
        )
        assert found.same, (factor, found)


def patched_copy(original: Image.Image) -> Image.Image:
    """The picture with a magenta square over a tenth of its width: a local change."""
    patched = original.copy()
    side = original.width // 10
    left, top = original.width // 3, original.height // 3
    patched.paste((255, 0, 255), (left, top, left + side, top + side))
    return patched


def test_work_reused_across_placements_and_pairs_equals_work_done_afresh(tmp_path):
    """The verification reuses per-picture work (the first picture turned, with its samples, across the pairs it
    starts; the sample the tone curve was fitted on; each direction's mismatch with and without the allowance for
    resampling) and does the blur, extremes and standardising in place: each equals the same work done afresh, and
    a verdict does not depend on which pictures were verified before it."""
    original = photo()
    width, height = original.size
    cut = round(width * 0.05)
    first = fine(original, tmp_path, "original")
    copies = {
        "crop": fine(original.crop((cut, 0, width, height)), tmp_path, "crop"),
        "framed": fine(ImageOps.expand(original, border=cut, fill=(0, 0, 0)), tmp_path, "framed"),
        "shifted": fine(original.crop((2 * cut, 2 * cut, width, height)), tmp_path, "shifted"),
        "patched": fine(patched_copy(original), tmp_path, "patched"),
        "turned": fine(original.transpose(Image.Transpose.ROTATE_90), tmp_path, "turned"),
    }
    limits = (CONFIG.max_local_difference, CONFIG.max_uncovered_share)
    afresh = {}
    for name, copy in copies.items():
        verify._TURNED.clear()
        afresh[name] = verify.compare(first, copy, "rotate_270" if name == "turned" else "identity", *limits)
    verify._TURNED.clear()
    for name, copy in [*copies.items(), *reversed(copies.items())]:  # the first picture's work reused
        assert verify.compare(first, copy, "rotate_270" if name == "turned" else "identity", *limits) == afresh[name]
        assert verify.compare(copy, first, "identity", *limits).same == afresh[name].same or name == "turned"
    assert afresh["crop"].same and afresh["framed"].same and afresh["turned"].same
    assert not afresh["patched"].same

    for orientation in ("identity", "rotate_90", "flip_left_right"):
        turned = verify._turned(first, orientation)
        expected = verify.oriented(first, orientation)
        assert np.array_equal(turned.picture.fine, expected.fine) and turned.picture.content == expected.content
        assert verify._turned(first, orientation) is turned
        box, size = turned.picture.content, (90, 70)
        assert np.array_equal(turned.samples(box, size), verify._sample(turned.image, box, size))
        assert np.array_equal(
            turned.samples((3.5, 2.0, 60.25, 41.0), size), verify._sample(turned.image, (3.5, 2.0, 60.25, 41.0), size)
        )

    rng = np.random.default_rng(7)
    a = first.fine.astype(np.float32)
    patched = a.copy()
    patched[60:90, 60:90] = 255 - patched[60:90, 60:90]
    for pixels in (a, patched, np.clip(a * 0.8 + rng.normal(0, 4, a.shape), 0, 255).astype(np.float32)):
        for times in (0, 1, 2):
            blurred = pixels
            for _ in range(times):
                padded = np.pad(blurred, 1, mode="edge")
                blurred = (padded[:, :-2] + 2 * padded[:, 1:-1] + padded[:, 2:]) * 0.25
                blurred = (blurred[:-2] + 2 * blurred[1:-1] + blurred[2:]) * 0.25
            assert np.array_equal(verify._blur(pixels, times), blurred)
            plain = (blurred - blurred.mean()) / max(float(blurred.std()), 1e-3)
            assert np.array_equal(verify._standardised(pixels, times), plain)
        padded = np.pad(pixels, 1, mode="edge")
        for function in (np.maximum, np.minimum):
            rows = function(function(padded[:, :-2], padded[:, 1:-1]), padded[:, 2:])
            assert np.array_equal(
                verify._extreme(pixels, function), function(function(rows[:-2], rows[1:-1]), rows[2:])
            )
        # each direction afresh from the plain formula (`_leftover`), against the one computed with reuse
        one, other = verify._Prepared(a), verify._Prepared(pixels)
        unstable = np.maximum(verify._resampling_change(a), verify._resampling_change(pixels))
        forward, backward = verify._leftover(one, other, unstable).excess, verify._leftover(other, one, unstable).excess
        rough = verify._leftover(one, other, None)
        expected = verify.LocalChange(
            min(forward, backward),
            min(rough.concentration, verify._leftover(other, one, None).concentration),
        )
        assert verify.local_difference(a, pixels, limit=-1.0) == expected
        assert verify.local_difference(a, pixels).difference == rough.excess


def test_the_percentiles_are_numpys_to_the_bit():
    """`verify.percentiles` replaces `np.percentile` on the verification's path: the same numbers, in the same
    precision (one percent: the values'; a list: double), on spread, tied, constant and strided values."""
    rng = np.random.default_rng(3)
    for trial in range(600):
        height, width = rng.integers(1, 90, 2)
        values = [
            rng.random((height, width)) * 255,
            rng.integers(0, 5, (height, width)),
            rng.normal(0, 1, (height, width)) ** 3,
            np.full((height, width), rng.random()),
        ][trial % 4].astype(np.float64 if trial % 7 == 0 else np.float32)[:: 1 + trial % 2, :: 1 + trial % 3]
        for percents in ([1, 99], [90], [0, 100], [12.5, 87.5], 90, 1, 99, 100, 0):
            mine, numpys = verify.percentiles(values, percents), np.percentile(values, percents)
            assert np.array_equal(mine, numpys) and type(mine) is type(numpys), (values.shape, percents)
            assert np.asarray(mine).dtype == np.asarray(numpys).dtype


def test_the_half_size_copy_of_the_marks_is_numpys_block_mean_to_the_bit():
    rng = np.random.default_rng(5)
    for _ in range(200):
        height, width = rng.integers(2, 200, 2)
        grey = rng.integers(0, 256, (height, width)).astype(np.uint8)
        even = grey[: height // 2 * 2, : width // 2 * 2].astype(np.float32)
        mean = even.reshape(height // 2, 2, width // 2, 2).mean(axis=(1, 3))
        assert np.array_equal(survivor.halved(grey), mean) and survivor.halved(grey).dtype == mean.dtype


def test_the_mean_of_the_marks_is_numpys_stacked_mean_to_the_bit():
    """`survivor._mean` sums the copies one by one, as `np.mean` over the stacked copies does, without the stack."""
    rng = np.random.default_rng(6)
    for count in range(1, 24):
        height, width = rng.integers(3, 300, 2)
        greys = [rng.integers(0, 256, (height, width)).astype(np.uint8) for _ in range(count)]
        stacked = np.mean([grey.astype(np.float32) for grey in greys], axis=0)
        assert np.array_equal(survivor._mean(greys), stacked) and survivor._mean(greys).dtype == stacked.dtype


def test_window_sums_from_summed_area_tables_match_summing_each_window():
    """The crop search reads each window's sum and sum of squares from summed-area tables: the sums of the windows
    (to float rounding), and correlations that match the direct formula; a flat window correlates 0 (exact sums
    leave it no spread: a floor on noise alone scored a white picture against anything below -2, and the search
    found no place at all)."""
    from numpy.lib.stride_tricks import sliding_window_view

    from benchcurate.curation.images import likeness

    rng = np.random.default_rng(7)
    for trial in range(40):
        side = int(rng.integers(12, 70))
        big = (rng.random((side, side)) * 255).astype(np.float32)
        height, width = (int(value) for value in rng.integers(4, side + 1, 2))
        lefts, tops = range(int(rng.integers(0, side - width + 1)), side - width + 1), range(side - height + 1)
        windows = sliding_window_view(big.astype(np.float64), (height, width))[tops.start :, lefts.start :]
        sums, squares = likeness._Integral.of(big).windows(height, width, lefts, tops)
        assert np.allclose(sums, windows.sum(axis=(2, 3)), rtol=1e-9)
        assert np.allclose(squares, (windows**2).sum(axis=(2, 3)), rtol=1e-9)
        small = (rng.random((height, width)) * 255).astype(np.float32)
        found = likeness._correlations(big, likeness._Integral.of(big), small, lefts, tops)
        centred = windows - windows.mean(axis=(2, 3), keepdims=True)
        template = (small - small.mean()) / np.linalg.norm(small - small.mean())
        direct = np.einsum("ijkl,kl->ij", centred, template) / np.sqrt((centred**2).sum(axis=(2, 3)))
        assert np.allclose(found, direct, atol=1e-4), trial
    white, picture = np.full((128, 128), 255, np.uint8), (rng.random((128, 128)) * 255).astype(np.uint8)
    window = likeness.place(white, picture, 1.1375)
    assert window is not None and abs(window.correlation) < 0.01


def test_the_labelled_set_meets_its_floors(labelled):
    """Per kind of edit, at least plain pHash's share at the same threshold on the same files; no hard negative
    grouped, no group of two scenes; the original (or a copy with its pixels) kept in at least 90% of groups."""
    entries, items, dropped, summary = labelled
    scores = dedup_set.score(entries, items, dropped, CONFIG.max_hamming_distance)
    for kind in dedup_set.EDITS:
        assert scores.recall[kind] >= scores.phash_recall[kind], (kind, scores)
    assert sum(scores.negative_merges.values()) == 0 and scores.impure_groups == 0, scores
    assert scores.original_merges == 0 and summary["rejected_by_verification"] > 0
    # a candidate turned away is counted once per group, though it is queued once per copy in it that it is near
    assert summary["rejected_by_verification"] <= summary["verified_pairs"], summary
    assert scores.original_kept >= 0.9, scores
    # turns and thick frames are found where plain pHash misses them
    for kind in ("thick_border", "mirror", "quarter_turn"):
        assert scores.recall[kind] > scores.phash_recall[kind], (kind, scores)


def one_picture_set(name: str) -> tuple:
    """The labelled set of one shipped picture (its copies and hard negatives), grouped at the defaults:
    (entries, items, dropped, summary, scores)."""
    with shared_lock("dedup-set-v3"):
        entries = dedup_set.build(SHARED_DIR / "dedup-set-v3", names=(name,))
    items = dedup_set.keys(entries)
    dropped, summary = dedup_set.group(items)
    return entries, items, dropped, summary, dedup_set.score(entries, items, dropped, CONFIG.max_hamming_distance)


def test_the_next_frame_of_a_screen_is_not_a_copy_of_it():
    """Copies of one size lie on one pixel grid: the next frame of a screen recording (a region moved, the view
    panned by 1% and scaled back to the same size, a little noise) lines up with its original only when moved off
    that grid by a few pixels, so it stays apart, though its local change is within the limit; the same-size copies
    (re-saved, retoned, sharpened, blurred, greyscale) are placed in place and still grouped with the original."""
    entries, items, dropped, _, scores = one_picture_set("ui_screenshot-02")
    frame, original = (
        next(k for k, entry in enumerate(entries) if entry.edit == e) for e in ("next_frame", "original")
    )
    assert frame not in dropped and sum(scores.negative_merges.values()) == 0, (dropped.get(frame), scores)
    found = near_dedup.verify(original, frame, ["identity"], dedup_set.pictures_of(items), CONFIG)
    assert not found.same and found.evidence["moved"] > verify.MAX_MOVED, found
    assert found.evidence["local_difference"] <= CONFIG.max_local_difference, found  # the grid tells them apart
    assert near_dedup.changed(found, CONFIG)  # so no copy in the original's group may vouch for it either
    same_size = ("jpeg_50", "other_format", "darker_10", "sharpen_mild", "sharpen_strong", "blur_08", "greyscale")
    for k in (k for k, entry in enumerate(entries) if entry.edit in same_size):
        assert k in dropped and dropped[k].kept == original, (entries[k].edit, dropped.get(k))
        copy = near_dedup.verify(original, k, ["identity"], dedup_set.pictures_of(items), CONFIG)
        assert copy.same and copy.placement == verify.Placement(1.0, 0.0, 1.0, 0.0), (entries[k].edit, copy)


@pytest.mark.parametrize("seed", range(3))
def test_a_plain_wallpaper_panned_by_one_percent_is_another_frame_though_it_lines_up_in_place(seed, tmp_path):
    """A smooth wallpaper panned 1% and kept at its size (the next frame of a video, with sensor noise) lines up in
    place at 0.998-0.999, above where a placement is refined, and shows no local change: refined anyway once it
    passes, it moves an end between 2 and 4 fine pixels and explains much of what was left, so the two are two
    pictures. Its retoned, sharpened and blurred copies of one size stay in place and pass; a drift that explains
    nothing does not count as a move (a brightened real wallpaper: 2.5 pixels for 3% of the mismatch)."""
    wallpaper = dithered_wallpaper(seed)
    width, height = wallpaper.size
    pan = round(width * 0.01)
    panned = wallpaper.crop((pan, 0, width, height)).resize((width, height), Image.Resampling.BICUBIC)
    frame = dedup_set._noisy(panned, random.Random(seed), 3)
    original = fine(wallpaper, tmp_path, "original")
    limits = (CONFIG.max_local_difference, CONFIG.max_uncovered_share)
    found = verify.compare(original, fine(frame, tmp_path, "frame"), "identity", *limits)
    assert not found.same and verify.MAX_MOVED < found.evidence["moved"] < 4, found
    assert found.evidence["local_difference"] <= CONFIG.max_local_difference, found  # only the move tells them apart
    for k, copy in enumerate(toned_and_filtered(wallpaper)[1:]):
        verdict = verify.compare(original, fine(copy, tmp_path, f"copy-{k}"), "identity", *limits)
        assert verdict.same and verdict.placement == verify.Placement(1.0, 0.0, 1.0, 0.0), (k, verdict)
    assert not verify.keeps_move(0.9887, 0.9891, 2.54)  # drifted: 97% of the mismatch left
    assert verify.keeps_move(0.9976, 0.9988, 2.37)  # panned: half of it explained
    assert not verify.keeps_move(0.9976, 0.9988, 1.9)  # within two pixels it must gain MOVED_GAIN


def test_a_groups_first_centre_has_the_size_most_of_its_copies_share():
    """A chart with white margins: its copies with a white frame added are framed like it and have more pixels,
    so by colour, frame and pixels alone the widest frame came first as the group's provisional centre, and each
    copy of the chart's size was then placed on it by a crop search. Most copies keep the original's size
    (re-saved, retoned, sharpened, blurred, turned), so a picture of that size comes first, and the original is
    still the copy kept."""
    entries, items, dropped, _, scores = one_picture_set("table-01")
    original, framed = (
        next(k for k, entry in enumerate(entries) if entry.edit == e) for e in ("original", "border_white_10")
    )
    pictures = dedup_set.pictures_of(items)
    assert survivor.provisional(pictures(framed).traits) < survivor.provisional(pictures(original).traits)
    near = near_dedup.neighbours(near_dedup.candidates(items, CONFIG, set()))
    keys = near_dedup.order_keys(near, items, CONFIG, pictures)
    first = min(near, key=keys.__getitem__)
    assert sorted(pictures(first).size) == sorted(pictures(original).size), entries[first].edit
    assert keys[original] < keys[framed]
    assert dropped[framed].kept == original and scores.original_kept == 1.0, (dropped.get(framed), scores)


def test_a_size_is_odd_against_the_pictures_linked_to_it_and_a_tie_is_not():
    """`order_keys` on a made-up candidate graph of three linked sets: in the first, a size turned counts as the
    same and the one other size is odd; in the second, one picture each of two sizes tie (neither odd), though
    one of those sizes is the commonest of the first set, and an unreadable picture keeps the plain preference;
    with `largest`, no picture is read and every key is the plain preference."""
    sizes = {0: (100, 80), 1: (100, 80), 2: (80, 100), 3: (110, 90), 4: (50, 40), 5: (100, 80), 6: None}
    sizes |= {7: (200, 200), 8: (200, 200), 9: (300, 300)}
    near = {0: [1], 1: [0, 2], 2: [1, 3], 3: [2], 4: [5, 6], 5: [4], 6: [4], 7: [8, 9], 8: [7], 9: [7]}
    traits = survivor.Traits(40.0, 8_000, 0.0, True, 100, 10_000, 0.0)
    items = [near_dedup.ImageKey(f"item-{k}", f"{k:064x}", None, 8_000, 10_000, "s") for k in range(10)]
    read: list[int] = []

    def pictures(index: int):
        read.append(index)
        return None if sizes[index] is None else SimpleNamespace(traits=traits, size=sizes[index])

    keys = near_dedup.order_keys(near, items, CONFIG, pictures)
    plain = {k: near_dedup.preference(items[k], CONFIG.source_priority) for k in near}
    assert {k for k in near if k != 6 and keys[k][1]} == {3, 9}, keys
    assert keys[0] == (*survivor.provisional(traits, False), *plain[0][2:]) and keys[6] == plain[6]
    assert sorted(read) == sorted(near)  # each picture read once
    read.clear()
    assert near_dedup.order_keys(near, items, CONFIG.model_copy(update={"keep_rule": "largest"}), pictures) == plain
    assert read == []


def test_a_word_swapped_in_small_print_is_seen_on_a_finer_copy():
    """A page of small print with a few words swapped over (its `object_removed` copy) is within the limit at the
    256-pixel verification size, where resampling leaves as much; looked at again at 512 pixels against the copy
    of its group on its own pixel grid (the original), the change is concentrated in one region, so it stays
    apart. Its benign copies are all still grouped with the original, which is kept."""
    entries, items, dropped, summary, scores = one_picture_set("document-01")
    swapped = next(k for k, entry in enumerate(entries) if entry.edit == "object_removed")
    assert swapped not in dropped and summary["rejected_by_finer_look"] == 1, (dropped.get(swapped), summary)
    assert sum(scores.negative_merges.values()) == 0 and scores.impure_groups == 0, scores
    for kind in dedup_set.EDITS:
        assert scores.recall[kind] >= scores.phash_recall[kind], (kind, scores)
    assert scores.kept_by_kind == {"original": 1}, scores


def test_the_finer_look_asks_for_small_print_and_a_copy_on_one_grid(tmp_path):
    """A photo has no small print, so it is never decoded again; a picture no larger than its fine copy was
    verified at its own size; and the concentration on one pixel grid is near 1 for a re-saved copy, far above
    FINER_CONCENTRATION for a patch moved."""
    from benchcurate.curation.images.near_dedup import FINER_CONCENTRATION

    assert verify.small_print(fine(photo(), tmp_path, "photo")) < verify.SMALL_PRINT
    page = next(path for path, _ in dedup_set.sources(names=("document-01",)))
    with Image.open(page) as image:
        assert verify.small_print(fine(image.convert("RGB"), tmp_path, "page")) >= verify.SMALL_PRINT
    pixels = verify.finer(page, 10**9)
    assert pixels.size > 2 * fine(Image.open(page).convert("RGB"), tmp_path, "again").fine.size
    moved = pixels.copy()
    height, width = pixels.shape
    box = (height // 3, width // 3, height // 3 + height // 20, width // 3 + width // 8)
    moved[box[0] : box[2], box[1] : box[3]] = pixels[box[0] : box[2], box[1] + width // 8 : box[3] + width // 8]
    assert verify.same_grid_concentration(pixels, pixels) < 1
    assert verify.same_grid_concentration(pixels, moved) > FINER_CONCENTRATION


def test_a_copy_does_not_vouch_for_a_change_concentrated_in_one_region():
    """A screenshot with an object removed fails against a resized copy of its original by less than twice
    max_local_difference (against the original, on one grid, it fails by more), its change concentrated in one
    region; a brightened copy (whose tone curve hides the change) may not vouch for it. A strongly brightened copy
    failing by as much has its leftover spread over the picture (one a copy may vouch for)."""
    with shared_lock("dedup-set-v3"):
        entries = dedup_set.build(SHARED_DIR / "dedup-set-v3", names=("ui_screenshot-02",))
    chosen = [e for e in entries if e.edit in ("original", "brighter_10", "brighter_25", "object_removed", "resize_75")]
    items = dedup_set.keys(chosen)
    dropped, summary = dedup_set.group(items)
    kinds = {entry.edit: k for k, entry in enumerate(chosen)}
    kept = {index: copy.kept for index, copy in dropped.items()}
    group = {index for index in range(len(chosen)) if kept.get(index, index) == kept.get(0, 0)}
    assert kinds["object_removed"] not in group, (dropped, summary)
    assert {kinds["original"], kinds["brighter_10"], kinds["resize_75"]} <= group, (dropped, summary)
    pictures = dedup_set.pictures_of(items)

    def against(first: str, edit: str) -> verify.Verdict:
        return verify.compare(
            pictures(kinds[first]),
            pictures(kinds[edit]),
            "identity",
            CONFIG.max_local_difference,
            CONFIG.max_uncovered_share,
        )

    found = against("resize_75", "object_removed")
    assert CONFIG.max_local_difference < found.evidence["local_difference"] <= 2 * CONFIG.max_local_difference
    assert found.evidence["concentration"] > CONFIG.max_local_concentration, found
    assert against("original", "object_removed").evidence["local_difference"] > 2 * CONFIG.max_local_difference
    spread = against("original", "brighter_25")
    assert spread.same or spread.evidence["concentration"] <= CONFIG.max_local_concentration, spread


def test_plain_phash_merges_hard_negatives_that_the_verification_keeps_apart(labelled):
    entries, items, _, _ = labelled
    naive, _ = dedup_set.group(items, NearDedupConfig(verify=False, match_orientations=False, match_borders=False))
    assert sum(dedup_set.score(entries, items, naive, CONFIG.max_hamming_distance).negative_merges.values()) > 3


def members(*traits: survivor.Traits, framing=None, density=None, turns=None, areas=None) -> list[survivor.Member]:
    framing = framing or [(0.0, 0.0, 1.0, 1.0)] * len(traits)
    density = density or [1.0] * len(traits)
    turns = turns or ["identity"] * len(traits)
    areas = areas or [1.0] * len(traits)
    return [survivor.Member(k, found, density[k], framing[k], areas[k], turns[k]) for k, found in enumerate(traits)]


def test_the_keep_rule_ranks_what_a_copy_lost_before_marks_of_processing():
    original = survivor.Traits(40.0, 1_000_000, 0.0, True, 100, 500_000, -0.5)
    order = lambda index: index  # noqa: E731 - the provisional order: the smaller index
    none = lambda index: None  # noqa: E731 - no full-size pictures: ties fall to the order
    # colour beats greyscale, even a greyscale copy that comes first
    assert survivor.elect(members(original._replace(chroma=0.0), original), none, order) == (1, "colour")
    # more pixels per unit of the scene beat fewer (a resized copy); with nothing else, the order decides
    assert survivor.elect(members(original, original), none, order) == (0, "order")
    assert survivor.elect(members(original, original, density=[0.5, 1.0]), none, order) == (1, "pixels")
    # the framing most copies share beats a crop and a frame, each a copy of its own
    framings = [(0.05, 0.0, 1.0, 1.0), (-0.1, -0.1, 1.1, 1.1), (0.0, 0.0, 1.0, 1.0), (0.0, 0.0, 1.0, 1.0)]
    assert survivor.elect(members(*[original] * 4, framing=framings), none, order)[0] == 2
    # without a majority: the framing showing more content (not the crop), then less border (not the frame)
    alone = members(
        original, original._replace(frame_share=0.3), original, framing=framings[:3], areas=[0.95, 1.0, 1.0]
    )
    assert survivor.elect(alone, none, order) == (2, "framing")
    # the orientation most share beats a mirror image
    turns = ["flip_left_right", "identity", "identity"]
    assert survivor.elect(members(*[original] * 3, turns=turns), none, order)[0] == 1
    assert survivor.elect(members(*[original] * 2, turns=turns[:2]), none, order) == (0, "order")  # one each
    # lossless beats a JPEG, a better JPEG a worse one
    jpeg = original._replace(lossless=False, quality=90)
    assert survivor.elect(members(jpeg, original), none, order) == (1, "compression")
    assert survivor.elect(members(jpeg._replace(quality=60), jpeg), none, order) == (1, "compression")


def test_a_lossless_re_save_of_a_jpeg_ranks_as_that_jpeg(tmp_path):
    """A PNG made from a JPEG has its pixels: the JPEG is kept, not the larger re-save."""
    path = tmp_path / "original.jpg"
    photo().save(path, quality=90)
    with Image.open(path) as decoded:
        pixels = np.asarray(decoded.convert("RGB"))
    jpeg = survivor.Traits(40.0, pixels.shape[0] * pixels.shape[1], 0.0, False, 90, 40_000, -0.5)
    png = jpeg._replace(lossless=True, quality=100, size_bytes=200_000)
    found = survivor.elect(members(png, jpeg), lambda index: pixels, lambda index: index)
    assert found == (1, "compression (a lossless re-save of a JPEG)")
    other = np.asarray(photo())  # pixels of its own: the lossless file wins
    assert (
        survivor.elect(members(png, jpeg), lambda index: other if index == 0 else pixels, lambda index: index)[0] == 0
    )


@pytest.mark.parametrize("name", ["astronaut", "coffee"])
def test_the_original_has_the_fewest_marks_among_its_edited_copies(name):
    """Brightened, darkened, sharpened and blurred copies of one size: the one the others are predicted from best
    is the original."""
    original = photo(name)
    copies = [
        original,
        ImageEnhance.Brightness(original).enhance(1.1),
        ImageEnhance.Brightness(original).enhance(0.9),
        original.filter(ImageFilter.UnsharpMask(radius=1, percent=80, threshold=2)),
        original.filter(ImageFilter.GaussianBlur(1.0)),
    ]
    order = [2, 0, 4, 1, 3]  # the original not first
    pictures = [np.asarray(copies[k]) for k in order]
    assert survivor.fewest_marks(pictures) == [order.index(0)]
    assert survivor.fewest_marks(pictures[:2]) == [order.index(0)]  # against a darkened copy alone


def dithered_wallpaper(seed: int) -> Image.Image:
    """A smooth wallpaper: a colour gradient under translucent triangles, dithered by a little noise (the kind
    whose mildly sharpened copy the keep rule once kept: sharpening added levels and it predicted the others as
    well as the original did)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:480, 0:640].astype(np.float32)
    image = Image.fromarray(np.stack([60 + 0.1 * x, 90 + 0.15 * y, 200 - 0.05 * x], axis=2).astype(np.uint8))
    draw = ImageDraw.Draw(image, "RGBA")
    for _ in range(6):
        corners = [(int(rng.integers(-100, 740)), int(rng.integers(-100, 580))) for _ in range(3)]
        draw.polygon(corners, fill=(*(int(value) for value in rng.integers(0, 256, 3)), 40))
    pixels = np.asarray(image, dtype=np.float32) + rng.normal(0, 0.7, (480, 640, 3))
    return Image.fromarray(np.clip(np.rint(pixels), 0, 255).astype(np.uint8))


def toned_and_filtered(original: Image.Image) -> list[Image.Image]:
    """The original, then its brightened, darkened, sharpened and blurred copies of one size."""
    return [
        original,
        ImageEnhance.Brightness(original).enhance(1.1),
        ImageEnhance.Brightness(original).enhance(0.9),
        ImageEnhance.Brightness(original).enhance(1.25),
        original.filter(ImageFilter.UnsharpMask(radius=1, percent=80, threshold=2)),
        original.filter(ImageFilter.UnsharpMask(radius=2, percent=200, threshold=2)),
        original.filter(ImageFilter.GaussianBlur(0.8)),
        original.filter(ImageFilter.GaussianBlur(1.5)),
    ]


@pytest.mark.parametrize("seed", range(4))
def test_a_sharpened_copy_of_a_smooth_wallpaper_is_not_kept(seed):
    """Sharpening adds grey levels and a mildly sharpened copy predicts the others about as well as the original:
    the copies in the sharpness most of them share go first (on the 1,410 real files, three wallpapers kept their
    sharpened copy before)."""
    copies = toned_and_filtered(dithered_wallpaper(seed))
    order = [4, 5, 1, 6, 2, 7, 3, 0]  # the original last
    pictures = [np.asarray(copies[k]) for k in order]
    assert survivor.fewest_marks(pictures) == [order.index(0)]
    greys = [survivor._grey(np.asarray(copy)) for copy in copies]
    found = survivor.sharpness(greys)
    assert found[6] < found[0] < found[4] < found[5]  # blurred < original < sharpened (a strong blur: wild)
    assert abs(found[0] - found[1]) < survivor.SHARPNESS_TOLERANCE  # a tone change adds no sharpness


def test_the_edge_pixels_are_the_largest_bends_ties_taken_in_order():
    """`survivor._largest`: the same pixels as a stable sort would pick, on a page where most bends are equal."""
    assert sorted(survivor._largest(np.array([0, 3, 1, 3, 0, 2, 3, 0], dtype=np.float32), 4).tolist()) == [1, 3, 5, 6]
    assert survivor._largest(np.array([0, 3, 1, 3, 0, 2, 3, 0], dtype=np.float32), 2).tolist() == [1, 3]
    values = np.random.default_rng(0).integers(0, 4, 100_000).astype(np.float32)  # ties everywhere
    found = survivor._largest(values, 4_000)
    assert np.array_equal(np.sort(found), np.sort(np.argsort(-values, kind="stable")[:4_000]))


def faintly_coloured(name: str) -> Image.Image:
    """A greyscale picture whose R, G and B are each rounded to even levels from slightly different offsets: a
    colour of one or two levels, and fewer levels per channel than its greyscale copy has."""
    grey = np.asarray(photo(name).convert("L"), dtype=np.float32)
    rgb = np.stack([2 * np.round((grey + shift) / 2) for shift in (0.0, 0.7, 1.3)], axis=2)
    return Image.fromarray(np.clip(rgb, 0, 254).astype(np.uint8))


@pytest.mark.parametrize("name", ["astronaut", "text"])
def test_a_greyscale_copy_of_a_faintly_coloured_picture_is_not_kept(name):
    """Under the colour threshold both count as grey, and the greyscale copy used more levels per channel: a
    picture with R = G = B everywhere loses to a tied copy with any colour (a nebula of the real files kept its
    greyscale copy before)."""
    original = faintly_coloured(name)
    copies = [original.convert("L").convert("RGB"), ImageEnhance.Brightness(original).enhance(0.9), original]
    assert survivor.fewest_marks([np.asarray(copy) for copy in copies]) == [2]


def test_a_brightened_copy_skipping_levels_is_not_kept_over_an_original_that_skips_fewer():
    """A dark picture through a gamma curve already skips levels; brightened by 10% it skips more, uses as many,
    and is predicted as well: the levels it skips inside its range count against it."""
    pixels = np.asarray(photo("astronaut"), dtype=np.float32) / 255
    original = Image.fromarray(np.rint(90 * pixels**2.2).astype(np.uint8))
    copies = [ImageEnhance.Brightness(original).enhance(factor) for factor in (1.1, 0.9, 1.25)] + [original]
    assert survivor.fewest_marks([np.asarray(copy) for copy in copies]) == [3]


@pytest.mark.parametrize("name", ["chelsea", "text", "line_chart-01"])
def test_among_jpeg_copies_the_one_in_the_tone_most_copies_share_is_kept(name, tmp_path):
    """A JPEG original and its brightened, darkened, sharpened and blurred copies saved as JPEGs of one quality:
    re-encoding fills the levels a tone change skips, and a brighter copy spans more of them, so "most grey
    levels" alone kept a brightened or darkened copy. Most copies keep the original's tone: the ones whose mean
    grey is off from most others' by a common factor go first."""
    original = photo(name)
    copies = [
        original,
        ImageEnhance.Brightness(original).enhance(1.1),
        ImageEnhance.Brightness(original).enhance(0.9),
        ImageEnhance.Brightness(original).enhance(1.25),
        original.filter(ImageFilter.UnsharpMask(radius=1, percent=80, threshold=3)),
        original.filter(ImageFilter.GaussianBlur(0.8)),
    ]
    pictures = []
    for k, copy in enumerate(copies):
        copy.save(tmp_path / f"{k}.jpg", quality=90)
        with Image.open(tmp_path / f"{k}.jpg") as decoded:
            pictures.append(np.asarray(decoded.convert("RGB")))
    order = [3, 1, 0, 4, 2, 5]  # the original not first
    assert survivor.fewest_marks([pictures[k] for k in order]) == [order.index(0)]


def test_held_out_originals_are_one_per_family_and_never_copies_of_each_other(tmp_path):
    """bench/near_dup_quality.py --originals: a package's picture at several sizes is one original, a same picture
    under another family's name is left out (it would be a copy, not a second original), small ones are skipped,
    and the set built from them is shrunk to the held-out size with JPEGs as photos."""
    folder = tmp_path / "files"
    folder.mkdir()
    astronaut = photo("astronaut").convert("RGB")
    astronaut.resize((1300, 500)).save(folder / "pkg__scene_1.png")
    photo("text").convert("RGB").resize((600, 600)).save(folder / "pkg__scene_2.png")  # its family is taken
    astronaut.resize((600, 600)).save(folder / "pkg__zcopy.png")  # another family, the same picture
    photo("hubble_deep_field").convert("RGB").resize((700, 700)).save(folder / "pkg__sky.jpg", quality=90)
    astronaut.resize((300, 300)).save(folder / "zed__tiny.png")  # under the shortest side
    Image.new("RGBA", (600, 600), (0, 0, 0, 0)).save(folder / "zed__clear.png")  # transparent
    Image.new("RGB", (600, 600), (120, 130, 140)).save(folder / "zed__flat.png")  # nearly flat
    chosen = dedup_set.held_out(folder)
    assert [(path.name, kind) for path, kind in chosen] == [("pkg__scene_1.png", "artwork"), ("pkg__sky.jpg", "photo")]
    assert dedup_set.held_out(folder, count=1) == chosen[:1]  # a second set starts where the first ended
    assert dedup_set.held_out(folder, count=1, start=1) == chosen[1:]
    assert dedup_set.held_out(folder, start=2) == []
    entries = dedup_set.build(tmp_path / "set", chosen=chosen)
    originals = [entry for entry in entries if entry.kind == "original"]
    assert [entry.category for entry in originals] == ["artwork", "photo"]
    assert any(entry.kind == "camera_shift" for entry in entries if entry.original == "pkg__sky")
    assert not any(entry.kind == "camera_shift" for entry in entries if entry.original == "pkg__scene_1")
    with Image.open(originals[0].path) as opened:
        assert max(opened.size) <= dedup_set.HELD_OUT_SIDES[1]


def test_a_hard_negative_must_change_something_visible():
    picture = photo("astronaut").convert("RGB").resize((600, 600))
    spotted = picture.copy()
    spotted.paste((0, 0, 0), (100, 100, 130, 130))  # 0.25% of the pixels
    assert dedup_set.visibly_changed(picture, spotted)
    assert not dedup_set.visibly_changed(picture, picture.copy())
    faint = Image.fromarray(np.clip(np.asarray(picture, dtype=np.int16) + 10, 0, 255).astype(np.uint8))
    assert not dedup_set.visibly_changed(picture, faint)  # 10 levels everywhere: under VISIBLE_LEVELS


def test_a_frame_or_crop_placed_alone_does_not_outrank_the_original_by_a_misread_scale():
    """Seen on real wallpapers: a thick frame placed 3% too large pushed the original out under "more pixels",
    and a thin frame was kept. A copy whose framing no other copy shares sets the most pixels only when well
    above the others (a 2x original beside its resized crops still wins)."""
    original = survivor.Traits(40.0, 1_000_000, 0.0, True, 100, 500_000, -0.5)
    order = lambda index: index  # noqa: E731
    none = lambda index: None  # noqa: E731
    framed = original._replace(frame_share=0.18)
    jpeg = original._replace(lossless=False, quality=80)
    framings = [(-0.03, -0.03, 1.03, 1.04), (-0.006, -0.006, 1.006, 1.008), (0.0, 0.0, 1.0, 1.0), (0.0, 0.0, 1.0, 1.0)]
    group = members(framed, framed._replace(frame_share=0.05), original, jpeg, framing=framings)
    group = [m._replace(density=d) for m, d in zip(group, [1.031, 1.005, 1.0, 1.0], strict=True)]
    assert survivor.elect(group, none, order) == (2, "compression")
    crops = [(0.1, 0.1, 0.9, 0.9)] * 3
    larger = members(original, jpeg, jpeg, jpeg, framing=[(0.0, 0.0, 1.0, 1.0), *crops], density=[2.0, 0.5, 0.5, 0.5])
    assert survivor.elect(larger, none, order) == (0, "pixels")


def test_a_placement_through_a_copy_is_the_placement_found_directly(tmp_path):
    """A copy that failed against its group's centre and passed against another copy gets the centre's
    placement on it through that copy (so the keep rule weighs it): the map through the copy lands the crop's
    corners where placing the centre on it directly does, to about a pixel of the 256-pixel copies."""
    original = photo()
    width, height = original.size
    cut = round(width * 0.05)
    once = original.crop((cut, 0, width, height))
    twice = once.crop((0, cut, once.width, once.height))
    first, middle, last = (fine(image, tmp_path, name) for image, name in ((original, "a"), (once, "b"), (twice, "c")))
    limits = (CONFIG.max_local_difference, CONFIG.max_uncovered_share)
    to_middle = verify.compare(first, middle, "identity", *limits)
    middle_to_last = verify.compare(middle, last, "identity", *limits)
    direct = verify.compare(first, last, "identity", *limits)
    assert to_middle.same and middle_to_last.same and direct.same
    found = near_dedup.through_copy(to_middle, middle_to_last)
    assert found is not None and found.orientation == "identity"
    corners = (0.0, 0.0, *map(float, last.fine.shape[::-1]))
    assert found.placement.inverse().box(corners) == pytest.approx(direct.placement.inverse().box(corners), abs=1.5)
    assert found.placement.inverse().box(corners)[:2] == pytest.approx(
        (cut * first.fine.shape[1] / width, cut * first.fine.shape[0] / height), abs=1.5
    )
    # a copy turned on the item: its placement is not composed (the map would mix the axes)
    assert near_dedup.through_copy(to_middle, middle_to_last._replace(orientation="rotate_90")) is None
    assert near_dedup.through_copy(to_middle._replace(placement=None), middle_to_last) is None


def test_a_placement_is_refined_and_judged_once_from_where_another_started_or_ended(tmp_path, monkeypatch):
    """A pair of different pictures of different sizes tries every placement (whole, content, a crop placed
    inside either way); one that starts where another started or ended (the crop search finding the whole picture
    again) is not refined again, and one refined to where another ended is not judged again. Each verdict is the
    one found trying all. Two pictures of one size try whole on whole only."""
    original = photo()
    cut = round(original.width * 0.05)
    first = fine(original, tmp_path, "original")
    smaller = (round(original.width * 0.9), round(original.height * 0.9))
    others = {
        "crop": fine(original.crop((cut, 0, original.width, original.height)), tmp_path, "crop"),
        "patched": fine(patched_copy(original).resize(smaller, Image.Resampling.LANCZOS), tmp_path, "patched"),
        "framed and patched": fine(
            ImageOps.expand(patched_copy(original), border=cut // 2, fill=(255, 255, 255)), tmp_path, "framed"
        ),
    }
    limits = (CONFIG.max_local_difference, CONFIG.max_uncovered_share)
    refined, judged = [], []
    real_refine, real_local = verify._refine, verify.local_difference

    def refine(samples, box, second, placement, start):
        found = real_refine(samples, box, second, placement, start)
        refined.append((placement.box(box), found[0].box(box)))
        return found

    def local(*args, **kwargs):
        judged.append(refined[-1][1])
        return real_local(*args, **kwargs)

    monkeypatch.setattr(verify, "_refine", refine)
    monkeypatch.setattr(verify, "local_difference", local)
    every = {}
    for name, other in others.items():
        with monkeypatch.context() as each:
            each.setattr(verify, "REPEAT_PIXELS", 0.0)
            every[name] = verify.compare(first, other, "identity", *limits, early=False)
        tried_all = len(refined)
        refined.clear()
        judged.clear()
        found = verify.compare(first, other, "identity", *limits, early=False)
        assert found.same == every[name].same, name
        assert len(refined) < tried_all or name == "crop", (name, len(refined), tried_all)
        for k, (start, _) in enumerate(refined):
            for earlier_start, earlier_end in refined[:k]:
                for box in (earlier_start, earlier_end):
                    assert max(abs(a - b) for a, b in zip(start, box)) >= verify.REPEAT_PIXELS, (name, k)
        for k, end in enumerate(judged):
            assert all(max(abs(a - b) for a, b in zip(end, other)) >= verify.REPEAT_PIXELS for other in judged[:k])
        refined.clear()
        judged.clear()
    assert every["crop"].same and not every["patched"].same and not every["framed and patched"].same
    found = verify.compare(first, fine(patched_copy(original), tmp_path, "same size"), "identity", *limits, early=False)
    assert not found.same and len(refined) == 1 and refined[0][0] == (0.0, 0.0, *first.fine.shape[::-1]), refined


def test_a_copy_the_provisional_centre_cannot_place_is_tried_against_the_copy_kept(tmp_path):
    """The first of equal copies is a group's provisional centre; here a copy brightened until most of it clips.
    The original lines up with it, the sharpened copy does not, and no copy with less fine detail may vouch for
    a sharpened one. Once the vote keeps the original, the sharpened copy is verified against it and joins."""
    original = photo("grass")
    copies = {
        "brightened": ImageEnhance.Brightness(original).enhance(2.4),  # first: the provisional centre
        "original": original,
        "sharpened": original.filter(ImageFilter.UnsharpMask(radius=2, percent=200, threshold=2)),
    }
    entries = []
    for name, image in copies.items():
        image.save(tmp_path / f"{name}.png")
        entries.append(dedup_set.Entry(tmp_path / f"{name}.png", "grass", name, name, "photo"))
    pictures = [verify.picture(entry.path, 10**9) for entry in entries]
    limits = (CONFIG.max_local_difference, CONFIG.max_uncovered_share)
    assert verify.compare(pictures[0], pictures[1], "identity", *limits).same
    assert not verify.compare(pictures[0], pictures[2], "identity", *limits).same
    items = hashed_as(dedup_set.keys(entries), ["0" * 16] * 3)  # the clipped copy's pHash is far: no matter here
    dropped, summary = dedup_set.group(items)
    assert {index: found.kept for index, found in dropped.items()} == {0: 1, 2: 1}
    assert summary["verified_against_the_kept_copy"] == 1


def hashed_as(items: list, hashes: list[str]) -> list:
    """The items with these pHashes, and no turn, trimmed or centre hash near another's: the candidate pairs a
    test needs, whatever the pictures' own hashes."""
    far = tuple(f"{k:x}" * 16 for k in range(1, 8))
    return [item._replace(phash=value, turned=far, trimmed=None, centre=None) for item, value in zip(items, hashes)]


def paper(seed: int, grain: float, share: float) -> Image.Image:
    """A pale paper with dark fibres about `grain` pixels across on `share` of it, and no larger structure (a
    wallpaper of that kind was split from its framed copies on held-out real pictures)."""
    rng = np.random.default_rng(seed)
    field = np.asarray(
        Image.fromarray((rng.random((512, 512)) * 255).astype(np.uint8)).filter(ImageFilter.GaussianBlur(grain)),
        dtype=np.float32,
    )
    cut = np.quantile(field, 1 - share)
    grey = 235 + rng.normal(0, 4, field.shape) - np.where(field > cut, (field - cut) / (field.max() - cut) * 150, 0)
    return Image.fromarray(np.stack([grey * 0.97, grey, grey * 0.95], -1).clip(0, 255).astype(np.uint8))


@pytest.mark.parametrize(("seed", "grain", "share"), [(0, 2.0, 0.1), (0, 1.5, 0.15), (2, 2.5, 0.1)])
def test_a_fine_texture_framed_is_one_picture_with_it(tmp_path, seed, grain, share):
    """Resampled at another scale, a fine grain lines up less well (correlation 0.85-0.9 at the refinement's
    finer level) though nothing changed: the pair is judged, and its local difference is that of a copy."""
    original = paper(seed, grain, share)
    first, second = fine(original, tmp_path, "paper"), fine(ImageOps.expand(original, 5, "black"), tmp_path, "framed")
    found = verify.compare(first, second, "identity", CONFIG.max_local_difference, CONFIG.max_uncovered_share)
    assert found.same, found.evidence
    assert verify.MIN_CORRELATION <= found.evidence["correlation"] < verify.LINED_UP_CORRELATION
    assert found.evidence["local_difference"] < CONFIG.max_local_difference / 4


def test_a_change_seen_through_a_loose_placement_is_no_evidence():
    """A copy that failed against the centre with a clear local change gets no other try, unless the placement
    that showed the change lined the two up loosely (it may be misplaced: a brightened chart placed as a crop)."""
    placement = verify.Placement(1.0, 0.0, 1.0, 0.0)

    def failed(correlation: float) -> verify.Verdict:
        evidence = {"placed": "placed", "correlation": correlation, "local_difference": 0.3, "concentration": 50.0}
        return verify.Verdict(False, evidence, "identity", placement)

    assert near_dedup.changed(failed(0.95), CONFIG)
    assert not near_dedup.changed(failed(0.87), CONFIG)
    assert near_dedup.lined_up(failed(0.95)) and not near_dedup.lined_up(failed(0.87))
    assert near_dedup.lined_up(verify.Verdict(True, {"correlation": 0.87}, "identity", placement))
    # nor does it hide a change a placement lining the two up showed: that one is the pair's evidence
    lined, loose, passed = verify.rank(False, 0.95, 0.3), verify.rank(False, 0.87, 0.1), verify.rank(True, 0.86, 0.07)
    assert passed > lined > loose
    assert verify.rank(False, 0.95, 0.1) > lined


def test_sides_swapped_mean_a_quarter_turn_even_when_only_the_upright_hashes_matched(tmp_path):
    """A flat flag's pHash bits are noise: a copy turned a quarter may match it upright (through its trimmed or
    centre hash) and in no turn. Its sides are swapped, so upright it would have to be stretched by half: it is
    verified turned, and joins. Pictures of like shape keep the turns their hashes gave."""
    landscape = photo("astronaut").crop((0, 80, 512, 420))  # 512 x 340
    landscape.save(tmp_path / "original.png")
    landscape.transpose(Image.Transpose.ROTATE_90).save(tmp_path / "turned.png")
    entries = [
        dedup_set.Entry(tmp_path / f"{name}.png", "astronaut", name, name, "photo") for name in ("original", "turned")
    ]
    items = hashed_as(dedup_set.keys(entries), ["0" * 16] * 2)
    assert [pair.orientation for pair in near_dedup.candidates(items, CONFIG, set())[(0, 1)]] == ["identity"]
    dropped, _ = dedup_set.group(items)
    assert {index: found.kept for index, found in dropped.items()} == {1: 0}
    assert dropped[1].orientation in ("rotate_90", "rotate_270")
    assert near_dedup.fitting_turns((512, 340), (340, 512), ["identity", "flip_left_right"]) == [
        "rotate_90",
        "rotate_270",
    ]
    assert near_dedup.fitting_turns((512, 340), (340, 512), ["identity", "transpose"]) == ["transpose"]
    assert near_dedup.fitting_turns((512, 340), (500, 340), ["rotate_90", "identity"]) == ["identity"]
    assert near_dedup.fitting_turns((512, 500), (500, 512), ["rotate_90", "identity"]) == ["rotate_90", "identity"]


def test_a_copy_joining_through_the_copy_kept_brings_its_own_candidates(tmp_path):
    """As above, and a fourth copy (the sharpened one saved again as a JPEG) whose pHash is near only the
    sharpened copy's: it is a candidate of no copy in the group until the sharpened copy joins late. It joins
    then (verified through the sharpened copy), not left alone as a chain."""
    original = photo("grass")
    sharpened = original.filter(ImageFilter.UnsharpMask(radius=2, percent=200, threshold=2))
    copies = {
        "brightened": ImageEnhance.Brightness(original).enhance(2.4),  # first: the provisional centre
        "original": original,
        "sharpened": sharpened,
    }
    entries = []
    for name, image in copies.items():
        image.save(tmp_path / f"{name}.png")
        entries.append(dedup_set.Entry(tmp_path / f"{name}.png", "grass", name, name, "photo"))
    sharpened.save(tmp_path / "sharpened-jpeg.jpg", quality=92)
    entries.append(dedup_set.Entry(tmp_path / "sharpened-jpeg.jpg", "grass", "resaved", "resaved", "photo"))
    # the pHashes set so that the re-saved copy is a candidate of the sharpened one only (16 bits from the others)
    hashes = ["0000000000000000", "0000000000000000", "00000000000000ff", "000000000000ffff"]
    items = hashed_as(dedup_set.keys(entries), hashes)
    assert set(near_dedup.candidates(items, CONFIG, set())) == {(0, 1), (0, 2), (1, 2), (2, 3)}
    dropped, summary = dedup_set.group(items)
    assert {index: found.kept for index, found in dropped.items()} == {0: 1, 2: 1, 3: 1}
    assert summary["verified_against_the_kept_copy"] == 1
    assert dropped[3].evidence["verified_against"] == items[2].id
    assert summary["chains_not_followed"] == 0


def wallpaper(width: int, height: int) -> Image.Image:
    """A plain blue background (a faint checker a few grey levels deep, and noise) going on around a round cut of
    a photo on its right: a wallpaper of the kind whose framed copy was merged with a labelled and with a
    shifted copy on held-out real pictures."""
    rows, columns = np.mgrid[0:height, 0:width]
    checker = ((columns // 40 + rows // 40) % 2) * 4
    noise = np.random.default_rng(0).normal(0, 0.8, (height, width, 3))
    pixels = np.stack([30 + checker, 60 + checker, 150 + checker], axis=2) + noise
    scene = Image.fromarray(pixels.clip(0, 255).astype(np.uint8))
    side = height * 5 // 8
    mask = Image.new("L", (side, side), 0)
    ImageDraw.Draw(mask).ellipse((0, 0, side - 1, side - 1), fill=255)
    scene.paste(photo().resize((side, side)), (width * 11 // 20, height * 3 // 16), mask)
    return scene


def with_label(image: Image.Image, box: tuple[int, int, int, int]) -> Image.Image:
    """A copy with a white label of black text over `box` (`dedup_set`'s changed label, placed)."""
    out = image.copy()
    draw = ImageDraw.Draw(out)
    draw.rectangle(box, fill=(255, 255, 255))
    draw.text((box[0] + 2, box[1]), "Total 57.6", fill=(0, 0, 0), font=ImageFont.load_default(size=box[3] - box[1] - 2))
    return out


def test_a_framed_copy_hides_no_label_and_no_camera_shift_on_a_plain_background(tmp_path):
    """A framed copy's content box is its shape alone (the plain background is trimmed with the frame), so the
    part compared and the containment were read from it: a label on the background went unseen, and a shifted
    view fitted inside the frame. Now the frame box leaves out the frame only, the background is compared where
    the other picture shows something on it, and a strip on the other's frame that is no margin of its own
    counts as uncovered. Copies still line up: the original, a crop, and a frame of another colour."""
    scene = wallpaper(1200, 750)
    original = scene.crop((100, 62, 1100, 687))
    framed = fine(ImageOps.expand(original, border=62, fill=(255, 255, 255)), tmp_path, "framed")
    height, width = framed.fine.shape
    border = 62 * width / 1124
    assert framed.frame == pytest.approx((border, border, width - border, height - border), abs=1.5)
    assert framed.content[0] > width / 2  # the background is trimmed with the frame, as placements want it
    limits = (CONFIG.max_local_difference, CONFIG.max_uncovered_share)
    copies = {
        "original": original,
        "crop": original.crop((50, 0, 1000, 625)),
        "black frame": ImageOps.expand(original, border=30, fill=(0, 0, 0)),
    }
    for name, image in copies.items():
        found = verify.compare(framed, fine(image, tmp_path, name), "identity", *limits)
        assert found.same, (name, found)
    label = verify.compare(
        framed, fine(with_label(original, (80, 100, 410, 134)), tmp_path, "label"), "identity", *limits
    )
    assert not label.same and label.evidence["local_difference"] > 2 * CONFIG.max_local_difference, label
    shifted = verify.compare(framed, fine(scene.crop((40, 10, 1040, 635)), tmp_path, "shifted"), "identity", *limits)
    assert not shifted.same and shifted.evidence["uncovered"] > 3 * CONFIG.max_uncovered_share, shifted


def test_a_margin_on_the_others_frame_is_a_margin_not_a_strip_of_picture(tmp_path):
    """A white frame around a diagram on white merges with its page, except along the side where a grey band
    of the diagram runs next to it: only that side reads as a frame. A black-framed copy placed on it lies,
    there, on that 'frame', but what it shows there is its own white page, ending at the grey band: a margin,
    not a strip of picture, so neither shows anything the other does not."""
    original = photo("tree_diagram-01")
    white = fine(ImageOps.expand(original, border=round(min(original.size) * 0.1), fill="white"), tmp_path, "white")
    black = fine(ImageOps.expand(original, border=round(min(original.size) * 0.06), fill="black"), tmp_path, "black")
    height, width = white.fine.shape
    cut = [side for side, (at, whole) in enumerate(zip(white.frame, (0, 0, width, height))) if at != whole]
    assert cut == [3], white.frame  # the bottom only
    for first, second in ((white, black), (black, white)):
        found = verify.compare(first, second, "identity", CONFIG.max_local_difference, CONFIG.max_uncovered_share)
        assert found.same and found.evidence["uncovered"] <= CONFIG.max_uncovered_share / 2, found


def photo_under_sky(width: int, sky: int, below: int, levels: tuple[int, int]) -> Image.Image:
    """The photo `below` rows high under `sky` rows of a plain grey gradient from `levels[0]` to `levels[1]`."""
    scene = Image.new("RGB", (width, sky + below))
    gradient = np.repeat(np.linspace(*levels, sky), width * 3).reshape(sky, width, 3).astype(np.uint8)
    scene.paste(Image.fromarray(gradient))
    scene.paste(photo().resize((width, below)), (0, sky))
    return scene


def test_a_label_on_a_plain_sky_is_not_excused_as_small_print_on_one_grid(tmp_path):
    """What resampling changes is allowed for where small print aliases differently at another scale. Two
    copies of one size on one grid alias alike, so there only detail both show may differ (a sharpened receipt
    is one picture with its original); a label's text on a plain sky, which only one shows, is a change."""
    sky = photo_under_sky(800, 300, 500, (150, 205))
    first = fine(sky, tmp_path, "sky")
    second = fine(with_label(sky, (150, 80, 480, 114)), tmp_path, "label")
    limits = (CONFIG.max_local_difference, CONFIG.max_uncovered_share)
    for found in (
        verify.compare(first, second, "identity", *limits),
        verify.compare(second, first, "identity", *limits),
    ):
        assert not found.same and found.evidence["local_difference"] > 2 * CONFIG.max_local_difference, found
    receipt = photo("receipt-01")
    sharpened = receipt.filter(ImageFilter.UnsharpMask(radius=2, percent=200, threshold=2))
    found = verify.compare(
        fine(receipt, tmp_path, "receipt"), fine(sharpened, tmp_path, "sharpened"), "identity", *limits
    )
    assert found.same, found


def test_a_jpeg_and_its_lossless_re_save_judge_a_third_copy_alike(tmp_path):
    """A JPEG is read at half size by its decoder (1152 x 860 at 576 x 430), a PNG of the same pixels box-reduced
    by three (384 x 286: the remainder rounds away). Their fine copies were 296 and 297 pixels wide, so a copy
    with a label was judged against the PNG as resampled: text that aliases is excused there, and on real
    pictures a label the JPEG original showed as a change (0.155) passed against its PNG re-save (0.073), which
    then vouched for it. The shape now comes from the full size: the two lie on one grid and see one change."""
    scene = photo_under_sky(1152, 360, 500, (140, 210))
    scene.save(tmp_path / "original.jpg", quality=92)
    with Image.open(tmp_path / "original.jpg") as decoded:
        pixels = decoded.convert("RGB")
    pixels.save(tmp_path / "re-save.png")
    original, png = verify.picture(tmp_path / "original.jpg", 10**9), verify.picture(tmp_path / "re-save.png", 10**9)
    assert original.fine.shape == png.fine.shape == (221, 296)
    # a hashes file written before holds the PNG's copy 297 wide: read back, it is on the JPEG's grid too
    wider = Image.fromarray(png.fine).resize((297, 221), Image.Resampling.BOX)
    stored = png._replace(fine=np.asarray(wider), content=(0.0, 0.0, 297.0, 221.0), frame=(0.0, 0.0, 297.0, 221.0))
    read = verify.unpack(without(verify.pack(stored), "version"))  # written before the layout had a version
    assert read.fine.shape == (221, 296) and read.content == read.frame == (0.0, 0.0, 296.0, 221.0)
    limits = (CONFIG.max_local_difference, CONFIG.max_uncovered_share)
    copy = verify.compare(original, png, "identity", *limits)
    assert copy.same and copy.evidence["local_difference"] < 0.03, copy  # a draft decode against a full one
    for box in ((300, 120, 400, 134), (300, 120, 420, 136), (300, 60, 480, 80)):  # small print on the sky
        with_label(pixels, box).save(tmp_path / "label.jpg", quality=92)
        label = verify.picture(tmp_path / "label.jpg", 10**9)
        found = [verify.compare(first, label, "identity", *limits) for first in (original, png, read)]
        assert not any(verdict.same for verdict in found), found
        seen = [verdict.evidence["local_difference"] for verdict in found]
        assert max(seen) - min(seen) < 0.01, (box, seen)


def test_a_picture_in_a_newer_layout_is_made_again_from_its_file(tmp_path):
    """A side file written by a newer version holds pictures in a layout this one does not know: read as if they
    were of a known one, a changed shape or box would be misread without a word. They are refused by their
    version, and the loader makes the picture again from its file; one of this version is read as stored."""
    photo().save(tmp_path / "photo.png")
    ImageOps.mirror(photo()).resize((300, 200)).save(tmp_path / "other.png")
    made, other = (verify.picture(tmp_path / name, 10**9) for name in ("photo.png", "other.png"))
    current = verify.pack(other)  # stored for photo.png: which picture the loader returns says where it came from
    newer = without(current, version=verify.PICTURE_VERSION + 1)
    with pytest.raises(verify.UnknownPicture):
        verify.unpack(newer)
    items = dedup_set.keys([dedup_set.Entry(tmp_path / "photo.png", "photo", "original", "original", "photo")])
    for stored, expected in ((current, other), (newer, made)):
        loaded = near_dedup.picture_loader(items, None, stored=[stored].__getitem__)(0)
        assert np.array_equal(loaded.fine, expected.fine) and loaded[1:] == expected[1:]


def test_pictures_stored_before_frames_were_kept_get_their_frame_box(tmp_path):
    """A hashes file's side file or a run cache written by an earlier version has no frame box: it is worked out
    from the stored copy, the same as a fresh decode gives."""
    image = ImageOps.expand(photo(), border=40, fill=(255, 255, 255))
    image.save(tmp_path / "framed.png")
    made = verify.picture(tmp_path / "framed.png", 10**9)
    raw = verify.pack(made)
    stored = verify.unpack(without(raw, "frame", "version"))
    assert stored.frame == made.frame != (0.0, 0.0, *map(float, made.fine.shape[::-1]))
    assert np.array_equal(stored.fine, made.fine) and stored[1:4] == made[1:4]
    assert verify.unpack(raw).frame == made.frame  # written with it: read, not worked out


def test_a_wide_difference_beside_the_part_both_show_hides_no_change_there(tmp_path):
    """A nebula with a dark centre on a black sky, and one without on a field of stars (two nebulae of a star
    atlas were merged so). The sky is trimmed from the first's content box and the stars are content, so the
    part compared is widened over them; but stars against black differ everywhere, and a difference spread that
    wide hides the one region standing out. The part both show is judged on its own first."""
    rng = np.random.default_rng(0)
    stars = np.zeros((256, 256), np.uint8)
    stars[rng.integers(0, 256, 6000), rng.integers(0, 256, 6000)] = 255
    stars = np.asarray(Image.fromarray(stars).filter(ImageFilter.GaussianBlur(0.6)), dtype=np.float64) * 3
    rows, columns = np.mgrid[0:256, 0:256]
    radius = np.hypot(columns - 128, rows - 128)
    glow = 230 * np.exp(-((radius / 50) ** 2))
    hollow = glow * (1 - 0.3 * np.exp(-((radius / 12) ** 2)))
    first, second = (
        fine(Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).convert("RGB"), tmp_path, name)
        for name, pixels in (("hollow", hollow), ("glow", glow + stars))
    )
    assert first.content[0] > 40 and second.content == (0.0, 0.0, 256.0, 256.0)
    found = verify.compare(first, second, "identity", CONFIG.max_local_difference, CONFIG.max_uncovered_share)
    assert not found.same and found.evidence["local_difference"] > CONFIG.max_local_difference, found


def test_a_faintly_coloured_picture_is_not_beaten_on_colour_by_its_brightened_copy():
    """Brightening lifts a faint colour over COLOUR_CHROMA (a real star chart: 3 grey levels in the original, 4 in
    its brightened copies): copies showing half the most colourful one's colour are in colour, and the marks
    choose among them; a greyscale copy is still out."""
    original = np.asarray(faintly_coloured("coffee"))
    brighter = np.asarray(ImageEnhance.Brightness(Image.fromarray(original)).enhance(1.1))
    grey = np.asarray(Image.fromarray(original).convert("L").convert("RGB"))
    faint = survivor.Traits(3.0, original.shape[0] * original.shape[1], 0.0, True, 100, 500_000, -0.5)
    pictures = [brighter, grey, original]
    group = members(faint._replace(chroma=4.0), faint._replace(chroma=0.0), faint)
    assert survivor.elect(group, pictures.__getitem__, lambda index: index) == (2, "marks")
    assert survivor.elect(group[:2], pictures.__getitem__, lambda index: index) == (0, "colour")  # vivid enough


def test_a_crop_misplaced_on_the_whole_picture_leaves_the_marks_to_the_copies_of_one_size():
    """A 2% crop of a galaxy on a black sky was placed as the whole picture: tied on everything before the marks,
    it made the group's sizes differ, and the provisional order kept a sharpened copy. The marks now compare the
    copies of the size most of them have."""
    original = photo("coffee")
    copies = [
        original.filter(ImageFilter.UnsharpMask(radius=2, percent=200, threshold=2)),
        original,
        ImageEnhance.Brightness(original).enhance(1.1),
        original.crop((0, 0, original.width - 12, original.height)),
    ]
    pictures = [np.asarray(copy) for copy in copies]
    same = survivor.Traits(40.0, original.width * original.height, 0.0, True, 100, 500_000, -0.5)
    order = lambda index: index  # noqa: E731 - the sharpened copy first
    assert survivor.elect(members(*[same] * 4), pictures.__getitem__, order) == (1, "marks")
    # one copy of each size: the larger one
    assert survivor.elect(members(same, same), [pictures[3], pictures[1]].__getitem__, order) == (1, "size")
    # a quarter-turned copy has the original's size once turned back: no size decides between the two
    turned = [pictures[1], np.ascontiguousarray(pictures[1].transpose(1, 0, 2))]
    assert survivor.elect(members(same, same, turns=["identity", "rotate_90"]), turned.__getitem__, order) == (
        0,
        "order",
    )


def test_a_copy_with_the_originals_pixels_ties_with_it_on_the_marks():
    """A greyscale JPEG saved again as greyscale differs from it by one level here and there: the marks cannot
    tell which came first, so the order decides between the two, whichever comes first."""
    original = np.asarray(photo("coffee"))
    rng = np.random.default_rng(0)
    resaved = np.clip(original.astype(np.int16) + (rng.random(original.shape[:2]) < 0.01)[..., None], 0, 255)
    others = [
        np.asarray(ImageEnhance.Brightness(Image.fromarray(original)).enhance(0.9)),
        np.asarray(Image.fromarray(original).filter(ImageFilter.GaussianBlur(1.0))),
    ]
    same = survivor.Traits(40.0, original.shape[0] * original.shape[1], 0.0, True, 100, 500_000, -0.5)
    for first, second in ((original, resaved.astype(np.uint8)), (resaved.astype(np.uint8), original)):
        pictures = [first, second, *others]
        assert survivor.elect(members(*[same] * 4), pictures.__getitem__, lambda index: index) == (0, "order")
    assert survivor.elect(members(*[same] * 3), [original, *others].__getitem__, lambda index: index) == (0, "marks")

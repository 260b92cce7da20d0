"""Near-duplicate quality of pHash on a labelled set built from the demo images.

Every demo image (15 photos, 41 renders) is an original; each gets 18 edited copies (re-encodes, resizes, crops,
brightness/contrast, a text overlay, grayscale, format changes, a transparent border and its flattened copy).
Positive pair: two files derived from the same original. Negative: any other pair; renders of the same kind
(two bar charts, two documents, ...) and photo-photo pairs are reported apart as hard negatives.

Hashes: (a) naive `imagehash.phash(Image.open(p))`, (b) ours with full decode, (c) ours with JPEG draft decode.
For thresholds 0..16: pairwise precision, recall, F1, false-positive rate; a recommended default threshold;
per-edit recall; agreement between draft and full decode.

    cd /work/main && .venv/bin/python bench/near_dup_quality.py [--quick] [--keep]
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from pathlib import Path

import common  # first: it sets HOME etc. to a temp dir before anything else is imported
import imagehash
import numpy as np
from PIL import Image, ImageDraw, ImageEnhance, ImageFont

from benchcurate.curation.images.decode import decode_image
from benchcurate.curation.images.phash import PhashConfig, fingerprint

THRESHOLDS = range(0, 17)
METHODS = {"a_naive": "(a) naive imagehash.phash(Image.open(p))",
           "b_full": "(b) ours, full decode (draft_side_px=None)",
           "c_draft": "(c) ours, JPEG draft decode (draft_side_px=256)"}
MIN_PRECISION = 0.99
SCALE_N = 1_000_000            # the scale check: chance matches among this many uniformly random hashes ...
MAX_CHANCE_PAIRS = 1_000       # ... must stay at or under this many pairs (1 per 1,000 images)
JPEG_QUALITY_SAME_FORMAT = 90  # when an edit keeps a JPEG original's format
TRANSPARENT_BORDER = 0.05       # of each side, added around the image
TEXT = "SAMPLE  (c) 2024 example.com"


# ------------------------------------------------------------------------------------------- the labelled set

def _save(image: Image.Image, path: Path, fmt: str, **options) -> Path:
    if fmt == "JPEG" and image.mode not in ("RGB", "L"):
        image = image.convert("RGB")
    image.save(path, fmt, **options)
    return path


def _same_format(image: Image.Image, folder: Path, name: str, original_format: str) -> Path:
    if original_format == "JPEG":
        return _save(image, folder / f"{name}.jpg", "JPEG", quality=JPEG_QUALITY_SAME_FORMAT)
    return _save(image, folder / f"{name}.png", "PNG")


def _overlay(base: Image.Image) -> Image.Image:
    out = base.copy()
    draw = ImageDraw.Draw(out)
    font = ImageFont.load_default(size=max(10, base.height // 14))
    margin = max(4, base.height // 40)
    draw.text((margin, base.height - margin), TEXT, font=font, fill=(255, 255, 255), anchor="ld",
              stroke_width=max(1, base.height // 250), stroke_fill=(0, 0, 0))
    return out


def _crop(base: Image.Image, fraction: float, centred: bool) -> Image.Image:
    w, h = base.size
    dw, dh = round(w * fraction), round(h * fraction)
    if centred:
        return base.crop((dw // 2, dh // 2, w - (dw - dw // 2), h - (dh - dh // 2)))
    return base.crop((0, 0, w - dw, h - dh))


def _bordered(base: Image.Image) -> tuple[Image.Image, Image.Image]:
    """An RGBA copy with a transparent (0, 0, 0, 0) border around the image, and that copy flattened on white."""
    w, h = base.size
    bw, bh = max(1, round(w * TRANSPARENT_BORDER)), max(1, round(h * TRANSPARENT_BORDER))
    rgba = Image.new("RGBA", (w + 2 * bw, h + 2 * bh), (0, 0, 0, 0))
    rgba.paste(base.convert("RGBA"), (bw, bh))
    flat = Image.new("RGB", rgba.size, (255, 255, 255))
    flat.paste(rgba, mask=rgba.getchannel("A"))
    return rgba, flat


def make_variants(original: Path, folder: Path) -> dict[str, Path]:
    """The original (copied as is) and its edited copies, by edit name."""
    folder.mkdir(parents=True, exist_ok=True)
    decoded = decode_image(original)  # upright RGB, alpha on white: the base of every edit
    base, fmt = decoded.image, decoded.format
    out = {"original": folder / f"original{original.suffix.lower()}"}
    shutil.copyfile(original, out["original"])
    for quality in (95, 75, 50, 30):
        out[f"jpeg_q{quality}"] = _save(base, folder / f"jpeg_q{quality}.jpg", "JPEG", quality=quality)
    for percent in (50, 25, 200):
        size = (max(1, round(base.width * percent / 100)), max(1, round(base.height * percent / 100)))
        out[f"resize_{percent}"] = _same_format(base.resize(size, Image.Resampling.LANCZOS), folder,
                                                f"resize_{percent}", fmt)
    out["crop_5pct_centre"] = _same_format(_crop(base, 0.05, True), folder, "crop_5pct_centre", fmt)
    out["crop_5pct_corner"] = _same_format(_crop(base, 0.05, False), folder, "crop_5pct_corner", fmt)
    out["brightness_+20pct"] = _same_format(ImageEnhance.Brightness(base).enhance(1.2), folder, "bright_up", fmt)
    out["brightness_-20pct"] = _same_format(ImageEnhance.Brightness(base).enhance(0.8), folder, "bright_down", fmt)
    out["contrast_+30pct"] = _same_format(ImageEnhance.Contrast(base).enhance(1.3), folder, "contrast_up", fmt)
    out["contrast_-30pct"] = _same_format(ImageEnhance.Contrast(base).enhance(0.7), folder, "contrast_down", fmt)
    out["text_overlay"] = _same_format(_overlay(base), folder, "text_overlay", fmt)
    out["grayscale"] = _same_format(base.convert("L"), folder, "grayscale", fmt)
    if fmt == "JPEG":
        out["format_swap"] = _save(base, folder / "format_swap.png", "PNG")
    else:
        out["format_swap"] = _save(base, folder / "format_swap.jpg", "JPEG", quality=JPEG_QUALITY_SAME_FORMAT)
    out["webp"] = _save(base, folder / "webp.webp", "WEBP", quality=80)
    rgba, flat = _bordered(base)
    out["border_rgba_transparent"] = _save(rgba, folder / "border_rgba.png", "PNG")
    out["border_flattened"] = _save(flat, folder / "border_flat.png", "PNG")
    return out


def build_set(work: Path, quick: bool) -> list[dict]:
    """Rows {path, group, kind, edit, format} of the labelled set."""
    originals = common.demo_originals()
    if quick:  # a few photos and two renders of each of a few kinds (keeps hard negatives)
        keep_kinds = {"bar_chart", "document", "ui_screenshot"}
        originals = [o for o in originals if o[1] == "photo"][:4] + \
            [o for o in originals if o[1] in keep_kinds and o[0].stem.endswith(("-01", "-02"))]
    rows = []
    for group, (path, kind) in enumerate(originals):
        for edit, file in make_variants(path, work / "set" / f"{group:03d}-{kind}-{path.stem}").items():
            rows.append({"path": file, "group": group, "kind": kind, "edit": edit, "original": path.name,
                         "format": Image.open(file).format})
    return rows


# ------------------------------------------------------------------------------------------------ hashing

def hash_all(rows: list[dict]) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    full, draft = PhashConfig(draft_side_px=None), PhashConfig(draft_side_px=256)
    hashes = {name: [] for name in METHODS}
    seconds = {name: 0.0 for name in METHODS}
    for row in rows:
        path = row["path"]
        start = time.perf_counter()
        hashes["a_naive"].append(int(str(imagehash.phash(Image.open(path))), 16))
        seconds["a_naive"] += time.perf_counter() - start
        for name, cfg in (("b_full", full), ("c_draft", draft)):
            start = time.perf_counter()
            found = fingerprint(path, cfg)
            seconds[name] += time.perf_counter() - start
            if "error" in found:
                raise RuntimeError(f"{path}: {found['error']}")
            hashes[name].append(int(found["phash"], 16))
    return {name: np.array(values, dtype=np.uint64) for name, values in hashes.items()}, seconds


def draft_scaled(path: Path) -> bool:
    """True when the draft decode (>= 256 px per side) of this JPEG is smaller than the full image."""
    with Image.open(path) as image:
        if image.format != "JPEG":
            return False
        size = image.size
        image.draft("RGB", (256, 256))
        return image.size != size


# ------------------------------------------------------------------------------------------------ scoring

def distance_matrix(hashes: np.ndarray) -> np.ndarray:
    return np.bitwise_count(hashes[:, None] ^ hashes[None, :]).astype(np.int16)


def pr_curve(distance: np.ndarray, positive: np.ndarray) -> list[dict]:
    """Pairwise precision/recall/F1/FPR for each threshold, over the upper triangle."""
    iu = np.triu_indices(len(distance), k=1)
    d, pos = distance[iu], positive[iu]
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    out = []
    for t in THRESHOLDS:
        predicted = d <= t
        tp = int((predicted & pos).sum())
        fp = int((predicted & ~pos).sum())
        fn = n_pos - tp
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / n_pos if n_pos else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        out.append({"threshold": t, "tp": tp, "fp": fp, "fn": fn, "precision": precision, "recall": recall,
                    "f1": f1, "false_positive_rate": fp / n_neg if n_neg else 0.0})
    return out


def uniform_within(threshold: int) -> float:
    """P(two independent random pHashes differ in <= threshold bits).

    A pHash sets the bits above the median of 64 DCT values: 32 ones when no value ties the median. Two random
    such hashes differ in 2k bits with probability C(32, k)**2 / C(64, 32) (so distances are even), which makes
    near matches ~2.5x likelier than between uniformly random 64-bit words."""
    return sum(math.comb(32, k) ** 2 for k in range(threshold // 2 + 1)) / math.comb(64, 32)


def chance_pairs(n: int, threshold: int) -> float:
    return n * (n - 1) / 2 * uniform_within(threshold)


def recommend(curve: list[dict]) -> dict:
    """Highest recall with precision >= MIN_PRECISION (ties: the larger F1, then the smaller threshold)."""
    best_f1 = max(curve, key=lambda r: (r["f1"], -r["threshold"]))
    eligible = [r for r in curve if r["precision"] >= MIN_PRECISION]
    if eligible:
        chosen = max(eligible, key=lambda r: (r["recall"], r["f1"], -r["threshold"]))
        rule = f"highest recall with precision >= {MIN_PRECISION}"
    else:
        chosen, rule = best_f1, f"best F1 (no threshold reaches precision {MIN_PRECISION})"
    cap = max(t for t in THRESHOLDS if chance_pairs(SCALE_N, t) <= MAX_CHANCE_PAIRS)
    while cap > 0 and uniform_within(cap - 1) == uniform_within(cap):  # odd T behaves as T - 1 (even distances)
        cap -= 1
    capped = curve[min(chosen["threshold"], cap)]
    return {"threshold": chosen["threshold"], "rule": rule, "at_threshold": chosen,
            "best_f1_threshold": best_f1["threshold"], "best_f1": best_f1["f1"],
            "scale_cap": cap, "scale_cap_rule": f"largest T with <= {MAX_CHANCE_PAIRS} expected chance pairs among "
                                                f"{SCALE_N:,} random balanced (32-ones) hashes",
            "capped_threshold": capped["threshold"], "at_capped_threshold": capped}


def main() -> None:
    parser = common.arguments(__doc__, "a few originals: photos, and renders of kinds that make hard negatives")
    parser.add_argument("--keep", action="store_true", help="keep the generated files (printed path)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-near-dup-"))
    started = time.perf_counter()
    try:
        rows = build_set(work, args.quick)
        built = time.perf_counter() - started
        hashes, hash_seconds = hash_all(rows)
        report(rows, hashes, hash_seconds, built, args.quick, work if args.keep else None)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def report(rows, hashes, hash_seconds, built_seconds, quick, kept_at) -> None:
    groups = np.array([r["group"] for r in rows])
    kinds = np.array([r["kind"] for r in rows])
    edits = [r["edit"] for r in rows]
    positive = groups[:, None] == groups[None, :]
    same_kind = (kinds[:, None] == kinds[None, :]) & ~positive
    iu = np.triu_indices(len(rows), k=1)
    distances = {name: distance_matrix(h) for name, h in hashes.items()}
    curves = {name: pr_curve(d, positive) for name, d in distances.items()}
    recs = {name: recommend(c) for name, c in curves.items()}
    chosen = recs["c_draft"]["capped_threshold"]  # the default is for what the pipeline computes: (c)

    # Hard negatives: renders of the same kind / photo-photo, at each threshold.
    hard = {}
    for name, d in distances.items():
        dn = d[iu][same_kind[iu]]
        hard[name] = {"pairs": int(len(dn)), "min_distance": int(dn.min()) if len(dn) else None,
                      "false_positives_by_threshold": {t: int((dn <= t).sum()) for t in THRESHOLDS},
                      "all_negatives_min_distance": int(d[iu][~positive[iu]].min())}
    closest = {}
    for name, d in distances.items():
        masked = np.where(positive, 99, d)
        i, j = np.unravel_index(np.argmin(masked), masked.shape)
        closest[name] = {"distance": int(masked[i, j]), "first": f"{rows[i]['original']}/{rows[i]['edit']}",
                         "second": f"{rows[j]['original']}/{rows[j]['edit']}"}

    # Per edit: distance from the original file of the same group.
    index_of_original = {r["group"]: k for k, r in enumerate(rows) if r["edit"] == "original"}
    edit_names = list(dict.fromkeys(e for e in edits if e != "original"))
    per_edit = {}
    for edit in edit_names:
        members = [k for k, e in enumerate(edits) if e == edit]
        per_edit[edit] = {}
        for name, d in distances.items():
            values = np.array([d[k, index_of_original[groups[k]]] for k in members])
            per_edit[edit][name] = {"median_distance": float(np.median(values)), "max_distance": int(values.max()),
                                    "recall_at_recommended": float((values <= chosen).mean()),
                                    "recall_at_8": float((values <= 8).mean()), "n": int(len(values))}

    # Real negatives vs uniformly random hashes: how much more often unrelated images fall within T.
    vs_uniform = {}
    for name, d in distances.items():
        dn = d[iu][~positive[iu]]
        vs_uniform[name] = [{"threshold": t, "negatives_within": int((dn <= t).sum()),
                             "uniform_expected": len(dn) * uniform_within(t),
                             "chance_pairs_1M_random": chance_pairs(SCALE_N, t)} for t in range(0, 25)]

    # Pairs of interest inside a group (not only against the original).
    def pair_stats(first: str, second: str) -> dict:
        where = {(r["group"], r["edit"]): k for k, r in enumerate(rows)}
        out = {}
        for name, d in distances.items():
            values = np.array([d[where[(g, first)], where[(g, second)]] for g in sorted(set(groups.tolist()))])
            out[name] = {"median": float(np.median(values)), "max": int(values.max()),
                         "identical": float((values == 0).mean()), "within_recommended": float((values <= chosen).mean())}
        return out

    pairs_of_interest = {f"{a} vs {b}": pair_stats(a, b) for a, b in (
        ("border_rgba_transparent", "border_flattened"), ("original", "format_swap"), ("original", "webp"),
        ("original", "grayscale"), ("resize_25", "resize_200"), ("jpeg_q30", "resize_25"))}

    # Draft vs full decode, per file.
    diff = np.bitwise_count(hashes["b_full"] ^ hashes["c_draft"]).astype(int)
    is_jpeg = np.array([r["format"] == "JPEG" for r in rows])
    scaled = np.array([draft_scaled(r["path"]) for r in rows])
    draft_vs_full = {
        "files": len(rows), "jpeg_files": int(is_jpeg.sum()), "jpeg_files_decoded_smaller": int(scaled.sum()),
        "identical_all_files": float((diff == 0).mean()),
        "identical_jpeg_files": float((diff[is_jpeg] == 0).mean()) if is_jpeg.any() else None,
        "identical_when_decoded_smaller": float((diff[scaled] == 0).mean()) if scaled.any() else None,
        "distance_histogram_decoded_smaller": {int(k): int(v) for k, v in
                                               zip(*np.unique(diff[scaled], return_counts=True))},
        "distance_histogram_all_jpeg": {int(k): int(v) for k, v in zip(*np.unique(diff[is_jpeg], return_counts=True))},
        "max_distance": int(diff.max()),
        "mean_distance_when_decoded_smaller": float(diff[scaled].mean()) if scaled.any() else None,
    }
    balance = {name: {"share_popcount_32": float((np.bitwise_count(h) == 32).mean()),
                      "share_odd_distances": float((distances[name][iu] % 2 == 1).mean())}
               for name, h in hashes.items()}
    naive_vs_full = np.bitwise_count(hashes["a_naive"] ^ hashes["b_full"]).astype(int)
    naive_differs = sorted({(rows[k]["edit"], rows[k]["format"]) for k in np.flatnonzero(naive_vs_full > 0)})

    n_pos = int(positive[iu].sum())
    data = {
        "benchmark": "near_dup_quality", "quick": quick, "machine": common.machine(),
        "set": {"files": len(rows), "originals": int(groups.max() + 1), "edits_per_original": len(edit_names),
                "edits": edit_names, "positive_pairs": n_pos, "negative_pairs": int(len(iu[0]) - n_pos),
                "hard_negative_pairs_same_kind": int(same_kind[iu].sum()),
                "formats": {f: int(sum(r["format"] == f for r in rows)) for f in sorted({r["format"] for r in rows})},
                "build_seconds": built_seconds, "kept_at": kept_at},
        "methods": METHODS, "hash_seconds": hash_seconds,
        "curves": curves, "recommendation": recs, "recommended_default_threshold": chosen,
        "hard_negatives": hard, "closest_negative_pair": closest, "per_edit": per_edit,
        "pairs_of_interest": pairs_of_interest, "hash_balance": balance, "negatives_vs_uniform": vs_uniform,
        "draft_vs_full": draft_vs_full,
        "naive_vs_full": {"identical": float((naive_vs_full == 0).mean()),
                          "edits_and_formats_where_they_differ": naive_differs},
    }

    # ---- tables
    lo, hi = max(0, chosen - 4), min(16, chosen + 4)
    head = ["T"] + [f"{m[0]} {k}" for m in ("a", "b", "c") for k in ("P", "R", "F1")]
    body = []
    for t in THRESHOLDS:
        body.append([t] + [curves[name][t][k] for name in METHODS for k in ("precision", "recall", "f1")])
    text_all, md_all = common.table(head, body)
    text_near, _ = common.table(head, body[lo:hi + 1])
    edit_head = ["edit", "a med", "b med", "c med", f"a R@{chosen}", f"b R@{chosen}", f"c R@{chosen}"]
    edit_rows = [[e] + [per_edit[e][n]["median_distance"] for n in METHODS]
                 + [per_edit[e][n]["recall_at_recommended"] for n in METHODS] for e in edit_names]
    text_edit, md_edit = common.table(edit_head, edit_rows)
    shown = [t for t in (chosen - 2, chosen, chosen + 2, chosen + 4) if t in THRESHOLDS]
    hard_head = ["method", "hard-neg pairs", "min dist"] + [f"FP@{t}" for t in shown] + ["closest negative pair (any)"]
    hard_rows = [[n, hard[n]["pairs"], hard[n]["min_distance"]]
                 + [hard[n]["false_positives_by_threshold"][t] for t in shown]
                 + [f"{closest[n]['first']} ~ {closest[n]['second']} ({closest[n]['distance']})"] for n in METHODS]
    text_hard, md_hard = common.table(hard_head, hard_rows)
    rec_lines = [f"- {METHODS[n]}: in-set choice T={r['threshold']} ({r['rule']}: "
                 f"P={r['at_threshold']['precision']:.4f}, R={r['at_threshold']['recall']:.4f}, "
                 f"F1={r['at_threshold']['f1']:.4f}); best F1 {r['best_f1']:.4f} at T={r['best_f1_threshold']}; "
                 f"capped at T={r['scale_cap']} ({r['scale_cap_rule']}): T={r['capped_threshold']}, "
                 f"P={r['at_capped_threshold']['precision']:.4f}, R={r['at_capped_threshold']['recall']:.4f}, "
                 f"F1={r['at_capped_threshold']['f1']:.4f}" for n, r in recs.items()]
    poi_head = ["pair (same original)"] + [f"{m} median" for m in ("a", "b", "c")] + \
        [f"{m} identical" for m in ("a", "b", "c")]
    poi_rows = [[k] + [v[n]["median"] for n in METHODS] + [v[n]["identical"] for n in METHODS]
                for k, v in pairs_of_interest.items()]
    text_poi, md_poi = common.table(poi_head, poi_rows)
    uni_head = ["T", "c: negatives within T", "expected if random", "chance pairs at 1M (random)"]
    uni_rows = [[r["threshold"], r["negatives_within"], r["uniform_expected"], r["chance_pairs_1M_random"]]
                for r in vs_uniform["c_draft"] if r["threshold"] >= 4]
    text_uni, md_uni = common.table(uni_head, uni_rows)
    dvf = draft_vs_full
    draft_line = (f"Draft vs full decode: {dvf['jpeg_files']} JPEGs, {dvf['jpeg_files_decoded_smaller']} decoded "
                  f"smaller by the draft; identical hashes on {dvf['identical_when_decoded_smaller']:.1%} of those "
                  f"(all files: {dvf['identical_all_files']:.1%}); distance histogram (decoded smaller) "
                  f"{dvf['distance_histogram_decoded_smaller']}, max {dvf['max_distance']}.")
    summary = (f"Set: {len(rows)} files = {data['set']['originals']} originals x {len(edit_names) + 1} "
               f"(original + edits); {n_pos} positive pairs, {data['set']['negative_pairs']} negative pairs "
               f"({data['set']['hard_negative_pairs_same_kind']} hard: same render kind or photo-photo).")
    print(summary)
    print(f"\nPrecision / recall / F1 per threshold (around the recommended T={chosen}):\n{text_near}")
    print("\n" + "\n".join(rec_lines))
    print(f"\nPer edit, distance to its original (median) and recall at T={chosen}:\n{text_edit}")
    print(f"\nHard negatives:\n{text_hard}")
    print(f"\nPairs of interest:\n{text_poi}")
    print(f"\nNegative pairs within T vs random balanced hashes:\n{text_uni}")
    print("Hash balance: " + "; ".join(f"{n}: {v['share_popcount_32']:.1%} have 32 ones, "
                                       f"{v['share_odd_distances']:.2%} of distances odd" for n, v in balance.items()))
    print("\n" + draft_line)
    print(f"Naive vs ours-full identical on {data['naive_vs_full']['identical']:.1%} of files.")
    md = "\n\n".join([
        "# Near-duplicate quality",
        f"Machine: {common.machine_line(data['machine'])}", summary,
        "Methods: " + "; ".join(METHODS.values()) + ".",
        f"## Recommended default threshold: {chosen}", "\n".join(rec_lines),
        "## Pairwise precision (P), recall (R), F1 per threshold", md_all,
        f"## Per edit: median distance to the original, recall at T={chosen}", md_edit,
        "## Hard negatives (renders of the same kind, photo-photo)", md_hard,
        "## Pairs of interest (per original: median distance, share identical)", md_poi,
        "## Negative pairs within T, against random balanced hashes (32 ones, as pHash makes)", md_uni,
        "Hash balance: " + "; ".join(f"{n}: {v['share_popcount_32']:.1%} of hashes have 32 ones, "
                                     f"{v['share_odd_distances']:.2%} of pair distances are odd"
                                     for n, v in balance.items()),
        "## Draft vs full decode", draft_line,
    ])
    common.publish("near_dup_quality", data, md, quick)


if __name__ == "__main__":
    main()

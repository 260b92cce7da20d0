"""Near-duplicate quality on our labelled set (tests/dedup_set.py): each way of grouping, from the naive one (one
pHash, connected components) to ours (stars around the kept picture, mirror images and quarter turns, borders,
verification on thumbnails), with precision, recall and F1 over the labelled pairs, the share matched per kind of
copy, and the merges that must not happen (copies that differ in one region, originals of one kind); then the
verification's thresholds swept, and what each step costs.

The set: every shipped demo picture (15 photos, 40 renders) and 20 copies of each (1,100 files). --quick: one
original per kind (about 220 files), nothing written.

    cd /work/main && .venv/bin/python bench/near_dup_quality.py [--quick]
"""

from __future__ import annotations

import time

import common  # first: it sets HOME etc. to a temp dir before anything else is imported

from benchcurate.curation.images.likeness import likeness_hashes, phash_block
from benchcurate.curation.images.near_dedup import NearDedupConfig, near_groups
from tests import dedup_set

WAYS = {
    "naive: one pHash, connected components": dict(verify=False, match_orientations=False, match_borders=False),
    "stars around the kept picture": dict(verify=False, match_orientations=False, match_borders=False,
                                          keep_rule="largest"),
    "+ mirror images and quarter turns": dict(verify=False, match_borders=False, keep_rule="largest"),
    "+ borders": dict(verify=False, keep_rule="largest"),
    "+ verification, largest kept": dict(keep_rule="largest"),
    "+ verification (the default)": {},
    "+ crops (match_crops, an option)": dict(match_crops=True),
}
KINDS = ("same", "turned", "framed", "cropped", "local", "hard_negative")


def connected(items, cfg, thumbs):
    """The naive grouping: every pair within the threshold joins a group; the largest picture is kept."""
    from benchcurate.curation.core.grouping import groups_from_pairs
    from benchcurate.curation.images.near_dedup import hashes_of, pairs_within

    where, hashes = hashes_of([item.phash for item in items])
    pairs = [(int(where[i]), int(where[j])) for i, j, _ in pairs_within(hashes, cfg.max_hamming_distance)]
    dropped = {}
    for group in groups_from_pairs(len(items), pairs):
        kept = min(group, key=lambda index: (-items[index].pixels, -items[index].size_bytes, items[index].id))
        dropped.update({index: (kept, None, {}) for index in group if index != kept})
    return dropped


def main() -> None:
    options = common.arguments(__doc__, "one original per kind (about 220 files)").parse_args()
    work = common.scratch("near-dup-quality-")
    started = time.perf_counter()
    entries = dedup_set.build(work / "set", limit_per_category=1 if options.quick else None)
    built = time.perf_counter() - started
    started = time.perf_counter()
    items = dedup_set.keys(entries)
    hashed = time.perf_counter() - started
    thumbs, processing = dedup_set.thumbs_of(items), dedup_set.processing_of(items)
    rows, data = [], {"files": len(entries), "originals": sum(e.kind == "original" for e in entries), "ways": {}}
    for name, settings in WAYS.items():
        cfg = NearDedupConfig(**settings)
        started = time.perf_counter()
        dropped = connected(items, cfg, thumbs) if name.startswith("naive") else \
            near_groups(items, cfg, thumbs, processing=processing)[0]
        seconds = time.perf_counter() - started
        scores = dedup_set.score(entries, dropped, cfg.match_crops)
        data["ways"][name] = {**scores.__dict__, "seconds": round(seconds, 2)}
        rows.append([name, scores.precision, scores.recall, scores.f1,
                     *(scores.by_kind.get(kind, 0.0) for kind in KINDS), scores.local_merges,
                     scores.hard_negative_merges - scores.local_merges, round(seconds, 2)])
    text, markdown = common.table(["way", "precision", "recall", "F1", *(f"{kind} matched" for kind in KINDS),
                                   "local merges", "hard-negative merges", "grouping s"], rows)
    print(text)
    sweep, sweep_rows = {}, []
    for limit in (0.15, 0.2, 0.27, 0.35, 0.5):
        scores = dedup_set.score(entries, near_groups(items, NearDedupConfig(max_local_difference=limit), thumbs,
                                                      processing=processing)[0])
        sweep[str(limit)] = scores.__dict__
        sweep_rows.append([limit, scores.precision, scores.recall, scores.f1, scores.local_merges])
    sweep_text, sweep_markdown = common.table(["max_local_difference", "precision", "recall", "F1", "local merges"],
                                              sweep_rows)
    print("\nThe verification's threshold (max_hash256_distance 40):\n" + sweep_text)
    likeness_cost = cost_of_likeness(entries[:60])
    print(f"\nHard negatives: copies that differ in one region merged with their original, and originals of one "
          f"kind merged, per way above.\nCost: fingerprints {1000 * hashed / len(entries):.1f} ms per file with "
          f"the likeness hashes, of which the likeness hashes {likeness_cost:.2f} ms; set built in {built:.1f} s")
    data.update({"sweep": sweep, "fingerprint_ms_per_file": round(1000 * hashed / len(entries), 2),
                 "likeness_ms_per_file": round(likeness_cost, 3), "machine": common.machine()})
    common.publish("near_dup_quality", data, f"# Near-duplicate quality on tests/dedup_set.py\n\n"
                   f"{common.machine_line(data['machine'])}. {len(entries)} files: {data['originals']} originals and "
                   f"their copies; pairs: each original with each copy, and every two originals.\n\n{markdown}\n\n"
                   f"The verification's local-difference threshold:\n\n{sweep_markdown}\n\nFingerprints: "
                   f"{data['fingerprint_ms_per_file']} ms per file, of which the likeness hashes "
                   f"{data['likeness_ms_per_file']} ms.\n", options.quick)


def cost_of_likeness(entries) -> float:
    """Milliseconds per file of the likeness hashes alone, on pictures already decoded."""
    from benchcurate.curation.core.decode import DEFAULT_MAX_PIXELS, decode_image

    greys = [decode_image(entry.path, DEFAULT_MAX_PIXELS, 256, grey=True).image for entry in entries]
    blocks = [phash_block(grey) for grey in greys]
    started = time.perf_counter()
    for grey, block in zip(greys, blocks):
        likeness_hashes(grey, block)
    return 1000 * (time.perf_counter() - started) / len(greys)


if __name__ == "__main__":
    main()

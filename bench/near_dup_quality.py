"""Near-duplicate quality on our labelled set (tests/dedup_set.py), per kind of edit: the share of copies grouped with
their original by `image_near_dedup` at its defaults against plain pHash at the same threshold on the same files
(the copy's pHash within 8 bits of the original's), the hard negatives each merges, impure groups, and which kind
of picture each group kept (the original, or a copy with its pixels, should be) and by which rule. Also what it
costs: CPU seconds of the fingerprints and the verification's pictures, from one decode per file (what `curate
images hash --likeness` computes), against those of the grouping (the verification on those pictures, the keep
rule's full-size decodes of the copies still tied), in this one process.

Two sets: 14 real photos (the demo's) and one render of each kind (charts, documents, screenshots), each with 33
copies and 4-6 hard negatives (878 files; the thresholds were chosen on it), then the same photos with every render
of the demo (1,864 files: renders the thresholds were not chosen on); with --originals FOLDER, also four sets made
the same way from real pictures of that folder, one per family (bench/real_images/fetch.sh), 40 families each
(no original shared), each reported alone and then together. --quick: two photos (68 files).

    cd /work/main && .venv/bin/python bench/near_dup_quality.py [--quick]
"""

from __future__ import annotations

import time
from pathlib import Path

import common  # first: it sets HOME etc. to a temp dir before anything else is imported

from benchcurate.curation.images.near_dedup import NearDedupConfig
from tests import dedup_set


def measure(entries: list) -> tuple[str, str, dict]:
    """(printed text, markdown, data) of the grouping of one set against plain pHash."""
    started = time.process_time()
    pictures: list[bytes] = []
    items = dedup_set.keys(entries, pictures)
    hashing = time.process_time() - started
    cfg = NearDedupConfig()
    started = time.process_time()
    dropped, summary = dedup_set.group(items, cfg, pictures)
    grouping = time.process_time() - started
    naive, _ = dedup_set.group(
        items,
        NearDedupConfig(verify=False, match_orientations=False, match_borders=False, keep_rule="largest"),
        pictures,
    )
    scores = dedup_set.score(entries, items, dropped, cfg.max_hamming_distance)
    plain = dedup_set.score(entries, items, naive, cfg.max_hamming_distance)
    counts = {kind: sum(entry.kind == kind for entry in entries) for kind in scores.recall}
    rows = [
        [
            kind,
            counts[kind],
            scores.phash_recall[kind],
            scores.recall[kind],
            "yes" if scores.recall[kind] >= scores.phash_recall[kind] else "NO",
        ]
        for kind in scores.recall
    ]
    text, markdown = common.table(
        ["edit kind", "copies", "naive: one pHash within 8", "+ verification (the default)", "ours >= pHash"], rows
    )
    negatives = [
        [kind, sum(entry.kind == kind for entry in entries), plain.negative_merges[kind], merged]
        for kind, merged in scores.negative_merges.items()
    ]
    negative_text, negative_markdown = common.table(
        ["Hard negatives", "pairs", "merged: plain pHash groups", "merged: ours"], negatives
    )
    kept_rows = [[kind, count] for kind, count in sorted(scores.kept_by_kind.items(), key=lambda row: -row[1])]
    kept_text, kept_markdown = common.table(["kind of the kept picture", "groups"], kept_rows)
    rule_rows = [[rule, count] for rule, count in sorted(summary["decided_by"].items(), key=lambda row: -row[1])]
    rule_text, rule_markdown = common.table(["keep rule that decided", "groups"], rule_rows)
    originals = {entry.original: k for k, entry in enumerate(entries) if entry.kind == "original"}

    def cluster(index: int) -> int:
        return dropped[index].kept if index in dropped else index

    # hard negatives grouped with their original (what the count says), and those grouped only with another copy
    # or hard negative of their picture (two camera shifts of one scene a few percent apart: an impure group)
    merged, beside = [], []
    for k, entry in enumerate(entries):
        if entry.negative and cluster(k) == cluster(originals[entry.original]):
            merged.append(entry.path.name)
        elif entry.negative and any(
            cluster(j) == cluster(k) for j, other in enumerate(entries) if j != k and other.original == entry.original
        ):
            beside.append(entry.path.name)
    line = (
        f"{len(entries)} files, {sum(e.kind == 'original' for e in entries)} originals; {scores.groups} groups, "
        f"{scores.impure_groups} impure, {scores.original_merges} holding two originals; the original (or its "
        f"pixels) kept in {scores.original_kept:.1%} of groups. Plain pHash groups merge "
        f"{sum(plain.negative_merges.values())} hard negatives, ours {sum(scores.negative_merges.values())}"
        f"{' (' + ', '.join(sorted(merged)) + ')' if merged else ''}"
        f"{'; grouped with another picture of theirs only: ' + ', '.join(sorted(beside)) if beside else ''}. "
        f"CPU: fingerprints and the verification's pictures from the same decode (what `curate images hash "
        f"--likeness` computes) {hashing:.2f} s, grouping from those pictures {grouping:.2f} s "
        f"({grouping / hashing:.2f}x): "
        f"{summary['candidate_pairs']} candidate pairs, {summary['verified_pairs']} verified, "
        f"{summary['rejected_by_verification']} rejected, {summary['verified_against_a_copy']} accepted "
        f"against another copy of their group, {summary['kept_other_than_centre']} groups kept another copy "
        f"than their first centre, {summary['verified_against_the_kept_copy']} accepted against that copy after "
        "failing against the centre."
    )
    data = {
        "files": len(entries),
        "recall": scores.recall,
        "phash_recall": scores.phash_recall,
        "negative_merges": scores.negative_merges,
        "merged_negatives": sorted(merged),
        "negatives_grouped_apart_from_their_original": sorted(beside),
        "plain_phash_negative_merges": plain.negative_merges,
        "impure_groups": scores.impure_groups,
        "original_merges": scores.original_merges,
        "groups": scores.groups,
        "original_kept": scores.original_kept,
        "original_kept_groups": scores.original_kept_groups,
        "kept_by_kind": scores.kept_by_kind,
        "cpu_seconds": {"fingerprints": round(hashing, 2), "grouping": round(grouping, 2)},
        "summary": {key: value for key, value in summary.items() if key != "chains"},
    }
    page = (
        f"{line}\n\nPer kind of edit (several strengths each), copies grouped with their original:\n\n{markdown}\n\n"
        f"Hard negatives:\n\n{negative_markdown}\n\nWho was kept, per group:\n\n{kept_markdown}\n\nThe rule of "
        f"`survivor.elect` that decided each group:\n\n{rule_markdown}\n"
    )
    return "\n\n".join([text, negative_text, kept_text, rule_text, line]), page, data


HELD_OUT_ORIGINALS = 40  # originals in each set of real pictures
HELD_OUT = ("held out", "held out, second", "held out, third", "held out, fourth")
KEYS = {
    "all renders": "all_renders",
    "held out": "held_out",
    "held out, second": "held_out_second",
    "held out, third": "held_out_third",
    "held out, fourth": "held_out_fourth",
}


def together(found: list[dict]) -> dict:
    """The held-out sets' figures added up: files, groups, groups keeping the original, hard negatives merged,
    impure groups, and the edit kinds whose recall fell under plain pHash's in any set."""
    kept = sum(one["original_kept_groups"] for one in found)
    groups = sum(one["groups"] for one in found)
    return {
        "sets": len(found),
        "files": sum(one["files"] for one in found),
        "groups": groups,
        "original_kept_groups": kept,
        "original_kept": kept / groups if groups else 0.0,
        "per_set_original_kept": [one["original_kept"] for one in found],
        "negatives_merged": sum(sum(one["negative_merges"].values()) for one in found),
        "impure_groups": sum(one["impure_groups"] for one in found),
        "under_phash": sorted(
            {kind for one in found for kind in one["recall"] if one["recall"][kind] < one["phash_recall"][kind]}
        ),
    }


def together_line(pooled: dict) -> str:
    per_set = ", ".join(f"{share:.1%}" for share in pooled["per_set_original_kept"])
    under = ", ".join(pooled["under_phash"]) or "none"
    return (
        f"{pooled['sets']} sets, {pooled['files']:,} files: the original (or its pixels) kept in "
        f"{pooled['original_kept_groups']} of {pooled['groups']} groups ({pooled['original_kept']:.1%}; per set "
        f"{per_set}); {pooled['negatives_merged']} hard negatives merged, {pooled['impure_groups']} impure groups; "
        f"edit kinds grouped less often than by plain pHash: {under}."
    )


def main() -> None:
    parser = common.arguments(__doc__, "two photos and their copies (68 files)")
    parser.add_argument(
        "--originals",
        type=Path,
        help="also four sets made the same way from 40 pictures each of this folder, one per family, the thresholds "
        "never chosen on (bench/real_images/fetch.sh writes such a folder: /tmp/real-images/files)",
    )
    options = parser.parse_args()
    work = common.scratch("near-dup-quality-")
    sets = (
        {"quick": dedup_set.build(work / "set", photos=2, renders_per_kind=0)}
        if options.quick
        else {
            "chosen on": dedup_set.build(work / "set", renders_per_kind=1),
            "all renders": dedup_set.build(work / "set"),
        }
    )
    if options.originals is not None:  # sets of real pictures sharing no original: how much the figures vary
        size = 2 if options.quick else HELD_OUT_ORIGINALS
        for index, name in enumerate(HELD_OUT):
            chosen = dedup_set.held_out(options.originals, count=size, start=index * size)
            sets[name] = dedup_set.build(work / f"held-out-{index + 1}", chosen=chosen)
    pages, data = [], {"machine": common.machine()}
    for name, entries in sets.items():
        text, page, found = measure(entries)
        print(f"{name}:\n{text}\n")
        pages.append((name, len(entries), page))
        if name in KEYS:
            data[KEYS[name]] = found
        else:  # at the top level, where bench/hash_throughput.py reads the recall
            data.update(found)
    if all(KEYS[name] in data for name in HELD_OUT):
        data["held_out_together"] = together([data[KEYS[name]] for name in HELD_OUT])
        line = together_line(data["held_out_together"])
        print(f"held out, all sets:\n{line}\n")
        pages.append(("held out together", data["held_out_together"]["files"], line + "\n"))
    heading = {
        "chosen on": "The set the thresholds were chosen on",
        "all renders": "Every render of the demo (thresholds not chosen on these)",
        "held out": f"Real pictures from Debian packages, one per family ({options.originals}; thresholds not "
        f"chosen on these)",
        "held out, second": f"The next {HELD_OUT_ORIGINALS} families of that folder (no original shared with the "
        "first set; nothing was tuned on these)",
        "held out, third": f"The third {HELD_OUT_ORIGINALS} families (stop 45 found its two fixes of the placement "
        "on this set)",
        "held out, fourth": f"The fourth {HELD_OUT_ORIGINALS} families (first measured after those fixes; nothing was "
        "tuned on these)",
        "held out together": "The four sets of real pictures together",
    }
    common.publish(
        "near_dup_quality",
        data,
        f"# Near-duplicate quality on tests/dedup_set.py\n\n"
        f"{common.machine_line(data['machine'])}; the machine was shared with other work (CPU seconds, "
        f"one process).\n\n"
        + "\n".join(f"## {heading.get(name, name)} ({files:,} files)\n\n{page}" for name, files, page in pages),
        options.quick,
    )


if __name__ == "__main__":
    main()

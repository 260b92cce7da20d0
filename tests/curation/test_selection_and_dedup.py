"""Set stages: exact and near dedup, minimum category size, weighted sampling."""

from collections import Counter

import pytest

from benchcurate.curation.core.cache import Cache
from benchcurate.curation.engine.stage import StageContext
from benchcurate.curation.images import exact_dedup, near_dedup
from benchcurate.curation.models.offline import OfflineBackend
from benchcurate.curation.selection import min_size, weighted_sample
from benchcurate.schemas import Categories, Drop, Keep
from tests.factories import decide, make_sample


@pytest.fixture
def ctx(tmp_path):
    return StageContext(
        run_dir=tmp_path, stage="test", run_seed=7, backend=OfflineBackend(), cache=Cache(tmp_path / "cache.sqlite")
    )


def with_image(sample, **image_updates):
    return sample.model_copy(update={"images": [sample.images[0].model_copy(update=image_updates)]})


def test_exact_dedup_keeps_the_preferred_source_and_names_the_kept_one(ctx):
    a = make_sample(1)
    b = make_sample(2).model_copy(
        update={"images": a.images, "provenance": a.provenance.model_copy(update={"source_dataset": "mirror"})}
    )
    c = make_sample(3)
    verdicts = decide(exact_dedup.STAGE, [a, b, c], exact_dedup.ExactDedupConfig(source_priority=("mirror",)), ctx)
    assert verdicts[0] == Drop(reason="exact_duplicate", detail={"duplicate_of": b.id, "sha256": a.images[0].sha256})
    assert verdicts[1] == Keep() and verdicts[2] == Keep()


def random_hashes(rng, count, planted):
    hashes = [rng.getrandbits(64) for _ in range(count)]
    for _ in range(planted):
        source = rng.randrange(count)
        flipped = hashes[source]
        for bit in rng.sample(range(64), rng.randrange(0, 11)):
            flipped ^= 1 << bit
        hashes.append(flipped)
    return hashes


def test_near_dedup_keeps_the_largest_image_and_records_distance(ctx):
    base = make_sample(1)
    phash = int(base.images[0].phash, 16)
    small = with_image(make_sample(2), phash=f"{phash ^ 0b111:016x}", width=50, height=50)
    large = with_image(make_sample(3), phash=base.images[0].phash, width=400, height=300)
    far = with_image(make_sample(4), phash=f"{phash ^ ((1 << 64) - 1):016x}")
    cfg = near_dedup.NearDedupConfig(max_hamming_distance=4, verify=False, keep_rule="largest")
    verdicts = decide(near_dedup.STAGE, [small, large, far], cfg, ctx)
    assert verdicts[0] == Drop(
        reason="near_duplicate",
        detail={
            "near_duplicate_of": large.id,
            "hamming_distance": 3,
            "orientation": "identity",
            "matched_on": "full",
            "keep_rule": "largest",
            "group_size": 2,
        },
    )
    assert verdicts[1:] == [Keep(), Keep()]


def test_near_dedup_drops_only_what_is_near_the_kept_item_and_reports_the_chain(ctx):
    """a - b - c - d, each 4 from the next at threshold 4: b (near two, and larger than c) is kept with its copies a
    and c; d is near only c, a dropped one, so it stays and the chain is reported, not followed."""
    a = with_image(make_sample(1), phash="0000000000000000")
    b = with_image(make_sample(2), phash="000000000000000f", width=500, height=500)
    c = with_image(make_sample(3), phash="00000000000000ff")
    d = with_image(make_sample(4), phash="0000000000000fff")
    cfg = near_dedup.NearDedupConfig(max_hamming_distance=4, verify=False)
    verdicts = decide(near_dedup.STAGE, [a, b, c, d], cfg, ctx)
    assert verdicts[1] == Keep() and verdicts[3] == Keep()
    assert [verdicts[k].detail["near_duplicate_of"] for k in (0, 2)] == [b.id, b.id]
    _, summary = near_dedup.near_groups([near_dedup.image_key(item) for item in (a, b, c, d)], cfg, lambda index: None)
    assert summary["chains_not_followed"] == 1
    assert summary["chains"] == [{"kept": d.id, "near_dropped": c.id, "kept_in_place": b.id}]


def categorised(seed, name):
    return make_sample(seed, categories=Categories(image_main=name))


def test_min_size_drops_small_categories_with_their_size(ctx):
    items = [categorised(i, "Charts") for i in range(3)] + [categorised(10, "Receipts")]
    verdicts = decide(min_size.STAGE, items, min_size.MinSizeConfig(min_items_per_category=2), ctx)
    assert verdicts[:3] == [Keep()] * 3
    assert verdicts[3] == Drop(
        reason="category_too_small", detail={"category": "Receipts", "category_size": 1, "min_items_per_category": 2}
    )


def corpus(sizes):
    items, seed = [], 0
    for name, size in sizes.items():
        for _ in range(size):
            items.append(categorised(seed, name))
            seed += 1
    return items


def kept_counts(items, verdicts):
    return Counter(item.categories.image_main for item, verdict in zip(items, verdicts) if verdict == Keep())


def test_allocation_is_proportional_and_capped():
    assert weighted_sample.allocate({"a": 60, "b": 30, "c": 10}, 20, 1.0) == {"a": 12, "b": 6, "c": 2}
    assert weighted_sample.allocate({"a": 60, "b": 30, "c": 1}, 30, 0.0) == {"a": 15, "b": 14, "c": 1}
    assert weighted_sample.allocate({"a": 3, "b": 2}, 100, 1.0) == {"a": 3, "b": 2}
    quotas = weighted_sample.allocate({"a": 81, "b": 16, "c": 4}, 15, 0.5)
    assert sum(quotas.values()) == 15 and quotas["a"] > quotas["b"] > quotas["c"]


def test_weighted_sample_matches_quotas_and_is_reproducible(ctx):
    items = corpus({"a": 60, "b": 30, "c": 10})
    cfg = weighted_sample.WeightedSampleConfig(max_items=20)
    first = decide(weighted_sample.STAGE, items, cfg, ctx)
    assert kept_counts(items, first) == {"a": 12, "b": 6, "c": 2}
    assert decide(weighted_sample.STAGE, items, cfg, ctx) == first
    dropped = next(v for v in first if isinstance(v, Drop))
    assert dropped.reason == "not_sampled" and {"category", "category_quota", "category_size"} <= set(dropped.detail)


def test_weighted_sample_does_not_depend_on_input_order(ctx):
    items = corpus({"a": 40, "b": 25})
    cfg = weighted_sample.WeightedSampleConfig(max_items=15)
    chosen = {item.id for item, v in zip(items, decide(weighted_sample.STAGE, items, cfg, ctx)) if v == Keep()}
    shuffled = items[::-1]
    again = {item.id for item, v in zip(shuffled, decide(weighted_sample.STAGE, shuffled, cfg, ctx)) if v == Keep()}
    assert chosen == again


def test_weighted_sample_is_uniform_within_a_category_over_many_seeds(tmp_path):
    items = corpus({"a": 10})
    hits = Counter()
    for seed in range(400):
        seeded = StageContext(
            run_dir=tmp_path, stage="s", run_seed=seed, backend=OfflineBackend(), cache=Cache(tmp_path / "c.sqlite")
        )
        verdicts = decide(weighted_sample.STAGE, items, weighted_sample.WeightedSampleConfig(max_items=3), seeded)
        hits.update(item.id for item, v in zip(items, verdicts) if v == Keep())
    # each item is drawn with probability 0.3: 120 of 400 expected; 5 sigma is about 46
    assert all(abs(count - 120) < 46 for count in hits.values()) and len(hits) == 10


def test_a_different_seed_draws_a_different_sample(tmp_path):
    items = corpus({"a": 50})
    picks = []
    for seed in (1, 2):
        seeded = StageContext(
            run_dir=tmp_path, stage="s", run_seed=seed, backend=OfflineBackend(), cache=Cache(tmp_path / "c.sqlite")
        )
        verdicts = decide(weighted_sample.STAGE, items, weighted_sample.WeightedSampleConfig(max_items=10), seeded)
        picks.append({item.id for item, v in zip(items, verdicts) if v == Keep()})
    assert picks[0] != picks[1]


def write_hashes(path, rows):
    import json

    path.write_text(
        "".join(
            json.dumps({"path": name, "phash": value, "width": 10, "height": 10, "bytes": 1}) + "\n"
            for name, value in rows
        )
    )
    return path


def test_items_matching_a_reference_set_are_dropped_naming_the_reference(ctx, tmp_path):
    base = make_sample(1)
    phash = int(base.images[0].phash, 16)
    near = with_image(make_sample(2), phash=f"{phash ^ 0b11:016x}")
    unrelated = with_image(make_sample(3), phash=f"{phash ^ ((1 << 64) - 1):016x}")
    reference = write_hashes(tmp_path / "old.jsonl", [("old/a.png", base.images[0].phash)])
    cfg = near_dedup.NearDedupConfig(max_hamming_distance=4, reference=(str(reference),))
    verdicts = decide(near_dedup.STAGE, [base, near, unrelated], cfg, ctx)
    assert verdicts[0] == Drop(
        reason="matches_reference",
        detail={"reference": "old/a.png", "reference_set": str(reference), "hamming_distance": 0},
    )
    assert verdicts[1].reason == "matches_reference" and verdicts[1].detail["hamming_distance"] == 2
    assert verdicts[2] == Keep()


def test_changing_the_reference_file_changes_the_stage_key(tmp_path):
    import os

    reference = write_hashes(tmp_path / "ref.jsonl", [("a", "0" * 16)])
    cfg = near_dedup.NearDedupConfig(reference=(str(reference),))
    before = near_dedup.reference_digest(cfg)
    write_hashes(reference, [("a", "0" * 16), ("b", "f" * 16)])
    os.utime(reference, ns=(1, 1))
    assert near_dedup.reference_digest(cfg) != before

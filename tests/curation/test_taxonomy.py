"""Image-side curation: category merging, ProBench fields, domain balancing, sampling weights, histograms."""

import hashlib
import json
import random
from collections import Counter

import pytest

from benchcurate.curation.core.cache import Cache
from benchcurate.curation.engine.runner import run_all
from benchcurate.curation.engine.stage import StageContext
from benchcurate.curation.labels import fields, normalise
from benchcurate.curation.labels.normalise import canonical_names, label_key
from benchcurate.curation.models.offline import OfflineBackend
from benchcurate.curation.report.run import (
    Histogram,
    histograms,
    load_report,
    merged_labels,
    plot_histogram,
    write_label_report,
)
from benchcurate.curation.selection import balance, weighted_sample
from benchcurate.curation.taxonomy import probench_taxonomy
from benchcurate.schemas import Categories, Drop, ImageRef, Keep, Turn
from tests.factories import decide, make_image, make_sample, scripted_reply
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import model_run, resolve


@pytest.fixture
def ctx(tmp_path):
    return StageContext(
        run_dir=tmp_path, stage="test", run_seed=7, backend=OfflineBackend(), cache=Cache(tmp_path / "cache.sqlite")
    )


def ref_for(path):
    data = path.read_bytes()
    return ImageRef(
        path=str(path),
        sha256=hashlib.sha256(data).hexdigest(),
        size_bytes=len(data),
        width=320,
        height=240,
        format="PNG",
    )


def labelled(names, kind="image"):
    main, sub = normalise.LABEL_FIELDS[kind]
    return [
        make_sample(seed, categories=Categories(**{main: name, sub: f"sub {seed % 2}"}))
        for seed, name in enumerate(names)
    ]


# --- category merging ----------------------------------------------------------------------------


def test_spelling_variants_share_a_key_and_different_names_do_not():
    assert label_key("Charts & Graphs") == label_key("graphs and charts") == label_key("Chart, Graph")
    assert label_key("Glasses") == label_key("glass") and label_key("Boxes") == label_key("box")
    assert label_key("Analysis") == "analysis" and label_key("Street Art") != label_key("Street")


def test_merging_prefers_the_seeded_name_then_the_most_frequent_spelling():
    counts = Counter(
        {
            "photos": 2,
            "Photography": 1,
            "Photographs": 1,
            "graphs & charts": 3,
            "Street Art": 2,
            "street arts": 5,
            "Cats": 1,
        }
    )
    mapping = canonical_names(
        counts, {"Photos": "Photographs", "Photography": "Photographs"}, ("Charts and Graphs", "Photographs")
    )
    assert mapping["photos"] == mapping["Photography"] == mapping["Photographs"] == "Photographs"
    assert mapping["graphs & charts"] == "Charts and Graphs"  # a seeded spelling wins
    assert mapping["Street Art"] == mapping["street arts"] == "street arts"  # else the most frequent one
    assert mapping["Cats"] == "Cats"


def relabelled(items, cfg, ctx):
    return normalise.STAGE.decide(items, cfg, ctx)[0]


def test_merging_is_stable_under_reordering_and_idempotent():
    names = ["Photographs", "photos", "Photography", "Street Art", "street-arts", "Maps", "maps", "Map", "Cats"]
    counts = Counter({name: (index % 3) + 1 for index, name in enumerate(names)})
    synonyms = {"Photos": "Photographs"}
    first = canonical_names(counts, synonyms, ("Photographs",))
    for seed in range(20):
        shuffled = list(counts.items())
        random.Random(seed).shuffle(shuffled)
        assert canonical_names(Counter(dict(shuffled)), synonyms, ("Photographs",)) == first
    merged = Counter()
    for name, count in counts.items():
        merged[first[name]] += count
    assert canonical_names(merged, synonyms, ("Photographs",)) == {name: name for name in merged}


def test_the_stage_rewrites_labels_keeps_the_raw_ones_and_records_the_mapping(ctx):
    items = labelled(["Photographs", "photos", "PHOTOGRAPH", "Charts & Graphs", "Charts and Graphs"])
    items[1] = items[1].model_copy(update={"categories": Categories(image_main="photos", image_sub="Street Scenes")})
    items[2] = items[2].model_copy(update={"categories": Categories(image_main="PHOTOGRAPH", image_sub="street scene")})
    out = relabelled(items, normalise.NormaliseConfig(), ctx)
    assert [item.categories.image_main for item in out] == ["Photographs"] * 3 + ["Charts and Graphs"] * 2
    assert out[1].categories.image_sub == out[2].categories.image_sub
    assert out[1].scores["category_normalise"]["image_main_raw"] == "photos" and not out[0].scores
    assert ctx.summary["image"]["merged"] == {
        "Charts & Graphs": "Charts and Graphs",
        "PHOTOGRAPH": "Photographs",
        "photos": "Photographs",
    }
    assert ctx.summary["image"]["categories_before"] == 5 and ctx.summary["image"]["categories_after"] == 2
    recipe_synonym = normalise.NormaliseConfig(synonyms={"Charts and Graphs": "Data Plots"})
    again = relabelled(items, recipe_synonym, StageContext(**{**ctx.__dict__, "summary": {}}))
    assert {item.categories.image_main for item in again[3:]} == {"Data Plots"}


def test_task_fields_merge_onto_probench_names(ctx):
    items = labelled(["coding", "Coding", "Data Cleaning", "data-cleaning", "Creative writings"], kind="task")
    out = relabelled(items, normalise.NormaliseConfig(labels=["task"]), ctx)
    assert [item.categories.task_main for item in out] == [
        "Coding",
        "Coding",
        "Data Cleaning",
        "Data Cleaning",
        "Creative Writing",
    ]
    assert all(item.categories.image_main is None for item in out)


# --- ProBench fields -----------------------------------------------------------------------------


def test_the_taxonomy_file_matches_the_paper_counts():
    taxonomy = probench_taxonomy()
    assert len(taxonomy["task_fields"]) == 10 and len(taxonomy["image_fields"]) == 10
    assert sum(len(entry["subfields"]) for entry in taxonomy["task_fields"].values()) == 47
    assert sum(len(entry["subfields"]) for entry in taxonomy["image_fields"].values()) == 39


def test_offline_fields_use_the_question_and_leave_task_labels_empty_without_one(ctx, tmp_path):
    image = make_image(tmp_path / "chart.png", 3)
    ref = ref_for(image)
    asked = make_sample(1, images=[ref], conversation=[Turn(speaker="user", utterance="How many bars are red?")])
    bare = make_sample(2, images=[ref])
    cfg = fields.FieldConfig()
    with_question = fields.apply(asked, fields.score(asked, cfg, ctx), cfg).categories
    assert (with_question.task_main, with_question.task_sub) == ("Perception", "Counting")
    assert with_question.image_main in probench_taxonomy()["image_fields"]
    without = fields.score(bare, cfg, ctx)
    assert without.values["task_field"] is None and without.values["image_field"] is not None
    assert fields.decide(without, cfg) == Keep()


def field_responder(body):
    """Field replies with proposals ("Other") for some images; sub-fields echo the listed names."""
    name = body.get("response_format", {}).get("json_schema", {}).get("name")
    digest = int(hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest(), 16)
    if name == "FieldReply":
        proposals = [("Other", "Maps"), ("Other", "maps"), ("Photographs", None), ("Medical Images", None)]
        field, proposed = proposals[digest % len(proposals)]
        return {
            "image_reasoning": "r",
            "image_field": field,
            "proposed_image_field": proposed,
            "question_reasoning": None,
            "question_field": None,
            "proposed_question_field": None,
        }
    if name == "SubfieldReply":
        text = body["messages"][-1]["content"]
        text = text if isinstance(text, str) else " ".join(p.get("text", "") for p in text)
        listed = [line[2:] for line in text.splitlines() if line.startswith("- ") and "(" not in line]
        return {"image_subfield": listed[0] if listed else "Road Maps", "question_subfield": None}
    return scripted_reply(body)


@pytest.mark.slow
def test_two_step_classification_against_the_loopback_server(tmp_path, ctx):
    for seed in range(8):
        make_image(tmp_path / "images" / f"{seed}.png", seed)
    from benchcurate.curation.models.openai_backend import OpenAIBackend
    from benchcurate.schemas import BackendSpec

    with FakeOpenAIServer(responder=field_responder) as server:
        backend = OpenAIBackend(
            BackendSpec(kind="openai", base_url=server.base_url, model="fake-vlm"), Cache(tmp_path / "replies.sqlite")
        )
        live = StageContext(**{**ctx.__dict__, "backend": backend})
        items = [make_sample(seed, images=[ref_for(tmp_path / "images" / f"{seed}.png")]) for seed in range(8)]
        labelled_items = [
            fields.apply(item, fields.score(item, fields.FieldConfig(), live), fields.FieldConfig()) for item in items
        ]
        assert server.completions_served == 16  # field, then sub-field, per item
    mains = {item.categories.image_main for item in labelled_items}
    assert mains <= {"Maps", "maps", "Photographs", "Medical Images"} and None not in mains
    out = relabelled(labelled_items, normalise.NormaliseConfig(), live)
    assert {item.categories.image_main for item in out} <= {"Maps", "maps", "Photographs", "Medical Images"}
    assert len({item.categories.image_main for item in out if item.categories.image_main.casefold() == "maps"}) <= 1


# --- domain balancing ----------------------------------------------------------------------------


def test_water_filling_meets_its_guarantees_on_random_fields():
    rng = random.Random(0)
    for _ in range(500):
        sizes = {f"f{k}": rng.choice([rng.randint(0, 5), rng.randint(1, 400)]) for k in range(rng.randint(1, 12))}
        target = rng.randint(1, 1200)
        quotas, cap = balance.water_fill(sizes, target)
        total = sum(sizes.values())
        assert sum(quotas.values()) == min(target, total)
        floor_share = target // len(sizes)
        for name, size in sizes.items():
            assert 0 <= quotas[name] <= size
            assert quotas[name] >= min(size, floor_share)  # no field below its share unless smaller
            if cap is not None and size <= cap:
                assert quotas[name] == size  # only over-represented fields are cut
        for a in sizes:
            for b in sizes:
                if sizes[a] > sizes[b]:
                    assert quotas[a] >= quotas[b]


def test_balancing_drops_only_from_large_fields_reproducibly(ctx):
    names = ["Coding"] * 50 + ["Mathematics"] * 30 + ["Planning"] * 5 + [None] * 3
    items = labelled(names, kind="task")
    cfg = balance.BalanceConfig(target_total=40)
    verdicts = decide(balance.STAGE, items, cfg, ctx)
    kept = Counter(item.categories.task_main or "unlabelled" for item, v in zip(items, verdicts) if v == Keep())
    assert kept == {"Coding": 16, "Mathematics": 16, "Planning": 5, "unlabelled": 3}
    assert ctx.summary["cap"] == 16 and ctx.summary["quotas"]["Coding"] == 16
    assert decide(balance.STAGE, items, cfg, ctx) == verdicts
    dropped = next(v for v in verdicts if isinstance(v, Drop))
    assert dropped.reason == "field_downsampled" and dropped.detail["cap"] == 16


# --- sampling weights ----------------------------------------------------------------------------


@pytest.mark.parametrize("weighting", ["proportional", "sqrt", "uniform"])
def test_sampled_shares_follow_the_weights_and_the_summary_records_them(weighting, tmp_path):
    sizes = {"a": 400, "b": 100, "c": 25}
    items = labelled([name for name, size in sizes.items() for _ in range(size)])
    exponent = weighted_sample.WEIGHT_EXPONENT[weighting]
    weights = {name: size**exponent for name, size in sizes.items()}
    cap = 60
    inclusion = Counter()
    for seed in range(60):
        seeded = StageContext(
            run_dir=tmp_path, stage="s", run_seed=seed, backend=OfflineBackend(), cache=Cache(tmp_path / "c.sqlite")
        )
        verdicts = decide(
            weighted_sample.STAGE,
            items,
            weighted_sample.WeightedSampleConfig(max_items=cap, weighting=weighting),
            seeded,
        )
        kept = Counter(item.categories.image_main for item, v in zip(items, verdicts) if v == Keep())
        for name in sizes:
            expected = cap * weights[name] / sum(weights.values())
            assert abs(kept[name] - expected) <= 1, (weighting, kept)
        inclusion.update(item.id for item, v in zip(items, verdicts) if v == Keep())
        assert seeded.summary["weighting"] == weighting and seeded.summary["seed"] == seed
        assert seeded.summary["quotas"] == dict(kept)
    # within category "c", each item's inclusion rate is its quota over the size
    rate = sum(inclusion[item.id] for item in items if item.categories.image_main == "c") / (60 * sizes["c"])
    expected_c = round(cap * weights["c"] / sum(weights.values())) / sizes["c"]
    assert abs(rate - expected_c) < 0.05


# --- whole runs ----------------------------------------------------------------------------------


def varied(body):
    """Quality 1-5 and category names (proposed spellings included) that depend on the image."""
    name = body.get("response_format", {}).get("json_schema", {}).get("name")
    digest = int(hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest(), 16)
    if name == "QualityReply":
        return {"rationale": "r", "quality_score": 1 + digest % 5}
    if name == "CategoryReply":
        options = [
            ("Charts and Graphs", None),
            ("Others", "Photos"),
            ("Others", "photographs"),
            ("Others", "Photography"),
            ("Diagrams and Schematics", None),
            ("Others", "Street Art"),
        ]
        main, proposed = options[digest % len(options)]
        return {"category": main, "sub_category": "general", "proposed_category": proposed}
    return scripted_reply(body)


def chat_requests(server) -> int:
    return sum(request.path.endswith("/chat/completions") for request in server.requests)


@pytest.mark.slow
def test_decision_parameters_replay_stored_scores_without_model_calls(tmp_path):
    with FakeOpenAIServer(responder=varied) as server:
        run_dir = model_run(tmp_path, server, "thresholds", images=24)
        run_all(run_dir)
        calls = chat_requests(server)
        assert calls > 24
        before = {stats.stage: stats.kept for stats in load_report(run_dir).stages}
        overrides = [
            ("image_quality", {"min_quality_score": 3}),
            ("category_min_size", {"min_items_per_category": 2}),
            ("category_weighted_sample", {"max_items": 5, "weighting": "uniform"}),
        ]
        from benchcurate.curation.engine.store import RunStore

        config = RunStore(run_dir).load_config()
        settings = {
            "image_quality": {"min_quality_score": 1},
            "category_min_size": {"min_items_per_category": 1},
            "backend": {"max_retries": 1},
            **dict(overrides),
        }
        changed = resolve(
            "multiverse",
            tmp_path / "out",
            run_id="thresholds",
            backend="openai",
            base_url=server.base_url,
            model="fake-vlm",
            overrides=settings,
        )
        assert changed.input_path == config.input_path
        RunStore(run_dir).save_config(changed)
        run_all(run_dir)
        after_quality = {stats.stage: stats.kept for stats in load_report(run_dir).stages}
        assert chat_requests(server) == calls, "a decision parameter caused model calls"
    assert after_quality["image_quality"] < before["image_quality"]
    assert after_quality["category_weighted_sample"] <= 5
    report = load_report(run_dir)
    assert ("image", "photographs", "Photographs") in merged_labels(report)
    image = next(h for h in histograms(report) if h.kind == "image_main")
    stages = [stage for stage, _ in image.columns]
    assert stages[0] == "image_category" and "category_normalise" in stages
    raw, merged = image.columns[0][1], dict(image.columns)["category_normalise"]
    photo_names = {name for name in raw if name.casefold().startswith("photo")}
    assert len(photo_names) >= 2 and sum(raw.values()) == sum(merged.values())
    assert merged["Photographs"] == sum(raw[name] for name in photo_names) and not photo_names - {"Photographs"} & set(
        merged
    )
    paths = write_label_report(report, run_dir)
    assert {path.suffix for path in paths} == {".md", ".png"}
    assert all(path.stat().st_size > 1000 for path in paths if path.suffix == ".png")


def test_a_label_plot_drawn_from_the_same_counts_is_kept_and_other_counts_draw_it_again(tmp_path):
    """A rerun does not draw its plots again (nor import matplotlib for them); changed counts, or a file that is not
    our plot, are drawn anew."""
    path = tmp_path / "report" / "labels_image_main.png"
    first = Histogram(
        "image_main", [("image_category", {"charts": 3, "photos": 1}), ("category_min_size", {"charts": 3})]
    )
    plot_histogram(first, path)
    drawn = path.read_bytes()
    path.touch()
    stamp = path.stat().st_mtime_ns
    plot_histogram(Histogram("image_main", [(stage, dict(counts)) for stage, counts in first.columns]), path)
    assert path.stat().st_mtime_ns == stamp and path.read_bytes() == drawn  # kept, not written again
    plot_histogram(Histogram("image_main", [("image_category", {"charts": 3, "photos": 2})]), path)
    assert path.read_bytes() != drawn
    path.write_bytes(b"not a picture")
    plot_histogram(first, path)
    assert path.read_bytes() == drawn  # drawn anew, as the first time

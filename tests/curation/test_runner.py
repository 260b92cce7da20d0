"""The runner on toy stages: decisions recorded, failures turned into drops, reruns skip, thresholds replay."""

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from benchcurate.curation.core.errors import BackendUnavailable, ModelOutputInvalid, StageFailed
from benchcurate.curation.engine.runner import run_all, run_stage
from benchcurate.curation.engine.stage import (
    ItemStage,
    Keyed,
    SetStage,
    SourceStage,
    StageConfig,
    TransformStage,
    decision_field,
)
from benchcurate.curation.engine.store import RunStore
from benchcurate.curation.report.run import funnel_text, load_report
from benchcurate.schemas import Drop, Generation, Keep, Recipe, ReleaseSpec, RunConfig, Scores, StageSpec
from tests.factories import make_sample

CALLS: Counter = Counter()


class SourceConfig(StageConfig):
    count: int = 8
    input_path: str = ""


def toy_read(cfg, ctx):
    for seed in range(cfg.count):
        item = make_sample(seed)
        yield item, (Drop(reason="toy_bad", detail={"seed": seed}) if seed == 7 else Keep())


class ScoreConfig(StageConfig):
    multiplier: int = 1
    min_value: int = decision_field(0)
    unavailable_after: int | None = None


def toy_score(item, cfg, ctx):
    CALLS["score"] += 1
    if cfg.unavailable_after is not None and CALLS["score"] > cfg.unavailable_after:
        raise BackendUnavailable("toy server went away")
    if item.id == "s0003":
        raise ValueError("cannot score this one")
    if item.id == "s0004":
        raise ModelOutputInvalid("reply did not match", raw='{"value": "seven"')
    return Scores(values={"value": int(item.id[1:]) * cfg.multiplier})


def toy_decide(scores, cfg):
    return (
        Keep()
        if scores.values["value"] >= cfg.min_value
        else Drop(reason="toy_low", detail={"value": scores.values["value"]})
    )


class TakeConfig(StageConfig):
    keep_first: int = 100


def toy_take(items, cfg, ctx):
    CALLS["take"] += 1
    return [Keep() if index < cfg.keep_first else Drop(reason="toy_not_taken") for index in range(len(items))]


class SplitConfig(StageConfig):
    copies: int = 2
    fail_all: bool = False


def toy_split(item, cfg, ctx):
    """One to many: children with ids derived from the parent's, tagged with who made them."""
    CALLS["split"] += 1
    if cfg.fail_all:
        raise ValueError("broken for everyone")
    made = Generation(backend="toy-backend", model="toy-model", prompt_id="toy", prompt_version=1)
    return [
        item.model_copy(
            update={
                "id": f"{item.id}/copy-{n}",
                "parent_id": item.id,
                "generated_by": {**item.generated_by, "copy": made},
            }
        )
        for n in range(cfg.copies)
    ]


def toy_check(item, cfg):
    return Drop(reason="toy_odd_copy") if item.id.endswith("copy-1") else Keep()


SEEN: list = []


def toy_parity(item, cfg):
    return Keyed(item.id, int(item.id[1:]) % 2)


def toy_mark(views, cfg, ctx):
    SEEN.extend(views)
    return [{"language": "odd", "scores": {"parity": 1}} if view.value else None for view in views]


def toy_evens(views, cfg, ctx):
    SEEN.extend(views)
    return [Drop(reason="toy_odd", detail={"id": view.id}) if view.value else Keep() for view in views]


REGISTRY = {
    "toy_mark": SetStage(name="toy_mark", config=TakeConfig, view=toy_parity, relabel=toy_mark),
    "toy_evens": SetStage(name="toy_evens", config=TakeConfig, view=toy_parity, select=toy_evens, reasons=("toy_odd",)),
    "toy_split": TransformStage(
        name="toy_split", config=SplitConfig, generate=toy_split, check=toy_check, reasons=("toy_odd_copy",)
    ),
    "toy_source": SourceStage(
        name="toy_source",
        config=SourceConfig,
        read=toy_read,
        reasons=("toy_bad",),
        describe_input=lambda cfg: f"toy-{cfg.count}",
    ),
    "toy_score": ItemStage(
        name="toy_score", config=ScoreConfig, score=toy_score, decide=toy_decide, reasons=("toy_low",)
    ),
    "toy_take": SetStage(name="toy_take", config=TakeConfig, select=toy_take, reasons=("toy_not_taken",)),
}


def make_run(tmp_path, score_config=None, take_config=None, extra=()) -> Path:
    recipe = Recipe(
        name="toy",
        description="toy",
        paper="none",
        stages=[
            StageSpec(stage="toy_source"),
            StageSpec(stage="toy_score", config=score_config or {}),
            StageSpec(stage="toy_take", config=take_config or {}),
            *extra,
        ],
        release=ReleaseSpec(name="toy", pretty_name="Toy"),
    )
    run_dir = tmp_path / "runs" / "toy-run"
    RunStore(run_dir).save_config(
        RunConfig(run_id="toy-run", recipe=recipe, demo=False, code_version="test", created_at=datetime.now(UTC))
    )
    return run_dir


@pytest.fixture(autouse=True)
def reset_calls():
    CALLS.clear()
    SEEN.clear()


def decisions(run_dir, index):
    folder = RunStore(run_dir).kept_path(index).parent
    return [json.loads(line) for line in open(folder / "decisions.jsonl")]


def test_every_item_gets_a_decision_and_failures_become_recorded_drops(tmp_path):
    run_dir = make_run(tmp_path, {"min_value": 2})
    stats = run_all(run_dir, registry=REGISTRY)
    assert [s.items_in for s in stats] == [8, 7, 3]
    assert stats[0].by_reason == {"toy_bad": 1}
    assert stats[1].by_reason == {"model_output_invalid": 1, "stage_error": 1, "toy_low": 2}
    by_id = {d["item_id"]: d for d in decisions(run_dir, 1)}
    assert by_id["s0003"]["detail"] == {"error_type": "ValueError", "message": "cannot score this one"}
    assert by_id["s0004"]["detail"]["raw_reply"] == '{"value": "seven"'
    assert by_id["s0001"] == {**by_id["s0001"], "kept": False, "reason": "toy_low", "scores": {"value": 1}}
    assert by_id["s0005"]["kept"] and by_id["s0005"]["scores"] == {"value": 5}
    folder = RunStore(run_dir).kept_path(1).parent
    dropped = [json.loads(line)["id"] for line in open(folder / "dropped.jsonl")]
    assert sorted(dropped) == ["s0000", "s0001", "s0003", "s0004"]  # dropped items are kept whole, not lost
    assert "toy_low 2" in funnel_text(load_report(run_dir))


def test_rerun_skips_completed_stages(tmp_path):
    run_dir = make_run(tmp_path)
    first = run_all(run_dir, registry=REGISTRY)
    CALLS.clear()
    second = run_all(run_dir, registry=REGISTRY)
    assert Counter() == CALLS and first == second


def test_threshold_change_replays_decisions_without_rescoring(tmp_path):
    run_all(make_run(tmp_path, {"min_value": 0}), registry=REGISTRY)
    CALLS.clear()
    run_dir = make_run(tmp_path, {"min_value": 6})
    stats = run_all(run_dir, registry=REGISTRY)
    assert CALLS["score"] == 0  # stored scores were reused
    assert CALLS["take"] == 1  # its input changed, so the next stage ran again
    assert stats[1].by_reason["toy_low"] == 4 and stats[2].items_in == 1


def test_scoring_parameter_change_rescores(tmp_path):
    run_all(make_run(tmp_path), registry=REGISTRY)
    CALLS.clear()
    run_all(make_run(tmp_path, {"multiplier": 2}), registry=REGISTRY)
    assert CALLS["score"] == 7


def test_a_stage_that_does_not_change_its_output_does_not_rerun_the_next(tmp_path):
    run_all(make_run(tmp_path, take_config={"keep_first": 100}), registry=REGISTRY)
    CALLS.clear()
    run_all(make_run(tmp_path, {"min_value": -5}, {"keep_first": 100}), registry=REGISTRY)
    assert Counter() == CALLS  # min_value -5 and 0 keep the same items: toy_take's input digest is unchanged


def test_server_down_fails_the_stage_and_a_rerun_resumes_with_the_same_result(tmp_path):
    expected = run_all(make_run(tmp_path / "clean"), registry=REGISTRY)
    run_dir = make_run(tmp_path / "broken", {"unavailable_after": 4})
    with pytest.raises(BackendUnavailable):
        run_all(run_dir, registry=REGISTRY)
    assert [entry.stage for entry in RunStore(run_dir).chain()] == ["toy_source"]
    assert not list((run_dir / "stages" / "02_toy_score").glob("*/DONE"))
    resumed = run_all(make_run(tmp_path / "broken"), registry=REGISTRY)
    assert [(s.items_in, s.kept, s.by_reason) for s in resumed] == [(s.items_in, s.kept, s.by_reason) for s in expected]


def test_undeclared_drop_reason_is_a_programming_error(tmp_path):
    registry = {
        **REGISTRY,
        "toy_take": SetStage(
            name="toy_take",
            config=TakeConfig,
            reasons=(),
            select=lambda items, cfg, ctx: [Drop(reason="surprise")] * len(items),
        ),
    }
    with pytest.raises(ValueError, match="undeclared reason 'surprise'"):
        run_all(make_run(tmp_path), registry=registry)


def test_stage_cannot_start_before_its_input_exists(tmp_path):
    with pytest.raises(RuntimeError, match="stage 1 is not complete"):
        run_stage(make_run(tmp_path), 1, registry=REGISTRY)


def test_transform_children_are_decided_and_their_producer_recorded(tmp_path):
    run_dir = make_run(tmp_path, extra=[StageSpec(stage="toy_split")])
    stats = run_all(run_dir, registry=REGISTRY)[-1]
    assert (stats.items_in, stats.kept, stats.by_reason, stats.backends) == (5, 5, {"toy_odd_copy": 5}, ["toy-backend"])
    rows = decisions(run_dir, 3)
    assert {row["item_id"] for row in rows} >= {"s0002/copy-0", "s0002/copy-1"}
    assert all(row["backend"] == "toy-backend" and row["prompt_id"] == "toy" for row in rows)


def test_a_stage_where_every_item_fails_is_not_marked_done(tmp_path):
    run_dir = make_run(tmp_path, extra=[StageSpec(stage="toy_split", config={"fail_all": True})])
    with pytest.raises(StageFailed, match="all 5 items failed.*broken for everyone"):
        run_all(run_dir, registry=REGISTRY)
    assert not list((run_dir / "stages" / "04_toy_split").glob("*/DONE"))
    assert [entry.stage for entry in RunStore(run_dir).chain()] == ["toy_source", "toy_score", "toy_take"]


def test_leftover_partial_folders_from_a_crash_are_replaced(tmp_path):
    run_dir = make_run(tmp_path)
    expected = run_all(run_dir, registry=REGISTRY)
    for done in list((run_dir / "stages").rglob("DONE")):
        folder = done.parent
        stale = folder.with_name(folder.name + ".partial")
        folder.rename(stale)
        (stale / "DONE").unlink()
        for written in stale.glob("*.jsonl"):
            written.write_text("half a line from a killed proc")

    def timeless(stats):
        return [entry.model_copy(update={"seconds": 0}) for entry in stats]

    assert timeless(run_all(run_dir, registry=REGISTRY)) == timeless(expected)
    assert not list((run_dir / "stages").rglob("*.partial"))


def test_a_changed_configuration_clears_the_chain_until_stages_revalidate(tmp_path):
    run_dir = make_run(tmp_path)
    run_all(run_dir, registry=REGISTRY)
    make_run(tmp_path, {"multiplier": 3})
    assert RunStore(run_dir).chain() == []
    assert load_report(run_dir).stages == []


def kept_items(run_dir, index):
    return list(RunStore(run_dir).kept(index))


def test_a_set_stage_with_a_view_decides_on_views_and_its_relabelling_reaches_the_whole_items(tmp_path):
    run_dir = make_run(tmp_path, extra=(StageSpec(stage="toy_mark"), StageSpec(stage="toy_evens")))
    run_all(run_dir, registry=REGISTRY)
    assert SEEN and all(type(view) is Keyed for view in SEEN)  # never a parsed Sample
    before, marked, evens = kept_items(run_dir, 2), kept_items(run_dir, 3), kept_items(run_dir, 4)
    assert [item.id for item in marked] == [item.id for item in before]
    for old, new in zip(before, marked):
        odd = int(old.id[1:]) % 2
        assert new.language == ("odd" if odd else None)
        assert new.scores == ({**old.scores, "toy_mark": {"parity": 1}} if odd else old.scores)
        assert new.model_copy(update={"language": None, "scores": old.scores}) == old  # nothing else changed
    # the streaming runner gives what the stage gives on items in memory
    assert marked == REGISTRY["toy_mark"].decide(before, TakeConfig(), None)[0]
    assert [item.id for item in evens] == [item.id for item in marked if int(item.id[1:]) % 2 == 0]
    dropped = [row for row in decisions(run_dir, 4) if not row["kept"]]
    assert dropped and all(row["reason"] == "toy_odd" and row["detail"]["id"] == row["item_id"] for row in dropped)


def test_a_view_stage_cannot_both_relabel_and_select():
    with pytest.raises(ValueError, match="split the stage"):
        SetStage(name="both", config=TakeConfig, view=toy_parity, relabel=toy_mark, select=toy_evens)

"""ProBench's judgements and tracks: blindness drops, challenge ranks, interdependency, track sizes; whole recipe."""

import hashlib
import itertools
import json
import random

import pytest

from benchcurate.curation.core.cache import Cache
from benchcurate.curation.engine.runner import run_all
from benchcurate.curation.engine.stage import StageContext
from benchcurate.curation.engine.store import RunStore
from benchcurate.curation.models.offline import OfflineBackend
from benchcurate.curation.report.run import load_report
from benchcurate.curation.selection import tracks
from benchcurate.curation.text import judgements
from benchcurate.schemas import Categories, Keep, Scores, Turn
from tests.factories import make_image, make_sample
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import resolve


def context(tmp_path):
    return StageContext(
        run_dir=tmp_path,
        stage="probench_tracks",
        run_seed=3,
        backend=OfflineBackend(),
        cache=Cache(tmp_path / "c.sqlite"),
    )


def item(seed, language="en", turns=1, rank=None, independent=None, field=None):
    conversation = []
    for number in range(turns):
        conversation += [
            Turn(speaker="user", utterance=f"question {number} of item {seed}"),
            Turn(speaker="assistant", utterance="answer"),
        ]
    scores = {}
    if rank is not None:
        scores["challenge_rank"] = {"combined": rank, "rule": "mean", "level": "hard" if rank >= 6 else "easy"}
    if independent is not None:
        scores["interdependency_check"] = {"independent": independent, "reasoning": "r"}
    return make_sample(
        seed,
        language=language,
        conversation=conversation[:-1] if turns == 1 else conversation,
        scores=scores,
        categories=Categories(task_main=field),
    )


def test_tracks_route_by_language_and_turns_and_keep_the_hardest(tmp_path):
    items = (
        [item(k, field="Coding", rank=k % 10) for k in range(30)]
        + [item(100 + k, field="Planning", rank=5) for k in range(4)]
        + [item(200 + k, turns=3, rank=k, independent=k % 2 == 0) for k in range(10)]
        + [item(300 + k, language="pt", rank=k) for k in range(5)]
        + [item(400 + k, language="zh", rank=k) for k in range(3)]
        + [item(500, language="unknown")]
    )
    cfg = tracks.TracksConfig(
        single_round_total=14, multi_round_interconnected=2, multi_round_independent=1, per_language_group=2
    )
    ctx = context(tmp_path)
    routed = tracks.relabel(items, cfg, ctx)
    verdicts = tracks.select(routed, cfg, ctx)
    kept = [sample for sample, verdict in zip(routed, verdicts) if verdict == Keep()]
    by_track = {}
    for sample in kept:
        by_track.setdefault(sample.track, []).append(sample)
    assert len(by_track["singleround"]) == 14
    fields = [s.categories.task_main for s in by_track["singleround"]]
    assert fields.count("Planning") == 4 and fields.count("Coding") == 10  # water-filling: the small field whole
    coding = sorted(
        (s.scores["challenge_rank"]["combined"] for s in by_track["singleround"] if s.categories.task_main == "Coding"),
        reverse=True,
    )
    assert coding == [9, 9, 9, 8, 8, 8, 7, 7, 7, 6]  # the hardest Coding items
    multi = by_track["multi-round"]
    assert len(multi) == 3 and sum(s.scores["interdependency_check"]["independent"] for s in multi) == 1
    assert sorted(s.language for s in by_track["multi-linguistic"]) == ["pt", "pt", "zh", "zh"]
    reasons = {verdict.reason for verdict in verdicts if verdict != Keep()}
    assert reasons == {"not_selected", "language_unknown"}
    assert ctx.summary["quotas"]["multi-linguistic/pt"] == 2 and ctx.summary["single_round_cap"] == 10


def test_rank_rules_and_the_hard_threshold_are_decisions_on_stored_scores():
    scores = Scores(values={"textual": 3, "image": 9, "reasoning": 6})
    sample = make_sample(1)
    mean = judgements.challenge_apply(sample, scores, judgements.ChallengeConfig())
    strict = judgements.challenge_apply(sample, scores, judgements.ChallengeConfig(rank_rule="max", hard_threshold=9))
    assert mean.scores["challenge_rank"] == {"combined": 6.0, "rule": "mean", "level": "hard"}
    assert strict.scores["challenge_rank"]["combined"] == 9 and mean.challenge.image == 9


def test_the_transcript_shows_references_only_to_the_judges_that_need_them():
    sample = make_sample(
        1,
        history=[Turn(speaker="user", utterance="q0"), Turn(speaker="assistant", utterance="a0")],
        conversation=[Turn(speaker="user", utterance="q1", reference="r1")],
    )
    assert judgements.transcript(sample) == "USER: q0\nASSISTANT: a0\nUSER: q1\nREFERENCE ANSWER: r1"
    assert "REFERENCE" not in judgements.transcript(sample, with_references=False)


BLIND = itertools.count()
WORDS = [
    "harbor",
    "ledger",
    "violet",
    "turbine",
    "orchard",
    "glacier",
    "copper",
    "lantern",
    "meadow",
    "pixel",
    "canyon",
    "velvet",
    "quartz",
    "saddle",
    "beacon",
    "thistle",
    "marble",
    "cobalt",
    "falcon",
    "juniper",
]


def judge(body):
    """Distinct questions per image; blindness YES for every other item (so about half go)."""
    name = body.get("response_format", {}).get("json_schema", {}).get("name")
    text = json.dumps(body["messages"])
    if name == "YesNoReply" and "from the text alone" in text:
        return {"reasoning": "r", "decision": "YES" if next(BLIND) % 2 else "NO"}
    if name == "SeedQuestionReply":
        rng = random.Random(hashlib.sha256(text.encode()).hexdigest())
        return {
            "task": "Chart",
            "question": " ".join(rng.sample(WORDS, 8)) + " - which of these is shown here?",
            "reference_answer": "The first.",
        }
    return None


@pytest.mark.slow
def test_the_recipe_runs_against_the_loopback_server_with_every_drop_reason_in_the_funnel(tmp_path):
    for seed in range(8):
        make_image(tmp_path / "images" / f"{seed}.png", seed)
    with FakeOpenAIServer(responder=judge) as server:
        config = resolve(
            "probench",
            tmp_path / "out",
            input_path=str(tmp_path / "images"),
            run_id="pb",
            backend="openai",
            base_url=server.base_url,
            model="fake-vlm",
        )
        store = RunStore(tmp_path / "out" / "runs" / "pb")
        store.save_config(config)
        run_all(store.root)
    report = load_report(store.root)
    assert report.complete
    stats = {s.stage: s for s in report.stages}
    assert stats["text_near_dedup"].kept == 8
    blind = stats["blindness_check"]
    assert blind.by_reason == {"answerable_without_image": 4} and blind.kept == 4
    assert all(s.dropped == sum(s.by_reason.values()) for s in report.stages)
    assert stats["challenge_score"].usage["fake-vlm"].calls == stats["challenge_score"].items_in

"""`curate eval`: every protocol's arithmetic on hand-computed cases, its parsers on clean and noisy replies, and
whole evaluations of real releases through the loopback OpenAI-protocol server, whose judge prefers answers that
carry a marker that the models under test put in a planted share of their answers."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from benchcurate.curation.core.errors import StageWaiting
from benchcurate.curation.evaluation import judging
from benchcurate.curation.evaluation.alignmmbench import ALIGNMMBENCH
from benchcurate.curation.evaluation.convbench import CONVBENCH
from benchcurate.curation.evaluation.engine import NothingScored, evaluate, write_leaderboard
from benchcurate.curation.evaluation.judging import (
    Battle,
    online_elo,
    pb_bradley_terry,
    read_checklist,
    read_quality,
    two_player_rating,
)
from benchcurate.curation.evaluation.multiverse import MULTIVERSE
from benchcurate.curation.evaluation.probench import PROBENCH
from benchcurate.curation.evaluation.statistics import agreement, bootstrap_interval, slope
from benchcurate.curation.models.prompting import load_prompt
from benchcurate.curation.release.reading import open_release, rows
from benchcurate.schemas.evaluation import EvalOptions, Judgment
from tests.fakes.judges import MARK, marked, marker_world, text_of
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import compact, curate_in_process, eval_releases, replicated_release

MODELS = ("candidate-vlm", "better-vlm", "judge-vlm", "baseline-vlm")


def server_for(shares: dict[str, float], **more) -> FakeOpenAIServer:
    return FakeOpenAIServer(responder=marker_world(shares, **more), models=MODELS)


def options(release, server, out, model="candidate-vlm", **more) -> EvalOptions:
    return EvalOptions(
        release=str(release),
        candidate={"model": model, "base_url": server.base_url},
        judge={"model": "judge-vlm", "base_url": server.base_url},
        out=str(out),
        **more,
    )


def results_of(folder) -> tuple[dict, list[dict]]:
    return (
        json.loads((folder / "results.json").read_text()),
        [json.loads(line) for line in (folder / "judgments.jsonl").read_text().splitlines()],
    )


def user_questions(row: dict) -> list[str]:
    return [turn["utterance"] for turn in row["conversation"] if turn["speaker"] == "user"]


@pytest.fixture(scope="module")
def releases():
    return eval_releases()


def release_rows(folder) -> list[dict]:
    return list(rows(open_release(folder), "test"))


# --- parsers ------------------------------------------------------------------------------------------------------


def test_parsers_read_the_papers_formats_and_refuse_the_rest():
    assert read_quality('{"score": 7}') == 7 and read_quality('```json\n{"score": "9"}\n```') == 9
    for bad in ('{"score": 11}', '{"score": 6.5}', "seven"):
        with pytest.raises(ValueError):
            read_quality(bad)
    assert read_checklist("Q1: Yes\nQ2: no\n3. YES", 3) == [True, False, True]
    with pytest.raises(ValueError, match="Q2"):
        read_checklist("Q1: Yes\nQ3: No", 3)
    # ConvBench: the last verdict counts; a tie or no choice is unreadable
    assert judging.read_cb_verdict("A is fine. Overall, Response B is better.") == "B"
    assert judging.read_cb_verdict("**Overall, Response A is better.**") == "A"
    for bad in ("Both are equally good.", "Overall, Response C is better."):
        with pytest.raises(ValueError):
            judging.read_cb_verdict(bad)
    assert judging.read_cb_rating("Good answer. Rating:{7}") == 7 and judging.read_cb_rating("Rating: 10.") == 10
    for bad in ("Rating: 0", "Rating: 7.5", "I rate it seven"):
        with pytest.raises(ValueError):
            judging.read_cb_rating(bad)
    # ProBench: five labels, spaces tolerated, the last one counts
    assert judging.read_pb_verdict("[[A>B]] at first, but on reflection [[ B >> A ]]") == "B>>A"
    for bad in ("A is better", "[[A>>>B]]", "[[C>A]]"):
        with pytest.raises(ValueError):
            judging.read_pb_verdict(bad)
    # AlignMMBench: JSON {Rating, Reason}, also with a full-width colon or quotes around the number
    assert judging.read_amb_rating('{"Rating": 8, "Reason": "对"}') == 8
    assert judging.read_amb_rating('```{"Rating"："6"}```') == 6
    for bad in ('{"Rating": 11}', '{"Reason": "none"}', "评分：七"):
        with pytest.raises(ValueError):
            judging.read_amb_rating(bad)


# --- arithmetic on hand-computed cases ------------------------------------------------------------------------------


def test_multiverse_arithmetic_on_hand_computed_turns():
    def turn(sample, number, completion, quality, goal):
        return Judgment(
            sample_id=sample,
            turn=number,
            question="q",
            groups={"goal": goal},
            scores={
                "checklist_completion": 100 * completion,
                "quality": 10 * quality,
                "score": completion * 10 * quality,
            },
        )

    judgments = [
        turn("a", 1, 0.5, 8, "Plan"),
        turn("a", 2, 1.0, 6, "Plan"),
        turn("b", 1, 0.75, 4, "Learn"),
        Judgment(sample_id="b", turn=2, question="q", failure="judge_unreadable_reply"),
    ]
    result = MULTIVERSE.aggregate(judgments)
    # turn scores: 0.5*80 = 40, 1.0*60 = 60, 0.75*40 = 30; the failed turn counts in no mean
    assert result.score == pytest.approx((40 + 60 + 30) / 3)
    assert result.sub_scores["per_turn"] == {"1": 35.0, "2": 60.0} and result.sub_scores["per_turn_slope"] == 25.0
    assert result.sub_scores["per_goal"] == {"Learn": 30.0, "Plan": 50.0}
    assert result.sub_scores["checklist_completion"] == pytest.approx(75.0)
    assert result.sub_scores["quality"] == pytest.approx(60.0)
    assert result.interval.low <= result.score <= result.interval.high
    assert slope({1: 1.0, 2: 2.0, 3: 3.0}) == 1.0 and bootstrap_interval({"only": [5.0]}) is None


def _cb(sample, setting, turn, **scores):
    return Judgment(
        sample_id=sample,
        turn=turn,
        setting=setting,
        question="q",
        groups={"score": judging.CB_SCORE_NAMES[(setting, turn)]},
        scores=scores,
    )


def test_convbench_nine_scores_r1_and_r2_by_hand():
    # two samples; in setting (i) the model wins turn 1 of both, turn 2 of one, turn 3 of none, the whole of one
    wins = {
        ("own", 1): (1, 1),
        ("own", 2): (1, 0),
        ("own", 3): (0, 0),
        ("own", 0): (1, 0),
        ("perception", 2): (1, 1),
        ("perception", 3): (1, 0),
        ("perception", 0): (1, 1),
        ("perception_reasoning", 3): (1, 1),
        ("perception_reasoning", 0): (0, 1),
    }
    judgments = [
        _cb(sample, setting, turn, win=float(outcome[k]))
        for (setting, turn), outcome in wins.items()
        for k, sample in enumerate(("a", "b"))
    ]
    result = CONVBENCH.aggregate(judgments)
    scores = result.sub_scores["scores"]
    assert (scores["S1"], scores["S2"], scores["S3"], scores["S0"]) == (100.0, 50.0, 0.0, 50.0)
    assert (scores["S^2"], scores["S^3"], scores["S^0"], scores["S~3"], scores["S~0"]) == (100, 50, 100, 100, 50)
    assert scores["R2"] == 50.0 and scores["R1"] == 50.0 == result.score  # R2 = (100+50+0)/3, R1 = (R2+S0)/2
    # Table 1's brackets: perfect perception against own history, then perfect reasoning on top of perception
    assert result.sub_scores["gains_from_gold_history"] == {
        "S^2 - S2": 50.0,
        "S^3 - S3": 50.0,
        "S^0 - S0": 50.0,
        "S~3 - S^3": 50.0,
        "S~0 - S^0": -50.0,
    }
    # direct grading: the same formulas over mean ratings
    direct = [_cb("a", "own", turn, rating=rating) for turn, rating in ((1, 8.0), (2, 6.0), (3, 4.0), (0, 7.0))]
    scores = CONVBENCH.aggregate(direct).sub_scores["scores"]
    assert scores["R2"] == 6.0 and scores["R1"] == 6.5


def test_elo_and_bradley_terry_on_known_outcomes():
    # one win from equal ratings: each moves by K * (1 - 0.5) = 16
    assert online_elo([Battle("m", "b", 1.0)]) == {"m": 1016.0, "b": 984.0}
    # a tie between equals changes nothing; a second battle uses the updated ratings
    ratings = online_elo([Battle("m", "b", 1.0), Battle("m", "b", 0.0)])
    assert ratings["m"] == pytest.approx(1016 - 32 * (1 / (1 + 10 ** (-32 / 400))))
    # Bradley-Terry between two players: the odds are the ratio of (weighted) wins: 3 in 4 gives odds 3
    assert two_player_rating(3, 1, 1114.0) == pytest.approx(1114 + 400 * math.log10(3), abs=1e-6)
    # ProBench's rating from verdict tallies: a prior tied battle shared by the two keeps a clean sweep finite
    assert pb_bradley_terry([(4, 0, 4, 4)]) == pytest.approx(1114 + 400 * math.log10(4.25 / 0.25), abs=1e-6)


def test_probench_verdicts_from_the_models_side_and_its_aggregate():
    assert judging.pb_margin("A>>B", "model_first") == 2 and judging.pb_margin("A>>B", "baseline_first") == -2
    assert judging.pb_margin("A=B", "baseline_first") == 0
    # sample a: the model wins clearly in both orders; b: a slight loss and a tie
    judgments = [
        Judgment(
            sample_id=sample,
            turn=0,
            setting=order,
            question="q",
            groups={"language": language},
            scores={"margin": float(margin)},
        )
        for sample, order, margin, language in (
            ("a", "model_first", 2, "en"),
            ("a", "baseline_first", 2, "en"),
            ("b", "model_first", -1, "fr"),
            ("b", "baseline_first", 0, "fr"),
        )
    ]
    result = PROBENCH.aggregate(judgments)
    assert result.sub_scores["win_rate"]["value"] == pytest.approx(100 * (1 + 1 + 0 + 0.5) / 4)
    # battles: 3 + 3 wins, 1 loss, 1 tie (weight 1), plus the prior of half a tie
    expected = 1114 + 400 * math.log10((6 + 0.5 + 0.25) / (1 + 0.5 + 0.25))
    assert result.score == pytest.approx(expected, abs=0.01)
    assert result.sub_scores["verdicts_from_the_models_side"] == {"A>>B": 2, "A>B": 0, "A=B": 1, "B>A": 1, "B>>A": 0}
    assert result.sub_scores["ours"]["order_consistency"] == 50.0
    assert set(result.sub_scores["by_language"]) == {"en", "fr"}
    assert result.sub_scores["by_language"]["fr"]["win_rate"]["value"] == 25.0
    assert result.sub_scores["by_language"]["fr"]["bradley_terry"]["interval"] is None  # one sample: no interval


def test_alignmmbench_headline_is_the_mean_of_task_means_and_the_spread_over_rewrites_is_ours():
    def judged(sample, variant, task, rating):
        return Judgment(
            sample_id=sample,
            turn=1,
            setting=f"variant-{variant}",
            question="q",
            groups={"task": task, "category": "Perception & Understanding"},
            scores={"rating": rating},
        )

    judgments = [
        judged("a", 0, "Counting", 9),
        judged("a", 1, "Counting", 3),
        judged("a", 2, "Counting", 6),
        judged("b", 0, "OCR", 8),
        judged("b", 1, "OCR", 8),
        judged("c", 0, "OCR", 2),
        judged("d", 0, "OCR", 10),
    ]
    result = ALIGNMMBENCH.aggregate(judgments)
    # Table 3's Avg: Counting (9+3+6)/3 = 6, OCR (8+8+2+10)/4 = 7, their mean 6.5; per question 46/7
    assert result.score == 6.5 and result.sub_scores["per_task"] == {"Counting": 6.0, "OCR": 7.0}
    assert result.sub_scores["per_question_mean"] == pytest.approx(46 / 7, abs=1e-4)
    assert result.sub_scores["seed_questions_only"] == pytest.approx(29 / 4, abs=1e-4)
    ours = result.sub_scores["ours"]
    assert "not the paper's" in ours["note"] and "robustness" not in json.dumps(result.sub_scores)
    assert ours["seed_questions_with_rewrites"] == 2 and ours["spread_mean_range"] == 3.0  # a: 9-3, b: 0
    assert ours["spread_mean_range_per_task"] == {"Counting": 6.0, "OCR": 0.0}
    assert ours["spread_mean_stdev"] == pytest.approx(math.sqrt(6) / 2, abs=1e-4)  # a: pstdev(9, 3, 6) = sqrt(6)
    assert result.interval.low <= result.score <= result.interval.high
    parts = load_prompt("judge_amb_rating", 1).parts
    assert judging.amb_rule(parts, "计数").startswith("- What matters is whether the count")
    assert judging.amb_rule(parts, "something new") == judging.amb_rule(parts, "General") == parts["General"]


def test_agreement_percent_and_cohens_kappa():
    # 10 items: 7 agree; rater 1 says yes 6 times, rater 2 yes 5 times: chance = (6*5 + 4*5) / 100 = 0.5
    pairs = [("yes", "yes")] * 4 + [("no", "no")] * 3 + [("yes", "no")] * 2 + [("no", "yes")]
    found = agreement(pairs)
    assert found["percent_agreement"] == 70.0 and found["cohen_kappa"] == pytest.approx((0.7 - 0.5) / 0.5)
    assert agreement([])["cohen_kappa"] is None


# --- whole evaluations on real releases ---------------------------------------------------------------------------


@pytest.mark.slow
def test_multiverse_scores_the_planted_share_and_a_rerun_pays_for_nothing(releases, tmp_path):
    share = 0.4
    with server_for({"candidate-vlm": share}) as server:
        folder = evaluate(options(releases["multiverse"], server, tmp_path / "evals"))
        served = server.completions_served
        results, judgments = results_of(folder)
        again = evaluate(options(releases["multiverse"], server, tmp_path / "evals"))
        assert server.completions_served == served  # every reply came from the cache
    assert again == folder and folder.parents[1].name == "0.1.0" and folder.parent.name == "candidate-vlm"
    assert folder.name == "test.history-oracle.judge-judge-vlm"
    rerun, _ = results_of(again)
    assert rerun["score"] == results["score"] and rerun["usage"]["candidate-vlm"]["calls"] == 0
    assert rerun["usage"]["candidate-vlm"]["cached_calls"] == len(judgments)
    expected = 100 * sum(marked(j["question"], share) for j in judgments) / len(judgments)
    assert 0 < expected < 100 and results["score"] == pytest.approx(expected)
    assert results["failures"] == {} and results["turns_judged"] == len(judgments) == served // 3
    assert results["usage"]["candidate-vlm"]["calls"] == len(judgments)
    assert results["usage"]["judge-vlm"]["calls"] == 2 * len(judgments)
    assert set(results["prompts"]) == {"eval_answer@1", "judge_mv_quality@1", "judge_mv_checklist@1"}
    assert results["history"] == "oracle" and results["release_checksums_sha256"]
    assert results["interval"]["low"] <= results["score"] <= results["interval"]["high"]
    assert all(j["judge"]["quality"]["raw"] and j["judge"]["checklist"]["read"] for j in judgments)
    board = compact((folder.parents[1] / "LEADERBOARD.md").read_text())
    assert "| 1 | candidate-vlm |" in board and "judge-vlm" in board


@pytest.mark.slow
def test_an_unreadable_judge_is_asked_once_more_then_counted_as_a_failure(releases, tmp_path):
    with server_for({"candidate-vlm": 0.5}, broken_judge=True) as server:
        with pytest.raises(NothingScored, match="every judged turn failed .judge_unreadable_reply") as raised:
            evaluate(options(releases["multiverse"], server, tmp_path / "evals", limit=2))
        folder = raised.value.folder
        served = server.completions_served
    results, judgments = results_of(folder)
    turns = results["failures"]["judge_unreadable_reply"]
    assert results["score"] is None and results["turns_judged"] == 0 and turns >= 2
    assert served == turns * (1 + 2)  # the answer, then the quality judge asked twice
    assert judgments[0]["judge"]["failed"]["raw"] == "I would rather not say." and "asked" in judgments[0]["detail"]


@pytest.mark.slow
def test_self_history_sends_the_models_own_answers(releases, tmp_path):
    seen = []
    with server_for({"candidate-vlm": 1.0}, seen=seen) as server:
        evaluate(options(releases["multiverse"], server, tmp_path / "evals", limit=1, history="self"))
    later = [body["messages"] for body in seen if body["model"] == "candidate-vlm" and len(body["messages"]) > 1]
    assert later and all(MARK in text_of(messages[1]) for messages in later)  # its own answer, not the reference


@pytest.mark.slow
def test_convbench_three_settings_pairwise_text_only_judge(releases, tmp_path):
    share = 0.5
    seen = []
    with server_for({"candidate-vlm": share}, seen=seen) as server:
        folder = evaluate(options(releases["convbench"], server, tmp_path / "evals"))
    results, judgments = results_of(folder)
    data = release_rows(releases["convbench"])
    assert results["failures"] == {} and results["grading"] == "pairwise"
    assert len(judgments) == 9 * len(data)  # S1 S2 S3 S0, S^2 S^3 S^0, S~3 S~0 per sample
    scores = results["sub_scores"]["scores"]
    for name, turn in (("S1", 1), ("S2", 2), ("S3", 3), ("S^2", 2), ("S^3", 3), ("S~3", 3)):
        expected = 100 * sum(marked(user_questions(row)[turn - 1], share) for row in data) / len(data)
        assert scores[name] == pytest.approx(expected), name
    own_any = 100 * sum(any(marked(q, share) for q in user_questions(row)) for row in data) / len(data)
    assert scores["S0"] == pytest.approx(own_any)
    r2 = (scores["S1"] + scores["S2"] + scores["S3"]) / 3
    assert results["score"] == pytest.approx((r2 + scores["S0"]) / 2)
    # the judge never saw the image and read the caption; the model saw it; 6 answers per sample (3 + 2 + 1)
    judge_bodies = [body for body in seen if body["model"] == "judge-vlm"]
    assert len(judge_bodies) == 9 * len(data)
    assert not any(
        part.get("type") == "image_url"
        for body in judge_bodies
        for message in body["messages"]
        if isinstance(message["content"], list)
        for part in message["content"]
    )
    captions = {row["caption"] for row in data}
    assert all(
        text_of(body["messages"][-1]).split("Image description:\n", 1)[1].split("\n\n<|The Start", 1)[0] in captions
        for body in judge_bodies
    )
    assert results["usage"]["candidate-vlm"]["calls"] == 6 * len(data)
    # both presentation orders occur
    sides = {j["judge"]["pairwise"]["model_was"] for j in judgments}
    assert sides == {"A", "B"}


@pytest.mark.slow
def test_convbench_direct_grading(releases, tmp_path):
    with server_for({"candidate-vlm": 1.0}) as server:
        folder = evaluate(options(releases["convbench"], server, tmp_path / "evals", grading="direct", limit=2))
    results, _ = results_of(folder)
    assert results["grading"] == "direct" and results["sub_scores"]["unit"] == "mean rating 1-10"
    assert results["sub_scores"]["scores"]["S1"] == 10.0 and results["score"] == 10.0


@pytest.mark.slow
def test_probench_both_orders_and_the_baseline_model(releases, tmp_path):
    data = release_rows(releases["probench"])
    with server_for({"candidate-vlm": 1.0, "baseline-vlm": 0.0}) as server:
        stored = evaluate(options(releases["probench"], server, tmp_path / "evals"))
        other = evaluate(
            options(
                releases["probench"],
                server,
                tmp_path / "evals2",
                baseline={"model": "baseline-vlm", "base_url": server.base_url},
            )
        )
    results, judgments = results_of(stored)
    assert len(judgments) == 2 * len(data) and {j["setting"] for j in judgments} == {"model_first", "baseline_first"}
    assert (
        results["sub_scores"]["win_rate"]["value"] == 100.0 and results["baseline"] == "the release's baseline answers"
    )
    assert results["score"] > 1114 + 400  # every battle won, three times over
    against_model, _ = results_of(other)
    assert against_model["baseline"] == "model baseline-vlm" and against_model["usage"]["baseline-vlm"]["calls"] > 0


@pytest.mark.slow
def test_alignmmbench_judges_every_kept_rewrite_after_the_given_history(releases, tmp_path):
    data = release_rows(releases["alignmmbench"])
    seen = []
    with server_for({"candidate-vlm": 0.5}, seen=seen) as server:
        folder = evaluate(options(releases["alignmmbench"], server, tmp_path / "evals"))
    results, judgments = results_of(folder)
    variants = sum(1 + sum(1 for r in row["rewrites"] if r["status"] != "rejected") for row in data)
    assert len(judgments) == variants and results["failures"] == {}
    ratings = {}
    for j in judgments:
        ratings.setdefault(j["groups"]["task"], []).append(10 if marked(j["question"], 0.5) else 2)
    task_means = [sum(found) / len(found) for found in ratings.values()]
    assert results["score"] == pytest.approx(sum(task_means) / len(task_means), abs=1e-3)
    assert results["sub_scores"]["ours"]["seed_questions_with_rewrites"] > 0
    with_history = [row for row in data if row["history"]]
    for row in with_history:  # the given history goes before the question, as chat turns
        asked = [
            b for b in seen if b["model"] == "candidate-vlm" and user_questions(row)[0] in text_of(b["messages"][-1])
        ]
        assert asked and text_of(asked[0]["messages"][0]) == row["history"][0]["utterance"]


@pytest.mark.slow
def test_planted_share_within_two_points_and_elo_orders_two_models(releases, tmp_path):
    """500 samples: the reported win rate is the planted share, and two models' intervals do not overlap."""
    big = replicated_release(releases["probench"], 500, tmp_path / "big")
    found = {}
    with server_for({"candidate-vlm": 0.3, "better-vlm": 0.7}) as server:
        for model in ("candidate-vlm", "better-vlm"):
            found[model], _ = results_of(
                evaluate(options(big, server, tmp_path / "evals", model=model, concurrency=32))
            )
    data = release_rows(big)
    for model, share in (("candidate-vlm", 0.3), ("better-vlm", 0.7)):
        planted = 100 * sum(marked(user_questions(row)[-1], share) for row in data) / len(data)
        assert abs(planted - 100 * share) < 6  # the draw per question text lands near the share
        assert abs(found[model]["sub_scores"]["win_rate"]["value"] - planted) <= 2
    weak, strong = found["candidate-vlm"], found["better-vlm"]
    assert weak["interval"]["high"] < strong["interval"]["low"]  # the headline: Bradley-Terry on the ELO scale
    # the online update (K = 32) depends on the battles' order, so its interval is wide; its value still orders them
    assert weak["sub_scores"]["elo_online"]["value"] < strong["sub_scores"]["elo_online"]["value"]
    board = (tmp_path / "evals" / "probench-curated" / "0.1.0" / "LEADERBOARD.md").read_text()
    assert board.index("better-vlm") < board.index("candidate-vlm")


@pytest.mark.slow
def test_leaderboard_ranks_models_best_first(releases, tmp_path):
    with server_for({"candidate-vlm": 0.2, "better-vlm": 0.9}) as server:
        for model in ("candidate-vlm", "better-vlm"):
            evaluate(options(releases["multiverse"], server, tmp_path / "evals", model=model, limit=3))
    board_path = next((tmp_path / "evals").rglob("LEADERBOARD.md"))
    board = board_path.read_text()
    assert board.index("better-vlm") < board.index("candidate-vlm")
    assert write_leaderboard(board_path.parent).read_text() == board  # rewritten the same


def test_cli_refuses_what_it_cannot_score(releases, tmp_path):
    release = releases["multiverse"]
    not_release = curate_in_process(["eval", str(tmp_path), "--model", "m", "--judge-model", "j"])
    assert not_release.returncode == 2 and "is not a release folder" in not_release.stderr
    bad = curate_in_process(["eval", str(release), "--model", "m", "--judge-model", "j", "--history", "mine"])
    assert bad.returncode == 2 and "history" in bad.stderr
    wrong = curate_in_process(
        [
            "eval",
            str(releases["probench"]),
            "--model",
            "m",
            "--judge-model",
            "j",
            "--history",
            "self",
            "--out",
            str(tmp_path / "evals"),
        ]
    )
    assert wrong.returncode == 2 and "--history does not apply to a probench release" in wrong.stderr
    down = curate_in_process(
        [
            "eval",
            str(release),
            "--model",
            "m",
            "--judge-model",
            "j",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--judge-base-url",
            "http://127.0.0.1:9/v1",
            "--out",
            str(tmp_path / "evals"),
        ]
    )
    assert down.returncode == 3 and "cannot reach the model server" in down.stderr


@pytest.mark.slow
def test_batch_mode_sends_every_call_through_the_batch_api_and_scores_the_same(releases, tmp_path):
    """--batch: a round of batches per call a sample waits for; nothing is sent directly, the scores equal a
    direct eval's, and a round not back in time leaves the eval waiting, to be picked up by the same command."""
    with server_for({"candidate-vlm": 0.5}) as server:
        direct, _ = results_of(evaluate(options(releases["multiverse"], server, tmp_path / "direct", limit=3)))
        server.reset()
        server.batch_seconds = 0
        batched = options(
            releases["multiverse"], server, tmp_path / "batched", limit=3, batch=True, batch_poll_seconds=0.05
        )
        found, _ = results_of(evaluate(batched))
        assert server.completions_served == 0 and server.batch_lines_served == found["turns_judged"] * 3
        # 4 turns x (answer, quality, checklist), each round one batch per role that asked
        assert server.batches_created == 4 * 3
    assert found["score"] == direct["score"] and found["usage"]["judge-vlm"]["batch_calls"] > 0
    with server_for({"candidate-vlm": 0.5}) as server:
        server.batch_seconds = 5
        slow = options(
            releases["multiverse"],
            server,
            tmp_path / "slow",
            limit=1,
            batch=True,
            batch_wait_seconds=0,
            batch_poll_seconds=0.05,
        )
        with pytest.raises(StageWaiting, match="still running"):
            evaluate(slow)
        created = server.batches_created
        with pytest.raises(StageWaiting):
            evaluate(slow)  # polled again, not submitted again
        assert server.batches_created == created == 1


def pb_judged(sample, margin, length, order="model_first"):
    return Judgment(
        sample_id=sample,
        turn=0,
        setting=order,
        question="q",
        groups={},
        scores={
            "margin": float(margin),
            "style_length": length,
            "style_headers": 0.0,
            "style_lists": 0.0,
            "style_bold": 0.0,
        },
    )


def test_style_control_needs_several_models_and_then_takes_away_wins_that_go_with_length():
    # one model that wins 3% of its battles, always writing more than the baseline: no number, a reason
    weak = [pb_judged(f"s{k}", 1 if k < 3 else -1, 0.5 + 0.004 * k) for k in range(100)]
    alone = PROBENCH.aggregate(weak).sub_scores["bradley_terry_style_controlled"]
    assert alone["value"] is None and "not identifiable" in alone["note"]
    # x wins 90% where it wrote more and half where it did not; y, never longer, wins half: x is plainly better,
    # but not once length is taken out; both then sit at the baseline, as even as they are at equal length
    x = [pb_judged(f"s{k}", 1 if k % 10 else -1, 0.8) for k in range(40)]
    x += [pb_judged(f"t{k}", 1 if k % 2 else -1, 0.0) for k in range(40)]
    y = [pb_judged(f"u{k}", 1 if k % 2 else -1, 0.0) for k in range(80)]
    plain = {name: PROBENCH.aggregate(found).score for name, found in (("x", x), ("y", y))}
    fitted = PROBENCH.across_models({"x": x, "y": y})
    styled = {name: fitted[name]["bradley_terry_style_controlled"] for name in ("x", "y")}
    assert plain["x"] - plain["y"] > 100
    assert abs(styled["x"]["value"] - styled["y"]["value"]) < 25 and abs(styled["y"]["value"] - 1114) < 25
    assert styled["x"]["interval"][0] <= styled["x"]["value"] <= styled["x"]["interval"][1]
    # styles that move in lockstep with the models: not identifiable either
    lockstep = PROBENCH.across_models({"x": x[:40], "y": y})
    assert "lockstep" in lockstep["x"]["bradley_terry_style_controlled"]["note"]
    assert judging.pb_style(["# Plan\n- **one**\n- two"], ["one two"]) == {
        "length": pytest.approx((6 - 2) / (6 + 2)),
        "headers": 1.0,
        "lists": 1.0,
        "bold": 1.0,
    }


def test_online_elo_is_the_median_over_many_battle_orders():
    even = [(1, -1)] * 30 + [(-1, 1)] * 30  # every sample: a win in one order, a loss in the other
    result = PROBENCH.aggregate(
        [
            pb_judged(f"s{k}", margin, 0.0, order)
            for k, pair in enumerate(even)
            for margin, order in zip(pair, ("model_first", "baseline_first"))
        ]
    )
    elo = result.sub_scores["elo_online"]
    assert abs(elo["value"] - 1114) < 15 and elo["interval"][0] < 1114 < elo["interval"][1]
    assert elo["interval"][1] - elo["interval"][0] > 20 and "orders" in elo["note"]
    orders = judging.pb_online_elo_orders(even, orders=50)
    assert len(set(orders)) > 10 and judging.pb_online_elo(even, orders=50) == statistics.median(orders)


def test_a_judge_that_favours_a_position_is_named_in_a_warning():
    # the judge always picks A: the model wins when shown first and loses when shown second
    judgments = [
        pb_judged(f"s{k}", margin, 0.0, order)
        for k in range(40)
        for margin, order in ((2, "model_first"), (-2, "baseline_first"))
    ]
    result = PROBENCH.aggregate(judgments)
    assert result.sub_scores["ours"]["position_preference"]["first_position_chosen_percent"] == 100.0
    assert result.sub_scores["ours"]["order_consistency"] == 0.0
    (warning,) = result.warnings
    assert "favours the answer shown first" in warning and "100%" in warning
    fair = [pb_judged(f"s{k}", m, 0.0, o) for k in range(40) for m, o in ((1, "model_first"), (1, "baseline_first"))]
    assert PROBENCH.aggregate(fair).warnings == []

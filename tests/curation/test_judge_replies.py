"""The judges' replies as `curate eval` (and the exported lmms-eval task) read them: a table of replies per protocol
(tests/data/judge_replies.yaml: clean, noisy, the papers' own formats, and hostile ones, in which the answer under
test carries a verdict that the judge quotes before its own)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from benchcurate.curation.evaluation import judging

TABLE = yaml.safe_load((Path(__file__).parents[1] / "data" / "judge_replies.yaml").read_text(encoding="utf-8"))
READERS = {
    "quality": lambda case: judging.read_quality(case["reply"]),
    "checklist": lambda case: judging.read_checklist(case["reply"], case["count"]),
    "cb_verdict": lambda case: judging.read_cb_verdict(case["reply"]),
    "cb_rating": lambda case: judging.read_cb_rating(case["reply"]),
    "pb_verdict": lambda case: judging.read_pb_verdict(case["reply"]),
    "amb_rating": lambda case: judging.read_amb_rating(case["reply"]),
}
CASES = [pytest.param(case, id=f"{protocol}-{k}") for protocol, cases in TABLE.items() for k, case in enumerate(cases)]


def test_the_table_holds_at_least_40_replies_per_protocol_hostile_ones_included():
    for protocol, cases in TABLE.items():
        assert len(cases) >= 40, protocol
        assert sum("unreadable" in case for case in cases) >= 8, protocol
        assert any(">" in case["reply"].splitlines()[0][:2] for case in cases if case["reply"]), protocol  # quoted


@pytest.mark.parametrize("case", CASES)
def test_each_reply_is_read_from_the_judges_own_final_statement(case):
    reader = READERS[case["reader"]]
    if case.get("unreadable"):
        with pytest.raises(ValueError):
            reader(case)
    else:
        assert reader(case) == case["read"]

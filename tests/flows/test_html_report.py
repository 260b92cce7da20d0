"""The HTML run report, opened from the file system in the real headless Chromium, as a curator opens it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from benchcurate.curation.engine.store import RunStore
from tests.helpers import CURATE, REPO, curate_in_process, run_curate

SHOT_DIR = Path(__file__).resolve().parents[1] / "output" / "report"
PLAYWRIGHT = REPO / ".ls" / "pw" / "node_modules" / "playwright-core"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory, prefect_env) -> Path:
    """The demo run, with its release skipped (the report is the run's)."""
    work = tmp_path_factory.mktemp("report")
    result = run_curate(
        [
            "run",
            "multiverse",
            "--demo",
            "--run-id",
            "shown",
            "--no-release",
            "--progress",
            "none",
            "--out",
            str(work / "outputs"),
        ],
        work,
        prefect_env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return work / "outputs" / "runs" / "shown"


def test_every_run_writes_its_report_and_the_command_rewrites_it_without_remaking_thumbnails(demo_run):
    index = demo_run / "report" / "html" / "index.html"
    assert index.exists()  # written by the run itself
    thumbs = sorted((demo_run / "report" / "html" / "thumbs").glob("*.jpg"))
    stamps = {path: path.stat().st_mtime_ns for path in thumbs}
    assert len(thumbs) >= 30 and all(path.stat().st_size < 20_000 for path in thumbs)
    result = curate_in_process(["report", str(demo_run), "--html"])
    assert result.returncode == 0 and result.stdout.strip() == str(index)
    assert {path: path.stat().st_mtime_ns for path in thumbs} == stamps  # made once, by content
    # an item whose file cannot be decoded is shown without a picture, and says so
    truncated = (index.parent / "drops-image_phash-image_truncated-1.html").read_text(encoding="utf-8")
    assert "no picture (the file cannot be decoded)" in truncated and "thumbs/" not in truncated
    assert "<dd>broken/truncated.jpg</dd>" in truncated  # the file's name, not only its id


def test_drop_cards_say_each_fact_once_and_name_the_files_they_point_at(demo_run):
    import re

    folder = demo_run / "report" / "html"
    pages = sorted(folder.glob("drops-*.html"))
    assert len(pages) >= 8
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "object at 0x" not in text, page.name
        for evidence in re.findall(r'<dl class="evidence">(.*?)</dl>', text, re.S):
            rows = re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", evidence, re.S)
            assert len(rows) == len(set(rows)), (page.name, rows)
    near = (folder / "drops-image_near_dedup-near_duplicate-1.html").read_text(encoding="utf-8")
    pointed = re.findall(r"<dt>near_duplicate_of</dt><dd>([0-9a-f]{16}) \((.+?)\)</dd>", near)
    assert pointed and all(
        name.endswith((".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp", ".tif", ".tiff")) for _, name in pointed
    )


def test_the_page_loads_cleanly_shows_the_funnel_the_groups_and_filters(demo_run):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium and PLAYWRIGHT.exists(), "run `make test` (it installs Chromium and playwright-core)"
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    home = demo_run.parent / "chrome-home"
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "CHROMIUM_PATH": chromium,
        "PLAYWRIGHT_CORE": str(PLAYWRIGHT),
    }
    result = subprocess.run(
        ["node", str(Path(__file__).with_name("report_page.js")), str(demo_run / "report" / "html"), str(SHOT_DIR)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["errors"] == [] and seen["requests"] == []  # no console error, nothing fetched from a network
    stats = json.loads(curate_in_process(["report", str(demo_run), "--json"]).stdout)
    assert seen["funnel"] == [
        {"stage": s["stage"], "in": s["items_in"], "removed": s["dropped"], "out": s["kept"]} for s in stats
    ]
    assert seen["group"]["keptFirst"] and seen["group"]["pictures"] >= 2  # the kept picture and its copy, loaded
    assert seen["dropCards"] >= 1 and seen["dropLink"].startswith("drops-")
    assert 0 < seen["after"] < seen["before"] and seen["matching"] and seen["shownText"] == f"{seen['after']} shown"
    store = RunStore(demo_run)  # the samples index counts the matches of every page
    final = [json.loads(line) for line in store.kept_path(len(store.chain()) - 1).read_text().splitlines()]
    matches = sum(sample["categories"]["image_main"] == seen["choice"] for sample in final)
    assert seen["elsewhere"].startswith(f"{matches} match in all: page 1 ({seen['after']})")
    assert seen["afterLink"] == seen["after"]  # the filter travels in a link
    assert seen["missingAlt"] == 0 and seen["focused"] == "Skip to the content"  # alt texts; the keyboard's way in
    assert seen["thumbnails"] >= 10 and seen["landscape"] > 0 and seen["distorted"] == []
    for section in ("funnel", "labels", "selection", "costs", "review", "groups", "drops", "samples"):
        assert (SHOT_DIR / f"report_{section}.png").stat().st_size > 5_000, section


def test_a_release_gets_the_same_pages_beside_it_and_stays_intact(demo_run):
    out = demo_run.parent.parent
    made = curate_in_process(["release", str(demo_run), "--version", "1.0.0", "--out", str(out)])
    assert made.returncode == 0, made.stderr
    release = out / "releases" / "multiverse-curated-demo" / "1.0.0"
    result = curate_in_process(["release", "report", str(release)])
    index = Path(result.stdout.strip())
    assert result.returncode == 0 and index == release.parent / "1.0.0.report" / "index.html"
    manifest = json.loads((release / "manifest.json").read_text(encoding="utf-8"))
    page = index.read_text(encoding="utf-8")
    assert f"{manifest['sample_count']} samples in the release" in page
    assert all(f'data-stage="{stage["stage"]}"' in page for stage in manifest["funnel"])
    samples = (index.parent / "samples-1.html").read_text(encoding="utf-8")
    assert samples.count('<li class="sample"') == manifest["sample_count"] and 'data-split="test"' in samples
    assert len(list((index.parent / "thumbs").glob("*.jpg"))) >= 1 and not list(index.parent.glob("images"))
    verified = curate_in_process(["release", "verify", str(release)])
    assert verified.returncode == 0 and "intact" in verified.stdout  # nothing was written into the release


def test_selection_steps_and_the_samples_reviewers_disagreed_on_are_shown(demo_run, tmp_path):
    from benchcurate.curation.report.html import write_html_report

    run = tmp_path / "run"  # a copy: the stages' outputs are read where they are, the report written here
    shutil.copytree(demo_run, run, ignore=shutil.ignore_patterns("html"))
    store = RunStore(run)
    final = [json.loads(line)["id"] for line in store.kept_path(len(store.chain()) - 1).read_text().splitlines()]
    split, agreed = final[0], final[1]
    from benchcurate.curation.engine.store import write_json_atomic
    from benchcurate.curation.review.fields import review_fields
    from benchcurate.curation.review.policy import RoundInput, Submitted, decide_round
    from benchcurate.schemas import Sample
    from benchcurate.schemas.review import ReviewerAnswers

    samples = {
        row["id"]: Sample.model_validate_json(row_text)
        for row_text in store.kept_path(len(store.chain()) - 1).read_text().splitlines()
        for row in [json.loads(row_text)]
        if row["id"] in (split, agreed)
    }
    given = {split: ("yes", "no"), agreed: ("yes", "yes")}
    submitted = [
        Submitted(
            sample_id,
            1,
            ReviewerAnswers(
                reviewer=who, annotation_id=n, choices={"natural": "yes", "correct": "yes", "needs_image": answers[k]}
            ),
        )
        for n, (sample_id, answers) in enumerate(given.items())
        for k, who in enumerate(("u-1", "u-2"))
    ]
    record = decide_round(
        RoundInput(  # as `curate review pull` records it
            run_id="run",
            project="run review round 1",
            round=1,
            required=2,
            pulled_at=datetime.now(UTC),
            fields={sample_id: review_fields(sample) for sample_id, sample in samples.items()},
            submitted=submitted,
            settled=[],
            adjudicators=None,
            names={"u-1": "ann", "u-2": "bo"},
            rejected=[],
        )
    )
    (run / "review").mkdir(exist_ok=True)
    write_json_atomic(run / "review" / "record.json", record.model_dump(mode="json"))
    index = write_html_report(run)
    page = index.read_text(encoding="utf-8")
    table = page.split('class="disagreements"')[1].split("</table>")[0]
    assert split in table and agreed not in table and "ann yes" in table and "bo no" in table
    review = page.split('id="review"')[1].split("</section>")[0]
    assert "undefined: every answer was &#39;yes&#39;" in review  # natural: kappa has no value, not 1.00
    reviewers = review.split('class="reviewers"')[1].split("</table>")[0]
    assert '<tr data-reviewer="u-1"><td>ann</td><td class="num">2</td>' in reviewers
    anchor = table.split('href="')[1].split('"')[0]
    assert f'id="{anchor.split("#")[1]}"' in (index.parent / anchor.split("#")[0]).read_text(encoding="utf-8")
    sampled = next(
        s
        for s in json.loads(curate_in_process(["report", str(demo_run), "--json"]).stdout)
        if s["stage"] == "category_weighted_sample"
    )
    selection = page.split('id="selection"')[1].split("</section>")[0]
    assert '<th scope="col">quotas</th>' in selection and '<th scope="col">kept</th>' in selection
    for label, kept in sampled["kept_by_label"]["image_main"].items():
        assert f'{sampled["summary"]["quotas"][label]}</td><td class="num">{kept}</td>' in selection, label


def test_two_reports_of_one_run_at_once_each_finish_and_leave_whole_files(demo_run, tmp_path):
    from PIL import Image

    run = tmp_path / "run"
    shutil.copytree(demo_run, run, ignore=shutil.ignore_patterns("html"))
    commands = [
        subprocess.Popen(
            [str(CURATE), "report", str(run), "--html"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    assert [command.wait(120) for command in commands] == [0, 0]
    folder = run / "report" / "html"
    thumbs = list((folder / "thumbs").glob("*.jpg"))
    assert len(thumbs) >= 30 and not list(folder.rglob("*.partial"))
    for path in thumbs:
        with Image.open(path) as picture:
            picture.load()  # a torn JPEG raises
    assert (folder / "index.html").read_text(encoding="utf-8").rstrip().endswith("</html>")

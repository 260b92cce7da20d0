"""What the command says about itself and about what it made: its version and the release help, a run named like a
release subcommand, the language of mixed-script text, a release card's terms when a license is unknown, and a
resumed run that keeps the overrides it started with."""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path

import pytest

from benchcurate.curation.engine.store import RunStore
from benchcurate.curation.report.run import funnel_text, load_report
from tests.factories import make_image
from tests.helpers import (
    MULTIVERSE_STAGES,
    SMALL,
    curate_in_process,
    finished_run,
    funnel,
    run_curate,
    summary_lines,
)

WIDE = {"COLUMNS": "250"}  # help text unwrapped, so phrases are not cut


# --- item 20: --version and the release help ------------------------------------------------------------------


def test_version_prints_the_package_name_and_its_installed_version(tmp_path):
    result = run_curate(["--version"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"benchcurate {version('benchcurate')}")
    assert len(result.stdout.splitlines()) == 1


def test_release_help_shows_run_and_the_write_options_and_lists_write(tmp_path):
    shown = curate_in_process(["release", "--help"], tmp_path, WIDE)
    assert shown.returncode == 0, shown.stderr
    for word in ("RUN", "--version", "--split", "--max-shard-mb"):
        assert word in shown.stdout, word
    commands = shown.stdout.split("Commands")[1]
    assert re.search(r"^\W*write\b", commands, re.MULTILINE), commands  # listed, not hidden
    write_help = curate_in_process(["release", "write", "--help"], tmp_path, WIDE)
    assert write_help.returncode == 0, write_help.stderr
    for option in ("--version", "--split", "--max-shard-mb", "--strict-licenses"):
        assert option in write_help.stdout, option


# --- items 20 and 22: a run named `verify` whose images have an unknown license --------------------------------


def card_terms(release: Path) -> str:
    """The sentence of the release card that states the release's terms."""
    card = (release / "README.md").read_text(encoding="utf-8")
    return next(line for line in card.splitlines() if line.startswith("Terms the release carries"))


@pytest.fixture(scope="module")
def released_verify(tmp_path_factory) -> tuple[Path, Path, object]:
    """A finished run named `verify` of generated pictures (no manifest: their license is the recipe's default,
    unknown), released with `curate release write verify`."""
    tmp_path = tmp_path_factory.mktemp("verify")
    run_dir = finished_run(tmp_path, "verify", overrides=SMALL)
    result = curate_in_process(["release", "write", "verify", "--out", str(tmp_path / "out")], tmp_path)
    return tmp_path, run_dir, result


def test_a_run_named_verify_is_released_with_write_spelled_out(released_verify):
    tmp_path, run_dir, result = released_verify
    assert result.returncode == 0, result.stderr
    folder = Path(result.stdout.strip().splitlines()[-1])
    assert folder.parent.parent == (tmp_path / "out" / "releases").resolve()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["run_id"] == RunStore(run_dir).load_config().run_id == "verify"
    checked = curate_in_process(["release", "verify", str(folder)], tmp_path)  # the subcommand is still verify
    assert checked.returncode == 0 and checked.stdout.strip().endswith("intact"), checked.stdout + checked.stderr


def test_a_release_of_sources_with_an_unknown_license_says_its_terms_are_unknown(released_verify):
    tmp_path, run_dir, result = released_verify
    folder = Path(result.stdout.strip().splitlines()[-1])
    licenses = json.loads((folder / "manifest.json").read_text())["license_terms"]["sources_by_license"]
    assert list(licenses) == [RunStore(run_dir).load_config().recipe.stages[0].config["default_license"]]
    terms = card_terms(folder)
    assert "no conditions" not in terms
    assert f"unknown conditions (sources under {next(iter(licenses))})" in terms


def test_known_conditions_beside_an_unknown_license_are_listed_and_the_unknown_named(tmp_path):
    images = tmp_path / "images"
    rows = []
    for seed in range(4):
        make_image(images / f"{seed}.png", seed)
        if seed % 2 == 0:  # the others get the recipe's default license, unknown
            rows.append({"path": f"{seed}.png", "license": "CC-BY-4.0", "source": "by-source"})
    (images / "manifest.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    finished_run(tmp_path, "mixed", input_path=images, overrides=SMALL)
    result = curate_in_process(["release", "mixed", "--out", str(tmp_path / "out")], tmp_path)
    assert result.returncode == 0, result.stderr
    folder = Path(result.stdout.strip().splitlines()[-1])
    assert sorted(json.loads((folder / "manifest.json").read_text())["license_terms"]["sources_by_license"]) == [
        "CC-BY-4.0",
        "unknown",
    ]
    terms = card_terms(folder)
    assert "attribution and unknown conditions (sources under unknown)" in terms and "no conditions" not in terms


# --- item 21: Han characters decide zh --------------------------------------------------------------------------


def test_text_lang_calls_chinese_with_english_terms_zh_and_english_with_one_chinese_word_not(tmp_path):
    rows = [
        {"id": "zh-with-terms", "question": "什么是prescriptive maintenance"},
        {"id": "zh", "question": "这张图片里有几只猫"},
        {"id": "en-with-a-word", "question": "What does the word 你好 mean on the sign in this photo of a shop"},
    ]
    source = tmp_path / "questions.jsonl"
    source.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    result = curate_in_process(["text", "lang", str(source), "--out", str(tmp_path / "lang.jsonl")], tmp_path)
    assert result.returncode == 0, result.stderr
    found = {row["id"]: row["language"] for row in map(json.loads, (tmp_path / "lang.jsonl").read_text().splitlines())}
    assert found["zh-with-terms"] == "zh" and found["zh"] == "zh"
    assert found["en-with-a-word"] == "en"  # two Han characters among thirteen English words are not Chinese


# --- item 24: a resumed run keeps its overrides -----------------------------------------------------------------


@pytest.mark.slow
def test_a_resumed_run_keeps_its_overrides_merges_new_ones_and_says_what_changed(prefect_env, tmp_path):
    run_dir = finished_run(tmp_path, "sticky", overrides=SMALL, seed=7)  # its first attempt, as `curate run` would
    before = load_report(run_dir)
    reaching_the_sample = next(stats for stats in before.stages if stats.stage == "category_min_size").kept
    sample_size = reaching_the_sample - 1  # fewer than reach the sample stage: a visible change from it on
    assert sample_size >= 1
    resumed = run_curate(
        [
            "run",
            "multiverse",
            "--run-id",
            "sticky",
            "--out",
            str(tmp_path / "out"),
            "--no-release",
            "--progress",
            "log",
            "--set",
            f"category_weighted_sample.max_items={sample_size}",
        ],
        tmp_path,
        {**prefect_env, "PREFECT_LOGGING_LEVEL": "INFO"},
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    output = resumed.stdout + resumed.stderr
    # the earlier --set values and --seed still hold: every stage before the changed one is skipped as done
    lines = summary_lines(output)
    position = MULTIVERSE_STAGES.index("category_weighted_sample")
    assert all("skipped, already done" in lines[stage] for stage in MULTIVERSE_STAGES[:position]), lines
    assert all("skipped" not in lines[stage] for stage in MULTIVERSE_STAGES[position:]), lines
    rows = funnel(resumed.stdout)
    first_rows = funnel(funnel_text(before))
    assert rows["image_quality"] == first_rows["image_quality"]
    assert rows["category_weighted_sample"][-1] == str(sample_size)
    options = RunStore(run_dir).load_config().options
    assert options.seed == 7
    assert options.overrides == {**SMALL, "category_weighted_sample": {"max_items": sample_size}}
    changed = [line for line in output.splitlines() if "resuming run sticky with the settings it started with" in line]
    assert len(changed) == 1, output[-3000:]
    old = SMALL["category_weighted_sample"]["max_items"]
    assert f"except --set category_weighted_sample.max_items: {old} -> {sample_size}" in changed[0]
    assert "min_quality_score" not in changed[0] and "--seed" not in changed[0]  # unchanged: not listed

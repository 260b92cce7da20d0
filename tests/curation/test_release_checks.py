"""Release verification, diffs and license propagation."""

import shutil
from pathlib import Path

import pytest

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.core.fingerprint import sha256_file
from benchcurate.curation.engine.runner import run_all
from benchcurate.curation.engine.store import RunStore
from benchcurate.curation.release.card import _size_category, license_metadata
from benchcurate.curation.release.licenses import release_terms
from benchcurate.curation.release.verify import diff, verify
from benchcurate.curation.release.writer import write_release
from benchcurate.schemas import Provenance
from tests.factories import make_sample
from tests.helpers import SMALL, curate_in_process, prepared_run, resolve


def released(tmp_path, run_id, **overrides):
    run_dir = prepared_run(tmp_path, run_id, overrides=SMALL)
    if overrides:
        config = RunStore(run_dir).load_config()
        RunStore(run_dir).save_config(
            resolve(
                "multiverse",
                tmp_path / "out",
                run_id=run_id,
                input_path=config.input_path,
                overrides={**SMALL, **overrides},
            )
        )
    run_all(run_dir)
    return run_dir, write_release(run_dir, tmp_path / "out")


def test_a_copied_release_verifies_and_tampering_is_found(tmp_path):
    _, folder = released(tmp_path, "a")
    copy = tmp_path / "elsewhere" / "copy"
    shutil.copytree(folder, copy)
    assert verify(copy) == []
    parquet = next((copy / "data").glob("*.parquet"))
    data = bytearray(parquet.read_bytes())
    data[len(data) // 2] ^= 0xFF
    parquet.write_bytes(bytes(data))
    (copy / "notes.txt").write_text("added later")
    problems = verify(copy)
    assert f"changed: data/{parquet.name}" in problems and "not in SHA256SUMS: notes.txt" in problems
    result = curate_in_process(["release", "verify", str(copy)], tmp_path)
    assert result.returncode == 1 and "problem(s)" in result.stdout
    with pytest.raises(UserError, match="not a release folder"):
        verify(tmp_path)


def with_sums_rewritten(folder: Path) -> None:
    """What someone covering their tracks does: SHA256SUMS recomputed over the files now there."""
    lines = [
        f"{sha256_file(path)}  {path.relative_to(folder).as_posix()}"
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != "SHA256SUMS"
    ]
    (folder / "SHA256SUMS").write_text("\n".join(lines) + "\n")


def test_a_file_added_or_removed_along_with_its_checksum_line_is_found(tmp_path):
    _, folder = released(tmp_path, "sums")
    added, removed = tmp_path / "added", tmp_path / "removed"
    shutil.copytree(folder, added)
    (added / "data" / "extra.parquet").write_bytes(next((added / "data").glob("*.parquet")).read_bytes())
    with_sums_rewritten(added)
    assert "not in the manifest: data/extra.parquet" in verify(added)
    shutil.copytree(folder, removed)
    plot = next((removed / "plots").glob("*.png"))
    plot.unlink()
    with_sums_rewritten(removed)
    assert verify(removed) == [f"in the manifest, missing here: plots/{plot.name}"]


def test_diff_lists_added_removed_and_changed_samples(tmp_path):
    _, first = released(tmp_path, "d1")
    _, second = released(
        tmp_path,
        "d2",
        category_weighted_sample={"max_items": 4},
        conversation_generate={"min_utterances": 2, "turns": 2},
    )
    result = diff(first, second)
    assert len(result.removed) == 2 and result.added == []
    assert result.changed and all("conversation" in fields for fields in result.changed.values())
    shown = curate_in_process(["release", "diff", str(first), str(second)], tmp_path)
    assert shown.returncode == 0 and shown.stdout.startswith("added 0, removed 2, changed 4")


def sample(seed, license_id, source, text_license=None):
    return make_sample(
        seed,
        provenance=Provenance(
            source_dataset=source, source_id=str(seed), license=license_id, text_license=text_license or license_id
        ),
    )


def test_share_alike_and_non_commercial_propagate_and_their_mix_is_a_named_conflict():
    open_terms = release_terms([sample(1, "CC0-1.0", "photos"), sample(2, "CC-BY-4.0", "charts")])
    assert open_terms.conditions == ["attribution"] and open_terms.conflicts == []
    nc = release_terms([sample(1, "CC-BY-NC-4.0", "mmvet"), sample(2, "Apache-2.0", "mmmu")])
    assert nc.conditions == ["attribution", "non-commercial"] and nc.conflicts == []
    mix = release_terms(
        [
            sample(1, "CC-BY-SA-4.0", "mathvista"),
            sample(2, "CC-BY-NC-4.0", "mmdu"),
            sample(3, "CC-BY-NC-SA-4.0", "alignmm"),
        ]
    )
    assert mix.conditions == ["attribution", "share-alike", "non-commercial"]
    assert any(
        "CC-BY-SA-4.0 (mathvista pictures, mathvista text)" in c and "CC-BY-NC-4.0 (mmdu pictures, mmdu text)" in c
        for c in mix.conflicts
    )
    unknown = release_terms([sample(1, "unknown", "scraped")])
    assert unknown.conflicts and "scraped" in unknown.conflicts[0]


def test_strict_licenses_refuses_a_run_with_an_unknown_license(tmp_path):
    run_dir = prepared_run(tmp_path, "lic", overrides=SMALL)
    config = RunStore(run_dir).load_config()
    overrides = {**SMALL, "image_ingest": {"default_license": "unknown"}}
    RunStore(run_dir).save_config(
        resolve("multiverse", tmp_path / "out", run_id="lic", input_path=config.input_path, overrides=overrides)
    )
    run_all(run_dir)
    with pytest.raises(UserError, match="license conflict.*unknown"):
        write_release(run_dir, tmp_path / "out", strict_licenses=True)
    folder = write_release(run_dir, tmp_path / "out")
    assert "License conflicts" in (folder / "README.md").read_text()


def test_a_removal_list_applies_to_the_next_release_and_is_recorded(tmp_path):
    import json

    run_dir, first = released(tmp_path, "rm")
    kept_before = json.loads((first / "manifest.json").read_text())["sample_count"]
    import pyarrow.parquet as pq

    some_id = pq.read_table(next((first / "data").glob("*.parquet")), columns=["index"]).column(0)[0].as_py()
    (first.parent / "REMOVALS.jsonl").write_text(
        json.dumps({"sample_id": some_id, "reason": "takedown request"}) + "\n"
    )
    second = write_release(run_dir, tmp_path / "out")
    manifest = json.loads((second / "manifest.json").read_text())
    assert manifest["removed_on_request"] == {some_id: "takedown request"}
    assert manifest["sample_count"] == kept_before - 1 and diff(first, second).removed == [some_id]
    assert "1 sample(s) removed on request" in (second / "README.md").read_text()


def test_publishing_shows_its_plan_and_needs_a_token_to_upload(tmp_path, monkeypatch):
    _, folder = released(tmp_path, "pub")
    dry = curate_in_process(["publish", str(folder), "--repo", "my-org/my-bench"], tmp_path)
    assert dry.returncode == 0 and "tag v0.1.0" in dry.stdout and "dry run: nothing uploaded" in dry.stdout
    assert "data/test-00000-of-00001.parquet" in dry.stdout and "manifest.json" in dry.stdout
    env = {"HF_TOKEN": ""}
    real = curate_in_process(["publish", str(folder), "--repo", "my-org/my-bench", "--upload"], tmp_path, env)
    assert real.returncode == 2 and "HF_TOKEN" in real.stderr
    bad = curate_in_process(["publish", str(folder), "--repo", "not a repo"], tmp_path)
    assert bad.returncode == 2 and "is not ORG/NAME" in bad.stderr


def test_the_card_shows_distribution_plots_that_the_checksums_cover(tmp_path):
    _, folder = released(tmp_path, "plots")
    card = (folder / "README.md").read_text()
    shown = [line.split("(")[1].rstrip(")") for line in card.splitlines() if line.startswith("![")]
    assert {"plots/image_categories.png", "plots/turns.png", "plots/question_length.png"} <= set(shown)
    assert all((folder / path).read_bytes()[:4] == b"\x89PNG" for path in shown)
    assert all(path in (folder / "SHA256SUMS").read_text() for path in shown) and verify(folder) == []


def test_a_samples_picture_and_text_carry_their_licenses_apart_and_the_release_states_both():
    """ConvBench's case: annotations CC-BY-4.0, pictures from VisIT-Bench under per-image terms nobody stated."""
    convbench = [sample(seed, "unknown", "convbench", text_license="CC-BY-4.0") for seed in range(3)]
    terms = release_terms(convbench)
    assert terms.sources_by_license == {"CC-BY-4.0": ["convbench text"], "unknown": ["convbench pictures"]}
    assert terms.conditions == ["attribution"] and terms.unknown == ["unknown"]
    assert any("convbench pictures is unknown" in conflict for conflict in terms.conflicts)
    assert license_metadata({"unknown": 3}, {"CC-BY-4.0": 3})["license"] == "other"
    assert license_metadata({"CC-BY-4.0": 3}, {"CC-BY-4.0": 3}) == {"license": "cc-by-4.0"}


@pytest.mark.parametrize(
    "count,label",
    [
        (999, "n<1K"),
        (1_000, "1K<n<10K"),
        (999_999, "100K<n<1M"),
        (1_000_000, "1M<n<10M"),
        (25_000_000, "10M<n<100M"),
        (10**12, "n>1T"),
    ],
)
def test_the_size_category_follows_the_hubs_list(count, label):
    assert _size_category(count) == label


HOSTILE = {
    "source": "<script>alert('source')</script>",
    "license": "<img src=x onerror=alert(1)>",
    "text_license": "[click](javascript:alert(2)) | x",
    "attribution": "<b>bold</b>",
}


def test_the_card_and_license_file_show_a_manifests_fields_as_text_never_as_html(tmp_path):
    import json
    import re

    from tests.factories import make_image
    from tests.helpers import finished_run

    images = tmp_path / "images"
    for seed in range(3):
        make_image(images / f"{seed}.png", seed)
    (images / "manifest.jsonl").write_text(
        "".join(json.dumps({"path": f"{seed}.png", **HOSTILE}) + "\n" for seed in range(3))
    )
    run_dir = finished_run(tmp_path, "hostile", input_path=images, overrides=SMALL)
    folder = write_release(run_dir, tmp_path / "out")
    for name in ("README.md", "LICENSE.md"):
        text = (folder / name).read_text(encoding="utf-8")
        body = text.split("\n---\n", 1)[-1]  # the YAML head quotes its values; the Markdown body must escape them
        assert "<script" not in body and "<img" not in body and "<b>" not in body, name
        assert not re.search(r"(?<!\\)\]\(javascript:", body), name  # a link only when the bracket is bare
        assert "&lt;script&gt;alert('source')&lt;/script&gt;" in body, name
    assert json.loads((folder / "manifest.json").read_text())["sources"] == {HOSTILE["source"]: 3}  # kept as given

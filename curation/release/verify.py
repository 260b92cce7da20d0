"""Checking a release folder anywhere, and comparing two releases.

`verify`: every file listed in SHA256SUMS exists with that hash, no file is missing from it, the manifest
validates against our schema and lists exactly the files on disk (both ways: SHA256SUMS alone can be rewritten
along with an added or removed file), and the data's columns and rows per split match the manifest and the card's
`dataset_info`.
`diff`: samples added and removed (by `index`, our sample id), and for samples in both the columns that changed
(the image is compared by its sha256; `split` when a sample moved between splits).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml
from datasets.info import DatasetInfosDict
from pydantic import ValidationError

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.core.fingerprint import sha256_file
from benchcurate.curation.release.columns import features
from benchcurate.curation.release.files import CHECKSUM_FILE, release_rows, split_of
from benchcurate.schemas import ReleaseManifest


def _card_problems(folder: Path, rows_per_split: Counter, recipe: str) -> list[str]:
    """The card's `dataset_info` is what `datasets` loads with: its features must be ours and each split's
    row count the data's."""
    text = (folder / "README.md").read_text(encoding="utf-8") if (folder / "README.md").is_file() else ""
    if not text.startswith("---\n") or "\n---\n" not in text[4:]:
        return ["README.md has no YAML metadata block"]
    try:
        infos = DatasetInfosDict.from_dataset_card_data(yaml.safe_load(text[4 : text.index("\n---\n", 4)]))
    except (yaml.YAMLError, ValueError, TypeError, KeyError) as error:
        return [f"README.md metadata unreadable: {error}"]
    if len(infos) != 1:
        return [f"README.md declares {len(infos)} dataset_info configs, expected 1"]
    info = next(iter(infos.values()))
    problems = (
        [] if info.features == features(recipe) else ["README.md dataset_info features differ from the release schema"]
    )
    declared = {name: split.num_examples for name, split in (info.splits or {}).items()}
    if declared != dict(rows_per_split):
        problems.append(f"README.md dataset_info splits {declared}, the data has {dict(rows_per_split)}")
    return problems


def verify(folder: Path) -> list[str]:
    """Problems found (empty when the release is intact)."""
    if not (folder / CHECKSUM_FILE).is_file():
        raise UserError(f"{folder} is not a release folder (no {CHECKSUM_FILE})")
    problems = []
    listed = {}
    for line in (folder / CHECKSUM_FILE).read_text(encoding="utf-8").splitlines():
        digest, _, name = line.partition("  ")
        listed[name] = digest
    present = {path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()} - {CHECKSUM_FILE}
    problems += [f"missing: {name}" for name in sorted(set(listed) - present)]
    problems += [f"not in {CHECKSUM_FILE}: {name}" for name in sorted(present - set(listed))]
    problems += [
        f"changed: {name}" for name in sorted(set(listed) & present) if sha256_file(folder / name) != listed[name]
    ]
    try:
        manifest = ReleaseManifest.model_validate_json((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValidationError) as error:
        return problems + [f"manifest.json invalid: {str(error).splitlines()[0]}"]
    problems += [
        f"manifest lists {name} with another hash"
        for name, entry in manifest.files.items()
        if isinstance(entry, dict) and name in listed and entry.get("sha256") != listed[name]
    ]
    # SHA256SUMS can be rewritten with a file; the manifest's list of what was released must match the disk too
    released = set(manifest.files)
    problems += [f"not in the manifest: {name}" for name in sorted(present - released - {"manifest.json"})]
    problems += [f"in the manifest, missing here: {name}" for name in sorted(released - present)]
    if not any(problem.startswith(("missing: data", "changed: data")) for problem in problems):
        import pyarrow.parquet as pq

        expected = features(manifest.recipe)
        for path in sorted((folder / "data").glob("*.parquet")):
            columns = set(pq.read_schema(path).names)
            if columns != set(expected):
                problems.append(
                    f"{path.name}: columns differ from the {manifest.recipe} release schema: "
                    f"{sorted(columns ^ set(expected))}"
                )
        rows_per_split = Counter()
        for path in (folder / "data").glob("*.parquet"):
            rows_per_split[split_of(path)] += pq.read_metadata(path).num_rows
        if sum(rows_per_split.values()) != manifest.sample_count:
            problems.append(f"{sum(rows_per_split.values())} rows, the manifest says {manifest.sample_count}")
        if dict(rows_per_split) != manifest.splits:
            problems.append(f"rows per split {dict(rows_per_split)}, the manifest says {manifest.splits}")
        problems += _card_problems(folder, rows_per_split, manifest.recipe)
    return problems


@dataclass
class ReleaseDiff:
    added: list[str]
    removed: list[str]
    changed: dict[str, list[str]]


def diff(first: Path, second: Path) -> ReleaseDiff:
    for folder in (first, second):
        if not (folder / "manifest.json").is_file():
            raise UserError(f"{folder} is not a release folder (no manifest.json)")
    before = {row["index"]: row for row in release_rows(first)}
    after = {row["index"]: row for row in release_rows(second)}
    changed = {}
    for sample_id in sorted(set(before) & set(after)):
        fields = sorted(
            name
            for name in before[sample_id]
            if name != "generated_by"
            and json.dumps(before[sample_id][name], sort_keys=True, default=str)
            != json.dumps(after[sample_id].get(name), sort_keys=True, default=str)
        )
        if fields:
            changed[sample_id] = fields
    return ReleaseDiff(
        added=sorted(set(after) - set(before)), removed=sorted(set(before) - set(after)), changed=changed
    )

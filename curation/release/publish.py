"""Publishing a release folder to the Hugging Face Hub: a plan first, the upload a thin call.

The plan: the folder must verify; every file with its size and sha256; the dataset repo and the tag `v<version>`
the upload creates. Uploading needs `HF_TOKEN` in the environment (never an argument, never logged) and is one
`upload_folder` plus one `create_tag` with huggingface_hub. The commit also deletes the repo's files that this
version does not have: shards are named `-of-MMMMM`, so a previous version's extra shards would otherwise stay
beside the new ones and `data/test-*.parquet` would load both. Earlier versions stay reachable by their tags.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from benchcurate.curation.errors import UserError
from benchcurate.curation.release.verify import verify
from benchcurate.schemas import ReleaseManifest

REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")


@dataclass(frozen=True)
class UploadPlan:
    repo: str
    tag: str
    files: list[tuple[str, int]]   # relative path, bytes
    delete_patterns: tuple[str, ...] = ("*",)  # remote files of earlier versions that this one does not have

    @property
    def total_bytes(self) -> int:
        return sum(size for _, size in self.files)


def plan(folder: Path, repo: str) -> UploadPlan:
    if not REPO.match(repo):
        raise UserError(f"--repo {repo!r} is not ORG/NAME")
    problems = verify(folder)
    if problems:
        raise UserError(f"{folder} does not verify ({problems[0]}{' ...' if len(problems) > 1 else ''}); only an "
                        f"intact release is published")
    manifest = ReleaseManifest.model_validate_json((folder / "manifest.json").read_text(encoding="utf-8"))
    files = sorted((path.relative_to(folder).as_posix(), path.stat().st_size)
                   for path in folder.rglob("*") if path.is_file())
    return UploadPlan(repo=repo, tag=f"v{manifest.version}", files=files)


def upload(folder: Path, upload_plan: UploadPlan) -> str:
    token = os.environ.get("HF_TOKEN")
    if not token:
        raise UserError("uploading needs a Hugging Face token in HF_TOKEN (a write token for the dataset repo)")
    from huggingface_hub import HfApi
    api = HfApi(token=token)
    api.create_repo(upload_plan.repo, repo_type="dataset", exist_ok=True)
    commit = api.upload_folder(repo_id=upload_plan.repo, folder_path=str(folder), repo_type="dataset",
                               commit_message=f"Release {upload_plan.tag}",
                               delete_patterns=list(upload_plan.delete_patterns))
    api.create_tag(upload_plan.repo, tag=upload_plan.tag, repo_type="dataset", revision=commit.oid)
    return f"https://huggingface.co/datasets/{upload_plan.repo}/tree/{upload_plan.tag}"

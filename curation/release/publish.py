"""Publishing a release folder to the Hugging Face Hub (or a server speaking its API at HF_ENDPOINT).

The plan: the folder must verify; every file with its size; the dataset repo and the tag `v<version>` the upload
creates. Uploading needs `HF_TOKEN` in the environment (never an argument, never logged). It refuses, before
sending anything, a read-only token, a tag the Hub already has (a published version is never replaced) and a version
older than the Hub's newest (main holds the newest). Then one `upload_folder` to main: it also deletes the repo's
files that this version does not have (shards are named `-of-MMMMM`, so a previous version's extra shards would
otherwise stay beside the new ones and `data/test-*.parquet` would load both), and one `create_tag` on its commit.
Last, the Hub's listing at the tag is compared with the folder, file by file.

Resuming: huggingface_hub asks the Hub which contents it has before sending any (preupload, the LFS batch), so a
rerun after a failure sends only what is missing; nothing is tagged until the commit exists. With hf_xet installed
(our default install) `upload_folder` is huggingface_hub's pipelined large-folder upload: files go in several
commits and a rerun skips the ones committed. Earlier versions stay reachable by their tags.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from benchcurate.curation.errors import UserError
from benchcurate.curation.release.hub import endpoint, hub_failures, write_token
from benchcurate.curation.release.verify import verify
from benchcurate.curation.release.writer import CHECKSUM_FILE, parse_version
from benchcurate.schemas import ReleaseManifest

REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
VERSION_TAG = re.compile(r"^v\d+\.\d+\.\d+$")


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


def _published_differences(api, repo: str, tag: str, folder: Path) -> list[str]:
    """What the Hub holds under `tag` against the folder: every file there with the same contents, nothing more.
    LFS files are compared by sha256 with SHA256SUMS (verified before the upload, so no file is read again), the
    others (card, manifest, checksums: small) by git blob id."""
    import hashlib

    listed = {name: digest for digest, name in (line.split("  ", 1) for line in
                                                 (folder / CHECKSUM_FILE).read_text(encoding="utf-8").splitlines())}
    remote = {entry.path: entry for entry in api.list_repo_tree(repo, repo_type="dataset", revision=tag,
                                                                recursive=True) if hasattr(entry, "size")}
    problems = []
    for name in sorted([*listed, CHECKSUM_FILE]):
        entry = remote.pop(name, None)
        if entry is None:
            problems.append(f"missing on the Hub: {name}")
            continue
        if entry.lfs:
            same = entry.lfs.sha256 == listed.get(name)
        else:
            data = (folder / name).read_bytes()
            same = entry.blob_id == hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        if not same:
            problems.append(f"differs on the Hub: {name}")
    remote.pop(".gitattributes", None)  # every Hub repo has one; huggingface_hub never deletes it
    problems += [f"on the Hub, not in the release: {name}" for name in sorted(remote)]
    return problems


@dataclass(frozen=True)
class Published:
    url: str
    commit: str
    problems: list[str]


def upload(folder: Path, upload_plan: UploadPlan) -> Published:
    """Publish: refuse a tag the Hub has or a version older than its newest; one commit of the folder (deleting
    what this version lacks) to main; the tag on that commit; then the Hub's listing at the tag checked against
    the folder."""
    token = write_token()
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    repo, tag = upload_plan.repo, upload_plan.tag
    with hub_failures("publishing to", repo):
        role = ((api.whoami().get("auth") or {}).get("accessToken") or {}).get("role")
        if role == "read":
            raise UserError(f"publishing to {repo}: the token in HF_TOKEN is read-only; use a token with write "
                            f"access")
        api.create_repo(repo, repo_type="dataset", exist_ok=True)
        tags = {ref.name: ref.target_commit for ref in api.list_repo_refs(repo, repo_type="dataset").tags}
    if tag in tags:
        raise UserError(f"{tag} is already published in {repo} (commit {tags[tag][:12]}); a published version is "
                        f"never replaced: release a new version and publish that")
    newer = sorted((t for t in tags if VERSION_TAG.match(t) and parse_version(t[1:]) > parse_version(tag[1:])),
                   key=lambda t: parse_version(t[1:]))
    if newer:
        raise UserError(f"{repo} already has {newer[-1]}, newer than {tag}; main holds the newest version, so an "
                        f"older one is not published after it")
    resume = "; nothing is tagged yet: run the same command again (files already on the Hub are not sent again)"
    with hub_failures("uploading to", repo, after_network=resume):
        commit = api.upload_folder(repo_id=repo, folder_path=str(folder), repo_type="dataset",
                                   commit_message=f"Release {tag}", delete_patterns=list(upload_plan.delete_patterns))
        api.create_tag(repo, tag=tag, tag_message=f"Release {tag}", repo_type="dataset", revision=commit.oid)
    with hub_failures("checking what was published to", repo):
        problems = _published_differences(api, repo, tag, folder)
    return Published(f"{endpoint()}/datasets/{repo}/tree/{tag}", commit.oid, problems)

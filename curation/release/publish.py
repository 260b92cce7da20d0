"""Publishing a release folder to the Hugging Face Hub (or a server speaking its API at HF_ENDPOINT).

The plan: the folder must verify; every file with its size; the dataset repo and the tag `v<version>` the upload
creates. Uploading needs `HF_TOKEN` in the environment (never an argument, never logged). Before sending anything
it refuses a read-only token, a tag the Hub already has with other files (a published version is never replaced;
with the same files the publish is finished and nothing is sent), and a version older than the Hub's newest,
tagged or on main (main holds the newest). Then one `upload_folder` to main on top of the commit it checked
(`parent_commit`: a publish that moved main meanwhile makes the Hub refuse ours), which also deletes the repo's
files this version lacks (shards are named `-of-MMMMM`, so a previous version's extra shards would otherwise stay
beside the new ones and `data/test-*.parquet` would load both); one `create_tag` on its commit. Last, the Hub's
listing at the tag is compared with SHA256SUMS, file by file.

Resuming: huggingface_hub asks the Hub which contents it has before sending any (preupload, the LFS batch), so a
rerun after a failure sends only what is missing; nothing is tagged until the commit exists, and a rerun after a
failure between commit and tag makes no new commit. With hf_xet installed (our default install) `upload_folder`
is huggingface_hub's pipelined large-folder upload: files go in several commits and a rerun skips the ones
committed. Earlier versions stay reachable by their tags.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.release.hub import endpoint, hub_failures, write_token
from benchcurate.curation.release.verify import verify
from benchcurate.curation.release.writer import CHECKSUM_FILE, parse_version
from benchcurate.schemas import ReleaseManifest

REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
VERSION_TAG = re.compile(r"^v\d+\.\d+\.\d+$")
RERUN = "; run the same command again once the Hub answers (what it already has is not sent again)"
UPLOAD_RESUME = "; nothing is tagged yet: run the same command again (files already on the Hub are not sent again)"


@dataclass(frozen=True)
class UploadPlan:
    repo: str
    tag: str
    files: list[tuple[str, int]]  # relative path, bytes
    delete_patterns: tuple[str, ...] = ("*",)  # remote files of earlier versions that this one does not have

    @property
    def total_bytes(self) -> int:
        return sum(size for _, size in self.files)


def plan(folder: Path, repo: str) -> UploadPlan:
    if not REPO.match(repo):
        raise UserError(f"--repo {repo!r} is not ORG/NAME")
    problems = verify(folder)
    if problems:
        raise UserError(
            f"{folder} does not verify ({problems[0]}{' ...' if len(problems) > 1 else ''}); only an "
            f"intact release is published"
        )
    manifest = ReleaseManifest.model_validate_json((folder / "manifest.json").read_text(encoding="utf-8"))
    files = sorted(
        (path.relative_to(folder).as_posix(), path.stat().st_size) for path in folder.rglob("*") if path.is_file()
    )
    return UploadPlan(repo=repo, tag=f"v{manifest.version}", files=files)


def _published_differences(api, repo: str, tag: str, folder: Path) -> list[str]:
    """What the Hub holds under `tag` against the folder: every file there with the same contents, nothing more.
    LFS files are compared by sha256 with SHA256SUMS (verified before the upload, so no file is read again), the
    others (card, manifest, checksums: small) by git blob id."""
    import hashlib

    listed = {
        name: digest
        for digest, name in (
            line.split("  ", 1) for line in (folder / CHECKSUM_FILE).read_text(encoding="utf-8").splitlines()
        )
    }
    remote = {
        entry.path: entry
        for entry in api.list_repo_tree(repo, repo_type="dataset", revision=tag, recursive=True)
        if hasattr(entry, "size")
    }
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


def _version_at(api, repo: str, commit: str | None) -> str | None:
    """The release version whose manifest.json the commit holds, if any."""
    import json

    from huggingface_hub.errors import EntryNotFoundError

    if commit is None:
        return None
    try:
        path = api.hf_hub_download(repo, "manifest.json", repo_type="dataset", revision=commit)
    except EntryNotFoundError:
        return None
    try:
        version = json.loads(Path(path).read_text(encoding="utf-8")).get("version")
        parse_version(str(version))
    except (ValueError, UserError, AttributeError):
        return None  # not one of our releases
    return str(version)


@dataclass(frozen=True)
class Published:
    url: str
    commit: str
    problems: list[str]  # the Hub's copy at the tag against the folder (empty: identical)
    already: bool = False  # the tag was there with these very files: nothing was sent


def upload(folder: Path, upload_plan: UploadPlan) -> Published:
    """Publish: refuse a tag the Hub has with other contents, or a version older than its newest; one commit of
    the folder (deleting what this version lacks) on top of the main it checked (parent_commit: a publish that
    moved main meanwhile makes the Hub refuse ours); the tag on that commit; then the Hub's listing at the tag
    checked against the folder. A tag already there with the same files is a finished publish: nothing is sent."""
    token = write_token()
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi(token=token)
    repo, tag = upload_plan.repo, upload_plan.tag
    url = f"{endpoint()}/datasets/{repo}/tree/{tag}"
    with hub_failures("publishing to", repo, resume=RERUN):
        role = ((api.whoami().get("auth") or {}).get("accessToken") or {}).get("role")
        if role == "read":
            raise UserError(f"publishing to {repo}: the token in HF_TOKEN is read-only; use a token with write access")
        api.create_repo(repo, repo_type="dataset", exist_ok=True)
        refs = api.list_repo_refs(repo, repo_type="dataset")
        tags = {ref.name: ref.target_commit for ref in refs.tags}
        main = next((ref.target_commit for ref in refs.branches if ref.name == "main"), None)
        if tag in tags:
            problems = _published_differences(api, repo, tag, folder)
            if not problems:
                return Published(url, tags[tag], [], already=True)
            raise UserError(
                f"{tag} is already published in {repo} (commit {tags[tag][:12]}) with other contents "
                f"({problems[0]}); a published version is never replaced: release a new version and "
                f"publish that"
            )
    newer = sorted(
        (t for t in tags if VERSION_TAG.match(t) and parse_version(t[1:]) > parse_version(tag[1:])),
        key=lambda t: parse_version(t[1:]),
    )
    if newer:
        raise UserError(
            f"{repo} already has {newer[-1]}, newer than {tag}; main holds the newest version, so an "
            f"older one is not published after it"
        )
    with hub_failures("publishing to", repo, resume=RERUN):
        on_main = _version_at(api, repo, main)
    if on_main and parse_version(on_main) > parse_version(tag[1:]):  # committed, its tag not yet made
        raise UserError(
            f"main of {repo} holds {on_main}, newer than {tag} (being published now?); an older "
            f"version is not published after it"
        )
    with hub_failures("uploading to", repo, resume=UPLOAD_RESUME):
        commit = api.upload_folder(
            repo_id=repo,
            folder_path=str(folder),
            repo_type="dataset",
            commit_message=f"Release {tag}",
            delete_patterns=list(upload_plan.delete_patterns),
            parent_commit=main,
        )
        try:
            api.create_tag(repo, tag=tag, tag_message=f"Release {tag}", repo_type="dataset", revision=commit.oid)
        except HfHubHTTPError as error:  # 409: the same version tagged meanwhile; the check below decides
            if error.response is None or error.response.status_code != 409:
                raise
    with hub_failures("checking what was published to", repo, resume=RERUN):
        problems = _published_differences(api, repo, tag, folder)
        tagged = next(
            ref.target_commit for ref in api.list_repo_refs(repo, repo_type="dataset").tags if ref.name == tag
        )
    return Published(url, tagged, problems)

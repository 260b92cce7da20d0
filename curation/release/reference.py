"""An earlier release as a reference set: a local release folder, or a published version on the Hub named
`hf://ORG/NAME@REVISION` (a tag such as v0.1.0, a branch, or a commit; no revision means main).

A Hub version is downloaded once into the Hugging Face cache (HF_HOME; a rerun reads it from there, offline too)
and verified like any release folder before use, so a reference is never a half-downloaded or altered copy. Its
`identity` (the commit the revision resolved to) is what a stage's key records: a moved branch reruns the stage,
a tag does not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from benchcurate.curation.core.errors import UserError

HF_SCHEME = "hf://"
HF_LOCATION = re.compile(r"^hf://(?:datasets/)?(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?:@(?P<rev>[^@\s]+))?$")


@dataclass(frozen=True)
class ReleaseReference:
    folder: Path  # a verified release folder on this machine
    label: str  # how matches name it: ORG/NAME@REVISION, or the folder's name
    identity: str  # what changes when the reference's contents may have: the Hub commit, or SHA256SUMS' digest


def is_hub(location: str) -> bool:
    return location.startswith(HF_SCHEME)


def is_release(location: str) -> bool:
    """A reference given as a release (hf://..., or a folder) rather than a file of hashes or samples."""
    return is_hub(location) or Path(location).is_dir()


_verified: set[tuple[str, str]] = set()  # (folder, identity) verified in this process


def release_reference(location: str) -> ReleaseReference:
    """The release at `location` (a folder, or hf://ORG/NAME@REVISION), downloaded if needed and verified. The
    location is resolved on every call (a long-lived worker sees a moved branch or a re-released folder); only
    the verification of one identity is done once per process."""
    from benchcurate.curation.core.fingerprint import sha256_file
    from benchcurate.curation.release.files import CHECKSUM_FILE
    from benchcurate.curation.release.verify import verify

    if is_hub(location):
        folder, label, commit = _download(location)
        identity = f"{label}={commit}"
    else:
        folder = Path(location)
        if not (folder / CHECKSUM_FILE).is_file():
            raise UserError(f"reference {location} is not a release folder (no {CHECKSUM_FILE})")
        label, identity = folder.name, sha256_file(folder / CHECKSUM_FILE)
    if (str(folder), identity) not in _verified:
        # a Hub snapshot folder may also hold the repo's .gitattributes (another tool downloaded it): the Hub's
        problems = [
            problem for problem in verify(folder) if not (is_hub(location) and problem.endswith(": .gitattributes"))
        ]
        if problems:
            raise UserError(
                f"reference {location} does not verify ({problems[0]}"
                f"{' ...' if len(problems) > 1 else ''}); use an intact release"
            )
        _verified.add((str(folder), identity))
    return ReleaseReference(folder, label, identity)


def _download(location: str) -> tuple[Path, str, str]:
    from benchcurate.curation.release.hub import hub_failures

    match = HF_LOCATION.match(location)
    if match is None:
        raise UserError(f"reference {location!r} is not hf://ORG/NAME@REVISION (e.g. hf://my-org/bench@v0.1.0)")
    repo, revision = match["repo"], match["rev"] or "main"
    from huggingface_hub import snapshot_download

    with hub_failures("reading the reference", f"{repo}@{revision}", writing=False):
        path = Path(
            snapshot_download(repo, repo_type="dataset", revision=revision, ignore_patterns=[".gitattributes"])
        )  # the Hub's file, not the release's
    return path, f"{repo}@{revision}", path.name  # snapshots/<commit>

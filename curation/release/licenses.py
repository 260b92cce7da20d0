"""The release's terms, computed from its sources' licenses: share-alike and non-commercial propagate.

Each sample keeps its source's license (from ingest). A license id is read as a set of conditions:
attribution (BY, Apache, MIT), share-alike (SA), non-commercial (NC), no conditions (CC0, Public-Domain), or
unknown. The release carries every condition any source has. Two situations are conflicts that no single set of
terms resolves, and are named with their sources: a share-alike source beside a non-commercial one whose terms
differ (share-alike requires derivatives under the same license, which the other forbids; MultiVerse's sources
are such a mix), and a source whose license is unknown.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from benchcurate.schemas import ReleaseManifest, Sample

NO_CONDITIONS = {"CC0-1.0", "Public-Domain", "Unlicense"}
PERMISSIVE = {"Apache-2.0", "MIT", "BSD-2-Clause", "BSD-3-Clause"}


def conditions(license_id: str) -> set[str] | None:
    """{'attribution', 'share-alike', 'non-commercial'} a license imposes, or None when unknown."""
    if license_id in NO_CONDITIONS:
        return set()
    if license_id in PERMISSIVE:
        return {"attribution"}
    upper = license_id.upper()
    if upper.startswith("CC-BY"):
        parts = set(upper.split("-"))
        return (
            {"attribution"}
            | ({"share-alike"} if "SA" in parts else set())
            | ({"non-commercial"} if "NC" in parts else set())
        )
    return None


@dataclass
class ReleaseTerms:
    conditions: list[str]
    sources_by_license: dict[str, list[str]]
    conflicts: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # licenses whose conditions nobody can say

    @property
    def summary(self) -> str:
        known = ", ".join(self.conditions)
        if self.unknown:  # never "no conditions" when some are simply not known
            return f"{known + ' and ' if known else ''}unknown conditions (sources under {', '.join(self.unknown)})"
        return known or "no conditions"


def licensed_parts(sample: Sample) -> list[tuple[str, str]]:
    """(part, license) of a sample: its picture's and its text's, which often differ (a benchmark's annotations
    under its license, its pictures under their sources' terms)."""
    return [("pictures", sample.provenance.license), ("text", sample.provenance.text_license)]


def release_terms(samples: list[Sample]) -> ReleaseTerms:
    """The terms over every picture and every text of the release, each source named with the part its license
    covers ("VisIT-Bench pictures", "ConvBench text")."""
    sources: dict[str, set[str]] = defaultdict(set)
    for sample in samples:
        for part, license_id in licensed_parts(sample):
            sources[license_id].add(f"{sample.provenance.source_dataset} {part}")
    found: set[str] = set()
    conflicts = []
    known = {license_id: conditions(license_id) for license_id in sources}
    for license_id, terms in sorted(known.items()):
        if terms is None:
            conflicts.append(
                f"license '{license_id}' of {', '.join(sorted(sources[license_id]))} is unknown: the "
                f"release cannot state terms for it"
            )
        else:
            found |= terms
    share_alike = sorted(lic for lic, terms in known.items() if terms and "share-alike" in terms)
    non_commercial = sorted(lic for lic, terms in known.items() if terms and "non-commercial" in terms)
    for sa in share_alike:
        for nc in non_commercial:
            if sa != nc:
                conflicts.append(
                    f"{sa} ({', '.join(sorted(sources[sa]))}) requires derivatives under {sa}, which "
                    f"{nc} ({', '.join(sorted(sources[nc]))}) does not allow"
                )
    order = ["attribution", "share-alike", "non-commercial"]
    return ReleaseTerms(
        conditions=[name for name in order if name in found],
        sources_by_license={lic: sorted(names) for lic, names in sorted(sources.items())},
        conflicts=conflicts,
        unknown=sorted(lic for lic, terms in known.items() if terms is None),
    )


def license_warnings(manifest: ReleaseManifest) -> list[str]:
    """What a user must hear when releasing: each conflict and each license nobody knows (of the pictures or of
    the text), from a manifest."""
    conflicts = manifest.license_terms.get("conflicts") or []
    return [f"license conflict: {conflict}" for conflict in (conflicts if isinstance(conflicts, list) else [])]

"""Pick the corpus from the packages unpacked under TARGET/x/ (fetch.sh), copy it into TARGET/files/ and write
TARGET/SOURCES.tsv (standard library only).  usage: pick_corpus.py TARGET"""

import fnmatch
import hashlib
import os
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(sys.argv[1]).resolve()
X, OUT = ROOT / "x", ROOT / "files"
EXTS = {".jpg", ".jpeg", ".png", ".webp"}
# package -> how many PNGs to keep (None = all); JPEG and WebP files are always all kept
PNG_QUOTA = {
    "tuxpaint-stamps-default": 200,
    "openclipart-png": 200,
    "wesnoth-1.16-data": 200,
    "stellarium-data": 100,
    "marble-data": 40,
    "tuxtype-data": 40,
    "khangman": 20,
}
NON_DEP5 = {  # packages whose copyright file is not machine-readable: summary of what it says
    "gnome-backgrounds": "GPL-2+ (package); adwaita* CC-BY-SA-3.0 per copyright's image list",
    "openclipart-png": "public-domain (Creative Commons Public Domain Dedication)",
    "tuxtype-data": "GPL-2 (some images public domain, per copyright)",
    "wesnoth-1.16-data": "GPL-2 (artwork; see copyright)",
}


def magic(path):
    head = path.open("rb").read(16)
    if head.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WEBP"
    return "OTHER"


def dep5(text):
    stanzas, cur = [], {}
    for line in text.splitlines() + [""]:
        if not line.strip():
            if cur:
                stanzas.append(cur)
                cur = {}
            continue
        m = re.match(r"^([A-Za-z-]+):\s*(.*)$", line)
        if m:
            key = m.group(1).lower()
            cur[key] = m.group(2)
        elif line[:1] in " \t" and cur:
            cur[key] = cur[key] + " " + line.strip()
    return [s for s in stanzas if "files" in s]


def license_for(pkg, rel, stanzas):
    if pkg in NON_DEP5:
        return NON_DEP5[pkg]
    found = None
    for s in stanzas:  # last matching stanza wins (DEP-5); patterns name source paths, so match by suffix/basename
        for pat in s["files"].split():
            if (
                pat == "*"
                or fnmatch.fnmatch(rel, "*" + pat.lstrip("./"))
                or (fnmatch.fnmatch(os.path.basename(rel), os.path.basename(pat)) and "*" not in os.path.basename(pat))
                or fnmatch.fnmatch(rel, "*/" + pat)
            ):
                found = s.get("license", "").split(" ")[0] or found
    return found or "see copyright"


rows = []
OUT.mkdir(exist_ok=True)
for pkgdir in sorted(X.iterdir()):
    pkg = pkgdir.name
    cfile = pkgdir / "usr/share/doc" / pkg / "copyright"
    stanzas = dep5(cfile.read_text(errors="replace")) if cfile.exists() and pkg not in NON_DEP5 else []
    version = (ROOT / "versions" / pkg).read_text().strip() if (ROOT / "versions" / pkg).exists() else "?"
    files = sorted(p for p in pkgdir.rglob("*") if p.is_file() and not p.is_symlink() and p.suffix.lower() in EXTS)
    pngs = [p for p in files if magic(p) == "PNG"]
    quota = PNG_QUOTA.get(pkg)
    if quota is not None and len(pngs) > quota:
        keep = set(sorted(pngs, key=lambda p: hashlib.sha1(str(p.relative_to(pkgdir)).encode()).hexdigest())[:quota])
    else:
        keep = set(pngs)
    for p in files:
        fmt = magic(p)
        if fmt == "OTHER" or (fmt == "PNG" and p not in keep):
            continue
        rel = str(p.relative_to(pkgdir))
        name = f"{pkg}__{rel.replace('/', '_')}"
        shutil.copy2(p, OUT / name)
        rows.append((name, pkg, version, "/" + rel, fmt, p.stat().st_size, license_for(pkg, rel, stanzas)))
with (ROOT / "SOURCES.tsv").open("w") as f:
    f.write("file\tpackage\tversion\tpath_in_package\tformat\tbytes\tlicense\n")
    for r in rows:
        f.write("\t".join(map(str, r)) + "\n")
print(len(rows), "files")

#!/bin/bash
# The 1,410 real images of bench/dedup_commands.py's figures (JPEG, PNG and WebP from 19 Debian bookworm packages:
# wallpapers, clip art, game and atlas artwork), with each file's package, version, path and licence in
# SOURCES.tsv (the list used for the README's figures is SOURCES.tsv.gz here). Needs apt-get (Debian or Ubuntu
# with bookworm sources) and root; writes to $1 (default /tmp/real-images): files/ and SOURCES.tsv.
#   sudo bench/real_images/fetch.sh [/tmp/real-images]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
target=${1:-/tmp/real-images}
mkdir -p "$target" && cd "$target"
PKGS="desktop-base gnome-backgrounds mate-backgrounds plasma-workspace-wallpapers ukui-wallpapers sway-backgrounds
lomiri-wallpapers-16.04 lomiri-wallpapers-20.04 mypaint-data-extras tuxpaint-stamps-default openclipart-png
wesnoth-1.16-data stellarium-data marble-data tuxtype-data khangman golang-golang-x-image-dev
golang-github-bep-gowebp-dev golang-github-disintegration-imaging-dev"
apt-get update -qq
rm -rf debs x files versions SOURCES.tsv; mkdir -p debs x versions
(cd debs && apt-get download $PKGS)
for deb in debs/*.deb; do
  name=$(dpkg-deb -f "$deb" Package); dpkg-deb -f "$deb" Version > "versions/$name"
  dpkg -x "$deb" "x/$name"
done
python3 "$here/pick_corpus.py" "$target"

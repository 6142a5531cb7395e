#!/bin/sh
# Applies the project's patch series to kafka-clients' released sources and keeps the files
# they touch, nothing else, as the sources to compile.
#
#   apply-patches.sh PRISTINE OUT "SERIES..."
#
# PRISTINE  the release's sources jar, unpacked (org/apache/kafka/...), left unchanged
# OUT       receives each touched file at its package path (recreated on every run)
# SERIES    directories under this script's directory, applied in order; in each, every
#           *.diff in name order. Empty: nothing is patched (the stock build).
#
# The diffs are written against apache/kafka's repository layout
# (a/clients/src/main/java/org/apache/kafka/...), so they also apply to a checkout of the
# release tag with `git apply`; here `patch -p5` strips a/clients/src/main/java/. --fuzz=0
# makes a diff that no longer matches its context fail instead of landing somewhere else.
set -eu

pristine=$1
out=$2
series=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
work=$out.work

rm -rf "$work" "$out"
mkdir -p "$work" "$out"
cp -R "$pristine"/. "$work"/
: > "$work.touched"
for dir in $series; do
    for diff in "$here/$dir"/*.diff; do
        [ -e "$diff" ] || continue
        echo "applying ${dir}/$(basename "$diff")"
        patch -d "$work" -p5 --batch --forward --fuzz=0 --no-backup-if-mismatch --quiet -i "$diff"
        sed -n 's|^+++ b/clients/src/main/java/\([^\t ]*\).*|\1|p' "$diff" >> "$work.touched"
    done
done
sort -u "$work.touched" | while read -r file; do
    mkdir -p "$out/$(dirname "$file")"
    cp "$work/$file" "$out/$file"
done
echo "patched files: $(sort -u "$work.touched" | wc -l)"
rm -rf "$work" "$work.touched"

#!/usr/bin/env bash
# Compares the files docs/architecture.md names with the files under src/:
# prints each file the page misses and each it names that is not there, and
# exits 1 when there is any. Run it after moving files, then edit the page
# (one line per file, named by its path from the repository root).
set -euo pipefail
cd "$(dirname "$0")/.."

doc=docs/architecture.md
named=$(grep -o 'src/[A-Za-z0-9/_.-]*\.ts' "$doc" | sort -u)
present=$(find src -name '*.ts' | sort -u)

missing=$(comm -13 <(printf '%s\n' "$named") <(printf '%s\n' "$present"))
gone=$(comm -23 <(printf '%s\n' "$named") <(printf '%s\n' "$present"))

for f in $missing; do echo "not in $doc: $f"; done
for f in $gone; do echo "named in $doc, not under src/: $f"; done
[ -z "$missing$gone" ] && echo "$doc names every file under src/"
[ -z "$missing$gone" ]

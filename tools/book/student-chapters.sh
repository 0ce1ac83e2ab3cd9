#!/bin/sh
# student-chapters.sh: the chapters as the students' edition of the book shows
# them: a copy of every chapter with every marked function stubbed (its own
# exercises and those it carries unchanged from earlier chapters), with its
# MANIFEST, so that the diffs drawn from it show no answer.
#
#   BUILD=build CHAPTERS="II.1 II.2 ..." tools/book/student-chapters.sh DIR
set -eu
: "${BUILD:?}" "${CHAPTERS:?}" "${1:?usage: student-chapters.sh DIR}"
rm -rf "$1"
mkdir -p "$1"
for c in $CHAPTERS; do
    "$BUILD/tools/exercises" stub --all "$c" "$1/$c" >/dev/null
    rm -f "$1/$c/EXERCISES.md"
    cp "chapters/$c/MANIFEST" "$1/$c/MANIFEST"
done

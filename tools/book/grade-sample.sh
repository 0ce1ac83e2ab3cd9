#!/bin/sh
# grade-sample.sh CHAPTER: what `make chapter=CHAPTER grade` prints for a copy
# in which every other exercise is solved (the reference put back) and the
# rest are fresh stubs. book/instructors.md shows it (make book runs this), so
# the sample is always the grader's real output. Run from the top of the
# repository with the grader, common/ and the test models built.
set -u
chapter=${1:?usage: grade-sample.sh CHAPTER}
BUILD=${BUILD:-build}
tool=$BUILD/tools/exercises
work=$BUILD/book/grade-sample/$chapter
rm -rf "${work:?}"
mkdir -p "$work" || exit 1
"$tool" stub "$chapter" "$work/copy" >/dev/null || exit 1
i=0
for id in $("$tool" list "$chapter" | cut -f1); do
    [ $((i % 2)) = 0 ] && { "$tool" restore "$chapter" "$work/copy" "$id" >/dev/null || exit 1; }
    i=$((i + 1))
done
echo "\$ make chapter=$chapter grade"
BUILD=$BUILD GRADE_OUT=$work/out tools/exercises/grade.sh "$chapter" "$work/copy" >"$work/log" 2>&1
sed "s|$work/copy|exercises/$chapter|g; s|$work/out|$BUILD/exercises/$chapter|g" "$work/log"
grep -q '^Score: ' "$work/log"

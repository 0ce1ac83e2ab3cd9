#!/bin/sh
# fresh-clone-check.sh: the instructor's commands on a fresh clone, nothing built.
#
# Clones the checkout's current commit (committed files only) into a temporary
# directory and, for every chapter that has exercises, runs what an instructor
# runs first (book/instructors.md), expecting:
#   make chapter=X exercise                    a stubbed copy in exercises/X
#   make chapter=X grade                       Score: 0/T (T > 0) and a non-zero exit
#   cp chapters/X/*.c exercises/X/             the reference handed in as the solution
#   make chapter=X grade                       Score: T/T and exit 0
#   make chapter=X coverage                    its tests pass, the TOTAL line and "chapter X alone: lines ..."
# Every chapter starts from nothing built again (git clean), and every other
# chapter runs coverage first, so both orders are tried from scratch: make
# prerequisites must not depend on what an earlier command happened to build.
#
# Run from anywhere inside the repository: tools/fresh-clone-check.sh
# Environment: MAKEFLAGS passes through (default -j2); KEEP=1 keeps the clone.
# Prints one line per step with its time and one per failure; exits non-zero
# when any step failed.
set -u

src=$(git rev-parse --show-toplevel) || exit 2
commit=$(git -C "$src" rev-parse HEAD) || exit 2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fresh-clone.XXXXXX") || exit 2
if [ -n "${KEEP:-}" ]; then echo "fresh-clone-check: keeping $tmp"
else trap 'rm -rf "$tmp"' EXIT; fi
export MAKEFLAGS="${MAKEFLAGS:--j2}"
unset BUILD CFLAGS TEST_MODELS BUILD_DIR GRADE_OUT EXERCISE_DIR EXERCISE

clone=$tmp/course
git clone -q --no-checkout "$src" "$clone" && git -C "$clone" checkout -q "$commit" || exit 2
cd "$clone" || exit 2
echo "fresh-clone-check: commit $(git rev-parse --short HEAD) in $clone"

failures=0
fail() {
    echo "fresh-clone-check: FAIL: $*" >&2
    [ -f "$tmp/out" ] && tail -n 12 "$tmp/out" | sed 's/^/    | /' >&2
    failures=$((failures + 1))
    return 1
}

# step NAME CMD...: runs CMD with its output in $tmp/out, prints its time; sets rc.
step() {
    name=$1
    shift
    t0=$(date +%s)
    "$@" >"$tmp/out" 2>&1
    rc=$?
    echo "  $(printf '%-46s' "$name") $(($(date +%s) - t0)) s"
}

score() { sed -n 's/^Score: \([0-9]*\/[0-9]*\)$/\1/p' "$tmp/out" | tail -n 1; }

grade_stubs() {
    step "make chapter=$1 grade (fresh stubs)" make chapter="$1" grade
    s=$(score)
    [ -n "$s" ] || { fail "$1: the stubs' grade printed no score (exit $rc)"; return; }
    [ "${s%/*}" = 0 ] && [ "${s#*/}" -gt 0 ] || fail "$1: the fresh stubs scored $s, want 0/N with N > 0"
    ! grep -q 'cannot load test model\|cannot open .*models/' "$tmp/out" ||
        fail "$1: the stubs failed for want of a test model, not for being stubs"
    [ "$rc" -ne 0 ] || fail "$1: grading the stubs scored $s but exited 0"
}

grade_reference() {
    cp chapters/"$1"/*.c exercises/"$1"/ || fail "cannot copy chapters/$1/*.c"
    step "make chapter=$1 grade (reference copied in)" make chapter="$1" grade
    s=$(score)
    [ -n "$s" ] || { fail "$1: the reference's grade printed no score (exit $rc)"; return; }
    [ "${s%/*}" = "${s#*/}" ] && [ "${s#*/}" -gt 0 ] || fail "$1: the reference scored $s, want full marks"
    [ "$rc" -eq 0 ] || fail "$1: the reference scored $s but the grade exited $rc"
}

exercise() {
    step "make chapter=$1 exercise" make chapter="$1" exercise
    [ "$rc" -eq 0 ] && [ -f exercises/"$1"/EXERCISES.md ] || fail "$1: make exercise (exit $rc) made no exercises/$1"
}

coverage() {
    step "make chapter=$1 coverage" make chapter="$1" coverage
    [ "$rc" -eq 0 ] || fail "$1: make coverage exited $rc"
    grep -q '^[0-9]* passed, 0 failed' "$tmp/out" || fail "$1: tests failed in the coverage build"
    grep -q '^TOTAL' "$tmp/out" || fail "$1: coverage printed no TOTAL line"
    grep -q "^chapter $1 alone: lines" "$tmp/out" || fail "$1: coverage printed no 'chapter $1 alone' line"
}

start=$(date +%s)
n=0
for dir in chapters/*/; do
    chapter=$(basename "$dir")
    grep -q '^/\* EXERCISE ' "$dir"*.c 2>/dev/null || { echo "$chapter: no exercises"; continue; }
    git clean -xdfq && git checkout -q . || exit 2 # nothing built, nothing handed out
    echo "$chapter:"
    if [ $((n % 2)) = 1 ]; then coverage "$chapter"; fi
    exercise "$chapter"
    grade_stubs "$chapter"
    grade_reference "$chapter"
    if [ $((n % 2)) = 0 ]; then coverage "$chapter"; fi
    n=$((n + 1))
done
[ "$n" -gt 0 ] || fail "no chapter has exercises"
if [ "$failures" -gt 0 ]; then
    echo "fresh-clone-check: $failures failures in $n chapters ($(($(date +%s) - start)) s)" >&2
    exit 1
fi
echo "fresh-clone-check: $n chapters ok in $(($(date +%s) - start)) s"

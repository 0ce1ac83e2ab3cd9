#!/bin/sh
# grade.sh [--json FILE] CHAPTER DIR [ID]: grades the exercises of CHAPTER in
# DIR (a student's copy made by `make chapter=CHAPTER exercise`, or the chapter
# itself), or only exercise ID. Prints one line per exercise and "Score:
# got/total"; exits 0 only when every graded exercise passed (1 otherwise, 2 on
# a usage error). --json FILE (or GRADE_JSON=FILE) also writes the result for
# autograders: {"chapter", "dir", "points", "max", "pass", "exercises": [{"name",
# "title", "points", "max", "pass", "reason"}]}.
#
# Exercise X is graded on a variant of DIR in which every other exercise is
# the reference version (`exercises variant`): X passes or fails on its own,
# whatever state the others are in. The variant is compiled with the same
# common/ library and the chapter's own tests, and X passes when every test
# its marker names passes (a crash, a hang or a build error is a FAIL).
#
# Run from the top of the repository. Environment (the make targets set it):
#   BUILD (build), CC (cc), CFLAGS, LDLIBS, COMMON_LIB ($BUILD/obj/libcommon.a),
#   EXERCISES_TOOL ($BUILD/tools/exercises), GRADE_TIMEOUT (seconds per run, 300),
#   GRADE_OUT (where builds and logs go: $BUILD/exercises/CHAPTER), GRADE_JSON
set -u

json=${GRADE_JSON:-}
if [ "${1:-}" = --json ]; then
    json=${2:?usage: grade.sh [--json FILE] CHAPTER DIR [ID]}
    shift 2
fi
chapter=${1:?usage: grade.sh [--json FILE] CHAPTER DIR [ID]}
dir=${2:?usage: grade.sh [--json FILE] CHAPTER DIR [ID]}
only=${3:-}
BUILD=${BUILD:-build}
CC=${CC:-cc}
CFLAGS=${CFLAGS:--O2 -g -std=c11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE}
LDLIBS=${LDLIBS:--lm -lpthread}
COMMON_LIB=${COMMON_LIB:-$BUILD/obj/libcommon.a}
tool=${EXERCISES_TOOL:-$BUILD/tools/exercises}
limit=${GRADE_TIMEOUT:-300}

if [ ! -d "$dir" ]; then
    echo "grade: no directory $dir (make it with: make chapter=$chapter exercise)" >&2
    exit 2
fi
list=$("$tool" list "$chapter") || exit 2
if [ -n "$only" ] && ! printf '%s\n' "$list" | cut -f1 | grep -qx -- "$only"; then
    echo "grade: chapter $chapter has no exercise '$only'; it has: $(printf '%s\n' "$list" | cut -f1 | tr '\n' ' ')" >&2
    exit 2
fi

out=${GRADE_OUT:-$BUILD/exercises/$chapter}
cache=$BUILD/exercises/cache
# The grader removes only what it made: a GRADE_OUT it did not make must be new or empty.
if [ -n "${GRADE_OUT:-}" ] && [ ! -f "$out/.grade-out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
    echo "grade: GRADE_OUT=$out already holds files the grader did not write; give a new or empty directory" >&2
    exit 2
fi
mkdir -p "$out" && : >"$out/.grade-out" || exit 2
rm -rf "${out:?}/bin"
mkdir -p "$out/bin" "$cache" || exit 2
find "$cache" -type f -mtime +7 -exec rm -f {} + # objects no grading has used for a week
# Stubs leave helpers unused; that is not the student's fault.
flags="$CFLAGS -Wno-unused-function"
run_timeout=
command -v timeout >/dev/null 2>&1 && run_timeout="timeout $limit"
# common/ and each of its layers' folders (see the Makefile's COMMON_INC).
common_inc=-Icommon
for d in common/*/; do common_inc="$common_inc -I${d%/}"; done
# What every object depends on besides its own file and the variant's headers.
base_key=$( (echo "$CC $flags"; cat common/*.h common/*/*.h tests/*.h tests/ref/*.h 2>/dev/null) | cksum | tr ' ' '-')

# compile SRC: sets obj, the object of SRC compiled against $variant's headers.
# Objects are cached by content ($hkey: compiler, flags and headers; then the
# file's name and text), so the chapter's tests are compiled once, and a
# variant only recompiles the files that differ.
compile() {
    obj=$cache/$( (echo "$hkey ${1#"$variant"/}"; cat "$1") | cksum | tr ' ' '-').o
    [ -f "$obj" ] && touch "$obj" && return 0
    $CC $flags -Itests -Itests/ref -I"$variant" $common_inc -c "$1" -o "$obj.tmp$$" >>"$log" 2>&1 || return 1
    mv "$obj.tmp$$" "$obj"
}

# build VARIANT: sets bin, the chapter's tests linked with the engine from
# VARIANT. Identical variants (all of them, when grading the reference) share
# one binary.
tests_hkey=
build() {
    variant=$1
    bin=$out/bin/$( (echo "$base_key"; cat "$variant"/*.c "$variant"/*.h) 2>/dev/null | cksum | tr ' ' '-')
    [ -f "$bin" ] && return 0
    hkey=$( (echo "$base_key"; cat "$variant"/*.h 2>/dev/null) | cksum | tr ' ' '-')
    if [ "$hkey" != "$tests_hkey" ]; then
        tests_objs=
        for src in tests/chapters/"$chapter"/*.c tests/ref/*.c tests/harness.c; do
            [ -f "$src" ] || continue
            compile "$src" || return 1
            tests_objs="$tests_objs $obj"
        done
        tests_hkey=$hkey
    fi
    objs=
    for src in "$variant"/*.c; do
        [ -f "$src" ] || continue
        case "$src" in "$variant"/*-*.c) continue ;; esac # a program's main, as in the Makefile
        compile "$src" || return 1
        objs="$objs $obj"
    done
    $CC $flags -o "$bin" $objs $tests_objs "$COMMON_LIB" $LDLIBS >>"$log" 2>&1
}

# The chapter's test names, for matching the markers' substrings.
all_tests=$(sed -n 's/^TEST(\([A-Za-z0-9_]*\)).*/\1/p' tests/chapters/"$chapter"/*.c)

# run_test BIN NAME: runs one test in its own process (so a crash is pinned on
# it), once per binary; appends its output to $work/test.log and prints its
# verdict: "" when it passed.
run_test() {
    res=$1.$2
    if [ ! -f "$res.log" ]; then
        $run_timeout "$1" "$2" >"$res.log" 2>&1 </dev/null
        echo $? >"$res.rc"
    fi
    cat "$res.log" >>"$work/test.log"
    if grep -qx "ok   $2" "$res.log"; then echo
    elif grep -qx "FAIL $2" "$res.log"; then echo "failed"
    elif grep -qx "skip $2" "$res.log"; then echo "skipped"
    elif [ "$(cat "$res.rc")" = 124 ]; then echo "timed out after $limit s"
    else echo "crashed (exit $(cat "$res.rc"))"
    fi
}

# why LOG: a few lines saying why a test failed: stub notes, the failed
# tests, their first messages.
why() {
    awk '/not implemented yet/ { if (!seen[$0]++ && n1 < 3) a[n1++] = $0; next }
         /^FAIL / { if (n2 < 3) b[n2++] = $0; next }
         /^    / { sub(/^ +/, ""); if (!seen[$0]++ && n3 < 2) c[n3++] = substr($0, 1, 300) }
         END { for (i = 0; i < n1; i++) print "        " a[i]
               for (i = 0; i < n2; i++) print "        " b[i]
               for (i = 0; i < n3; i++) print "          " c[i] }' "$1"
}

# A JSON string of $1 (the grader's own messages and markers' titles: no control characters).
json_str() {
    printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' | tr '\t\n\r' '   ')"
}

echo "Grading $dir (chapter $chapter): each exercise with your version of it and the reference of the others"
got=0
total=0
entries=
tab=$(printf '\t')
while IFS=$tab read -r id points _file _function tests title; do
    [ -n "$only" ] && [ "$id" != "$only" ] && continue
    total=$((total + points))
    work=$out/$id
    rm -rf "$work"
    mkdir -p "$work"
    log=$work/build.log
    : >"$log"
    : >"$work/test.log"
    verdict=
    names=
    for name in $all_tests; do
        for t in $tests; do
            case "$name" in *"$t"*) names="$names $name"; break ;; esac
        done
    done
    if [ -z "$names" ]; then
        verdict="no test in tests/chapters/$chapter matches: $tests"
    elif ! "$tool" variant "$chapter" "$dir" "$id" "$work/src" >>"$log" 2>&1 </dev/null; then
        verdict="cannot assemble the variant"
    elif ! build "$work/src" </dev/null; then
        verdict="does not build"
    else
        for name in $names; do # up to the first failure: that decides
            v=$(run_test "$bin" "$name")
            [ -n "$v" ] && verdict="$name $v" && break
        done
    fi
    [ -n "$entries" ] && entries="$entries,"
    entries="$entries
    {\"name\": $(json_str "$id"), \"title\": $(json_str "$title"), \"points\": $([ -z "$verdict" ] && echo "$points" || echo 0), \"max\": $points, \"pass\": $([ -z "$verdict" ] && echo true || echo false), \"reason\": $(json_str "$verdict")}"
    if [ -z "$verdict" ]; then
        got=$((got + points))
        printf 'OK    %-20s %2d/%-2d  %s\n' "$id" "$points" "$points" "$title"
    else
        printf 'FAIL  %-20s %2d/%-2d  %s: %s\n' "$id" 0 "$points" "$title" "$verdict"
        case "$verdict" in
            "does not build") # name the student's file, not the variant's
                grep -m 3 'error' "$log" | sed "s|$work/src/|$dir/|; s/^/        /" ;;
            "cannot assemble"*) head -n 3 "$log" | sed 's/^/        /' ;;
            "no test"*) ;;
            *) why "$work/test.log" ;;
        esac
    fi
done <<EOF
$list
EOF
[ "$got" -lt "$total" ] && echo "Logs of each exercise: $out/<id>/ (build.log, test.log)"
echo "Score: $got/$total"
pass=$([ "$got" -eq "$total" ] && echo true || echo false)
if [ -n "$json" ]; then
    printf '{"chapter": %s, "dir": %s, "points": %d, "max": %d, "pass": %s, "exercises": [%s\n]}\n' \
        "$(json_str "$chapter")" "$(json_str "$dir")" "$got" "$total" "$pass" "$entries" >"$json.tmp$$" &&
        mv "$json.tmp$$" "$json" || { echo "grade: cannot write $json" >&2; exit 2; }
    echo "JSON: $json"
fi
[ "$pass" = true ]

#!/bin/sh
# no-answers.sh: the students' edition shows no answer. No page of a chapter
# (one that shows its code, or a diff into it or into one of its stages) holds
# three lines in a row of the body of one of the chapter's marked functions
# (`exercises leaks`; see tools/exercises/leaks.h). Run by site.sh on the
# students' edition and by the book's test (tests/book) on its parts.
#
#   BUILD=build OUT=build/book-student CHAPTERS="II.1 ..." tools/book/no-answers.sh EXT
#
# Pages are OUT/<page>.EXT, named as site.sh names them; diffs OUT/diff/*.html.
set -eu
: "${BUILD:?}" "${OUT:?}" "${CHAPTERS:?}" "${1:?usage: no-answers.sh EXT}"
ext=$1
page_of() {
    case $1 in
    README.md) echo project ;;
    book/introduction.md) echo index ;;
    *) basename "$1" .md ;;
    esac
}
stages=$("$BUILD/tools/chapter-diff" --chapters-dir chapters --stages)
rc=0
for c in $CHAPTERS; do
    set --
    for f in README.md book/*.md; do
        p=$OUT/$(page_of "$f").$ext
        if grep -q "chapters/$c/" "$f" && [ -f "$p" ]; then set -- "$@" "$p"; fi
    done
    for s in $c $(printf '%s\n' "$stages" | awk -F'\t' -v c="$c" '$1 == c { print $2 }'); do
        for d in "$OUT"/diff/*.."$s".html "$OUT"/diff/*.."$s".part.html; do
            if [ -f "$d" ]; then set -- "$@" "$d"; fi
        done
    done
    [ $# -eq 0 ] || "$BUILD/tools/exercises" leaks "$c" "$@" || rc=1
done
exit $rc

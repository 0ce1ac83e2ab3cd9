#!/bin/sh
# site.sh: renders the book as a website (run by `make book`; see tools/book.mk).
#
#   BUILD=build OUT=build/book CHAPTERS="II.1 II.2 ..." [STUDENT=1] tools/book/site.sh
#
# Every book/*.md and the project's README.md go through bookpp (code pulled in,
# tables and figures generated) and pandoc (tools/book/page.html, highlighted C,
# a table of contents per page). The order of the pages is the table of
# book/README.md: the sidebar lists them and each page links to the one before
# and after it. A page named after a chapter directory (II.2-kv-cache.md for
# chapters/II.2) also gets the chapter's exercises and its diff from the
# chapter before, folded by file (tools/chapters: chapter-diff --fragment).
set -eu
: "${BUILD:?}" "${OUT:?}" "${CHAPTERS:?}"
STUDENT=${STUDENT:-}
bookpp=$BUILD/tools/bookpp
mkdir -p "$OUT/diff" "$OUT/.parts"
to_root=$(realpath --relative-to="$OUT" .)

# The page of a markdown file: book/NAME.md -> NAME, but the introduction is
# index and the project's README is project (as bookpp links them).
page_of() {
    case $1 in
    README.md) echo project ;;
    book/introduction.md) echo index ;;
    *) basename "$1" .md ;;
    esac
}

html_escape() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/`//g'; }

# The book's order: "page<TAB>title" for each row of book/README.md's table.
order=$OUT/.parts/order
sed -n 's/^| \[\([^]]*\.md\)\]([^)]*) | \(.*\) |$/\1\t\2/p' book/README.md |
    while IFS="$(printf '\t')" read -r file title; do
        [ -f "book/$file" ] || { echo "book/README.md lists $file, which does not exist" >&2; exit 1; }
        printf '%s\t%s\n' "$(page_of "book/$file")" "$(printf '%s' "$title" | html_escape)"
    done >"$order"
[ -s "$order" ] || { echo "book/README.md has no table of pages" >&2; exit 1; }
for f in book/*.md; do
    grep -q "^| \[$(basename "$f")\](" book/README.md || [ "$f" = book/README.md ] ||
        echo "book: $f is not in book/README.md's table: it gets no place in the sidebar" >&2
done

sidebar() { # the navigation, with page $1 marked
    echo '<p class="booktitle"><a href="index.html">Inference from scratch</a></p><ol>'
    while IFS="$(printf '\t')" read -r p t; do
        if [ "$p" = "$1" ]; then echo "<li class=\"here\"><a href=\"$p.html\" aria-current=\"page\">$t</a></li>"
        else echo "<li><a href=\"$p.html\">$t</a></li>"; fi
    done <"$order"
    echo '</ol><p class="aside"><a href="README.html">About the sources</a> · <a href="project.html">The project README</a></p>'
}

prevnext() { # previous/next links of page $1 in the book's order
    awk -F'\t' -v p="$1" '{ page[NR] = $1; title[NR] = $2; if ($1 == p) at = NR }
        END { if (!at) exit; printf "<nav class=\"prevnext\">";
              if (at > 1) printf "<a class=\"prev\" href=\"%s.html\">&larr; %s</a>", page[at-1], title[at-1];
              if (at < NR) printf "<a class=\"next\" href=\"%s.html\">%s &rarr;</a>", page[at+1], title[at+1];
              print "</nav>" }' "$order"
}

previous_chapter() { # the chapter directory before $1 in book order, or nothing
    prev=
    for c in $CHAPTERS; do [ "$c" = "$1" ] && { echo "$prev"; return; }; prev=$c; done
}

# A chapter's page: its exercises, how to check coverage, and its diff.
chapter_sections() {
    c=$1
    printf '\n## Exercises and coverage of chapter %s {#chapter-exercises}\n\n' "$c"
    exs=$("$BUILD/tools/exercises" list "$c")
    if [ -n "$exs" ]; then
        echo "Each exercise is a function of the chapter you rewrite from a stub, graded by the tests named"
        echo "(\`make chapter=$c exercise\` makes the stubs, \`make chapter=$c grade\` grades them; see"
        echo "[the exercises](instructors.html#the-exercises)):"
        echo
        echo "| id | function | points | task |"
        echo "|---|---|---|---|"
        printf '%s\n' "$exs" | awk -F'\t' '{ printf "| `%s` | `%s` (%s) | %s | %s |\n", $1, $4, $3, $2, $6 }'
    else
        echo "This chapter marks no exercises of its own."
    fi
    echo
    echo "Line coverage of the chapter's code by its tests: \`make chapter=$c coverage\` (a summary, and an"
    echo "annotated HTML report per file; see [coverage](instructors.html#coverage))."
    prev=$(previous_chapter "$c")
    if [ -z "$prev" ]; then
        printf '\n## The code of chapter %s {#chapter-diff}\n\n' "$c"
        echo "The first snapshot: every file of \`chapters/$c\` is new."
        echo
        for f in chapters/"$c"/*; do echo "- [\`$(basename "$f")\`]($to_root/$f)"; done
        return
    fi
    "$BUILD/tools/chapter-diff" --chapters-dir chapters --html "$OUT/diff" "$prev" "$c" >/dev/null
    "$BUILD/tools/chapter-diff" --chapters-dir chapters --html "$OUT/diff" --fragment "$prev" "$c" >/dev/null
    printf '\n## What chapter %s changes from %s {#chapter-diff}\n\n' "$c" "$prev"
    echo "Every file the chapter adds or changes, folded: open one to see its functions side by side, old"
    echo "on the left, new on the right ([the whole diff on one page](diff/$prev..$c.html); in a terminal:"
    echo "\`make diff from=$prev to=$c\`)."
    echo
    echo '```{=html}'
    cat "$OUT/diff/$prev..$c.part.html"
    echo '```'
}

for f in README.md book/*.md; do
    page=$(page_of "$f")
    md=$OUT/$page.md
    BUILD=$BUILD "$bookpp" ${STUDENT:+--student} --html "$to_root" --data "$OUT" "$f" >"$md"
    c=${page%%-*}
    if [ "$c" != "$page" ] && [ -d "chapters/$c" ]; then
        chapter_sections "$c" >>"$md"
    fi
    sidebar "$page" >"$OUT/.parts/$page.nav"
    prevnext "$page" >"$OUT/.parts/$page.after"
    title=$(head -n1 "$f" | sed 's/^# //')
    # the page's own title (its first line) becomes its title block, out of its table of contents
    sed -i '1s/^# /% /' "$md"
    pandoc --standalone --template tools/book/page.html --toc --toc-depth=3 --highlight-style=pygments \
        --metadata pagetitle="$(printf '%s' "$title" | tr -d '`')" \
        --include-before-body="$OUT/.parts/$page.nav" --include-after-body="$OUT/.parts/$page.after" \
        -o "$OUT/$page.html" "$md"
done
cp tools/book/book.css "$OUT/book.css"

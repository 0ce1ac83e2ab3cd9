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
# chapters/II.2) also gets the chapter's exercises; a page named after a stage
# of the book (III.5-6-... for the stages III.5 and III.6 of chapter III.7's
# MANIFEST) the diff of that stage alone, folded by file (tools/chapters:
# chapter-diff --stage --fragment). In the students' edition (STUDENT=1) the
# diffs are drawn from stubbed copies of the chapters.
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

# The chapters the diffs are drawn from: chapters/ itself, or in the students'
# edition a copy of every chapter with every marked function stubbed (its
# exercises and those it carries from earlier chapters), so that no view of
# the code shows an answer.
diff_src=chapters
check_flag=
if [ -n "$STUDENT" ]; then
    diff_src=$OUT/.parts/chapters
    BUILD=$BUILD CHAPTERS=$CHAPTERS tools/book/student-chapters.sh "$diff_src"
    check_flag=--no-check # a stub can make a declared change vanish: the verdict is the reader's edition's
fi
stages=$OUT/.parts/stages # chapter, stage, the view before it, title (chapter-diff --stages)
"$BUILD/tools/chapter-diff" --chapters-dir chapters --stages >"$stages"

# The stages a page teaches, from its name: III.4-paged-kv.md is stage III.4,
# III.2-3-chat-server.md stage III.2-3, III.5-6-... the stages III.5 and III.6.
stages_of_page() {
    key=$(printf '%s\n' "$1" | sed -n 's/^\([IVX]*\.[0-9]*\(-[0-9]*\)\{0,1\}\)\(-.*\)\{0,1\}$/\1/p')
    [ -n "$key" ] || return 0
    awk -F'\t' -v key="$key" '
        BEGIN { n = split(key, k, /[.-]/) }
        { split($2, s, /[.-]/) }
        $2 == key || (n == 3 && s[1] == k[1] && $2 !~ /-/ && s[2] + 0 >= k[2] + 0 && s[2] + 0 <= k[3] + 0) { print $2 }' "$stages"
}

# A chapter's page: its exercises and how to check coverage.
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
    if [ -z "$(previous_chapter "$c")" ]; then
        printf '\n## The code of chapter %s {#chapter-diff}\n\n' "$c"
        echo "The first snapshot: every file of \`chapters/$c\` is new."
        echo
        for f in chapters/"$c"/*; do echo "- [\`$(basename "$f")\`]($to_root/$f)"; done
    fi
}

# A stage's page: the diff of that lesson alone, folded by file (tools/chapters:
# chapter-diff --stage, --fragment), with the page of it and the whole chapter's.
stage_section() {
    s=$1
    line=$(awk -F'\t' -v s="$s" '$2 == s' "$stages")
    c=$(printf '%s' "$line" | cut -f1)
    before=$(printf '%s' "$line" | cut -f3)
    prev=$(previous_chapter "$c")
    "$BUILD/tools/chapter-diff" --chapters-dir "$diff_src" $check_flag --html "$OUT/diff" --stage "$s" >/dev/null
    "$BUILD/tools/chapter-diff" --chapters-dir "$diff_src" $check_flag --html "$OUT/diff" --fragment --stage "$s" >/dev/null
    "$BUILD/tools/chapter-diff" --chapters-dir "$diff_src" $check_flag --html "$OUT/diff" "$prev" "$c" >/dev/null
    printf '\n## What stage %s changes {#stage-diff-%s}\n\n' "$s" "$(printf '%s' "$s" | tr . -)"
    if [ "$s" = "$c" ] && [ "$before" = "$prev" ]; then
        echo "Every file chapter $c adds or changes from $prev, folded: open one to see its functions side by"
    else
        echo "This lesson alone, one stage of chapter $c (\`chapters/$c/MANIFEST\` groups its changes by"
        echo "stage): every file it adds or changes, from the engine as it was before it ($before), folded:"
        echo "open one to see its functions side by"
    fi
    echo "side, old on the left, new on the right ([this diff on one page](diff/$before..$s.html); in a"
    echo "terminal: \`make diff stage=$s\`; the whole chapter $prev to $c: [one page](diff/$prev..$c.html),"
    echo "\`make diff from=$prev to=$c\`)."
    echo
    echo '```{=html}'
    cat "$OUT/diff/$before..$s.part.html"
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
    for s in $(stages_of_page "$page"); do stage_section "$s" >>"$md"; done
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

# The students' edition shows no answer (tools/book/no-answers.sh).
if [ -n "$STUDENT" ]; then
    BUILD=$BUILD OUT=$OUT CHAPTERS=$CHAPTERS tools/book/no-answers.sh html ||
        { echo "book: the students' edition shows the answers above" >&2; exit 1; }
    echo "book: the students' edition shows no exercise's answer (tools/book/no-answers.sh)"
fi

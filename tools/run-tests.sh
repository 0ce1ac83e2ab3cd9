#!/bin/sh
# Runs each test binary given, shows its output, and ends with the total line
# "N passed, N failed, N skipped". Exits non-zero if any test failed.
passed=0; failed=0; skipped=0; crashed=0
for t in "$@"; do
    echo "== $t"
    t0=$(date +%s)
    out=$("$t" 2>&1); rc=$?
    printf '%s\n' "$out"
    echo "   ($t: $(($(date +%s) - t0)) s)"
    last=$(printf '%s\n' "$out" | tail -n 1)
    case "$last" in
        *" passed, "*" failed"*)
            p=$(echo "$last" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
            f=$(echo "$last" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
            s=$(echo "$last" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')
            passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + ${s:-0}))
            [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && { echo "   $t exited $rc"; failed=$((failed + 1)); } ;;
        *)
            echo "   $t ended without a summary line (exit $rc): counted as one failure"
            failed=$((failed + 1)) ;;
    esac
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]

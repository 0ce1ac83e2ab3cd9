#!/bin/sh
# tools/embed.sh NAME FILE: a C file defining NAME[] (FILE's bytes) and
# NAME_len, for data compiled into a program (chat-server's page).
set -e
name=$1 file=$2
[ -n "$name" ] && [ -f "$file" ] || { echo "usage: tools/embed.sh NAME FILE" >&2; exit 2; }
echo "/* Made by tools/embed.sh from $file: do not edit. */"
echo "#include <stddef.h>"
echo "const unsigned char ${name}[] = {"
od -An -v -tu1 "$file" | sed -e 's/^ *//' -e 's/  */,/g' -e 's/$/,/' -e '/^,$/d'
echo "0};"
echo "const size_t ${name}_len = $(wc -c < "$file");"

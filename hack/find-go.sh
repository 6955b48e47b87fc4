#!/bin/sh
# Prints the go command that builds nsbox: the first of `go` on PATH and
# /usr/local/go/bin/go whose own version is at least go.mod's; when none
# is, the first that exists (Go 1.21 and later fetch go.mod's toolchain
# themselves where GOTOOLCHAIN allows), else /usr/local/go/bin/go, where
# hack/install-deps.sh puts one.
want=$(sed -n 's/^go //p' "$(dirname "$0")/../go.mod")
first=
for g in "$(command -v go 2>/dev/null)" /usr/local/go/bin/go; do
  [ -n "$g" ] && [ -x "$g" ] || continue
  [ -n "$first" ] || first=$g
  # From /: in a module that asks for more, an older go refuses to run.
  have=$(cd / && GOTOOLCHAIN=local "$g" version 2>/dev/null | awk '{ sub(/^go/, "", $3); print $3 }')
  if [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -n 1)" = "$want" ]; then
    echo "$g"
    exit 0
  fi
done
echo "${first:-/usr/local/go/bin/go}"

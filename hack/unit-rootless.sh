#!/bin/sh
# Runs the unit tests whose behaviour depends on the caller's uid a second
# time as uid 65534 (make unit calls it when run as root): pkg/cgroups
# falls back to rlimits there, pkg/namespaces spawns with ambient
# capabilities, pkg/policy's glob and end-of-run audit meet directories they cannot read, and
# pkg/notify's metadata gate serves a supervisor that keeps its own ids. Integration tests do the same for the whole binary.
set -eu
if [ "$(id -u)" != 0 ]; then
	exit 0
fi
if ! command -v setpriv >/dev/null; then
	echo "unit-rootless: setpriv (util-linux) not found: root-less unit tests skipped" >&2
	exit 0
fi
GO=${GO:-go}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
chmod 755 "$dir"
# PKG[:TESTS]: TESTS is a -test.run pattern (pkg/policy's glob tests need
# a uid that file permissions apply to; its other tests need the checkout).
for spec in ./pkg/cgroups ./pkg/namespaces './pkg/policy:Glob|Review71AuditNested|Review72|Review73' ./pkg/notify:MetaGate; do
	pkg=${spec%%:*}
	run=.
	case $spec in *:*) run=${spec#*:} ;; esac
	bin="$dir/$(basename "$pkg").test"
	$GO test $GOFLAGS -c -o "$bin" "$pkg"
	chmod 755 "$bin"
	if out=$(cd / && env -i PATH="$PATH" HOME=/tmp setpriv --reuid=65534 --regid=65534 --clear-groups "$bin" -test.count=1 -test.run "$run" 2>&1); then
		echo "ok (root-less) $pkg"
	else
		printf '%s\nFAIL (root-less) %s\n' "$out" "$pkg"
		exit 1
	fi
done

# nsbox — build and test. `make` installs what is missing (as root, through
# apt) and builds bin/nsbox; `make test` runs the whole suite.
# The first Go at least as new as go.mod's (hack/find-go.sh); `make`
# installs one in /usr/local/go when there is none (hack/install-deps.sh).
GO      ?= $(shell hack/find-go.sh)
BIN     := bin/nsbox
TAGS    := seccomp
GOFLAGS := -tags=$(TAGS) -trimpath

.PHONY: all deps build test unit integration fuzz test-vm bench soak install clean

all: deps build

deps:
	@hack/install-deps.sh
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix test/integration/mcp/node --no-audit --no-fund --silent; \
	else \
		echo "SKIP: npm is not installed: the MCP TypeScript client test will skip (apt-get install npm)"; \
	fi

# bin/nsbox is linked statically (libc.a, libseccomp.a) where the toolchain
# can: the supervisor and the re-executed worker then skip the dynamic
# loader, ~0.7 ms of every sandbox start (docs/benchmarks.md). osusergo and
# netgo keep glibc's NSS out of the static binary (nsbox looks up neither
# users nor hosts). STATIC=0, or a host without the static libraries (a
# note says so), builds it dynamically linked.
STATIC ?= 1
STATIC_FLAGS := -tags=$(TAGS),osusergo,netgo -trimpath -ldflags '-linkmode external -extldflags -static'

build:
	@mkdir -p $(dir $(BIN))
	@if [ "$(STATIC)" = 1 ] && $(GO) build $(STATIC_FLAGS) -o $(BIN) ./cmd/nsbox 2>$(BIN).static.log; then \
		echo "$(GO) build $(STATIC_FLAGS) -o $(BIN) ./cmd/nsbox"; rm -f $(BIN).static.log; \
	else \
		if [ "$(STATIC)" = 1 ]; then \
			echo "note: static link failed (libc.a or libseccomp.a missing?), building bin/nsbox dynamically linked:"; \
			grep -E 'cannot find|undefined reference|error' $(BIN).static.log | sed 's/^/  /' | head -n 3; rm -f $(BIN).static.log; \
		fi; \
		echo "$(GO) build $(GOFLAGS) -o $(BIN) ./cmd/nsbox"; $(GO) build $(GOFLAGS) -o $(BIN) ./cmd/nsbox; \
	fi

# Unit tests, integration tests of the built binary (root and root-less),
# a short fuzz run of the protocol decoder, and the cgroup v2 VM tests when
# qemu is installed.
test: build unit integration fuzz test-vm

unit:
	$(GO) test $(GOFLAGS) -count=1 ./pkg/... ./cmd/...
	cd contrib/kubernetes && $(GO) test -count=1 ./...
	GO="$(GO)" GOFLAGS="$(GOFLAGS)" hack/unit-rootless.sh

# -p 1: one package at a time. Tests of two packages give uid 65534 an
# /etc/subuid entry for a while (identity_test.go, session/idmaps_test.go):
# side by side, one package's edits and identity holders reached the other's
# root-less runs.
integration: build
	NSBOX_BIN=$(CURDIR)/$(BIN) $(GO) test $(GOFLAGS) -p 1 -count=1 -timeout 20m ./test/integration/...
	NSBOX_BIN=$(CURDIR)/$(BIN) $(GO) test $(GOFLAGS) -count=1 -timeout 5m ./test/container/

# Regenerates pkg/seccomp/precompiled/ (the default seccomp profile compiled
# ahead of time and embedded in nsbox) after profiles/seccomp/default.json,
# pkg/seccomp or libseccomp changes; `go test ./pkg/seccomp` fails until the
# result is committed. `make build` does not need it.
.PHONY: generate
generate:
	$(GO) generate ./pkg/seccomp/...

# A count of executions, not a duration: with a duration, Go's fuzzing
# coordinator (before Go 1.27, go.dev/issue/75804) can report its own
# deadline as a failure ("context deadline exceeded") when a loaded machine
# slows a worker at the end; 60,000 runs take ~10 s here.
# The resolver's fuzz target asks a fake upstream on the loopback: its new
# inputs are minimized by count too, so a run stays at a few seconds.
fuzz:
	$(GO) test $(GOFLAGS) -run '^$$' -fuzz FuzzReadMessage -fuzztime 60000x ./pkg/ipc
	$(GO) test $(GOFLAGS) -run '^$$' -fuzz FuzzDNSAnswer -fuzztime 20000x -fuzzminimizetime 200x ./pkg/netfilter
	$(GO) test $(GOFLAGS) -run '^$$' -fuzz FuzzTranslateControl -fuzztime 100000x ./pkg/notify
	$(GO) test $(GOFLAGS) -run '^$$' -fuzz FuzzGitlinks -fuzztime 20000x ./pkg/policy
	$(GO) test $(GOFLAGS) -run '^$$' -fuzz FuzzTrustStore -fuzztime 5000x ./pkg/policy
	$(GO) test $(GOFLAGS) -run '^$$' -fuzz FuzzParseLayer -fuzztime 20000x ./pkg/policy
	$(GO) test $(GOFLAGS) -run '^$$' -fuzz FuzzReview59CommandFiles -fuzztime 20000x ./pkg/policy
	$(GO) test $(GOFLAGS) -run '^$$' -fuzz FuzzAppendRedactedJSON -fuzztime 20000x ./pkg/sandbox

# cgroup v2 tests of pkg/cgroups, as root, in a throw-away qemu VM (TCG).
test-vm:
	@if command -v qemu-system-x86_64 >/dev/null 2>&1 && command -v busybox >/dev/null 2>&1; then \
		hack/run-in-vm.sh ./pkg/cgroups -- -test.v -test.timeout=100s; \
	else \
		echo "SKIP test-vm: qemu-system-x86_64 is not installed (apt-get install qemu-system-x86 busybox-static cpio)"; \
	fi

bench: build
	hack/bench.sh

# Soak and kill -9 leak check (docs/benchmarks.md): N runs root and
# root-less, K SIGKILLed supervisors of each kind; exits 1 on a leak.
soak: build
	hack/soak.sh

APPARMOR_D ?= /etc/apparmor.d
# Installs bin/nsbox, and its AppArmor profile where AppArmor 4 exists:
# Ubuntu >= 23.10 refuses user namespaces to binaries without one.
install: build
	install -D -m 0755 $(BIN) $(DESTDIR)/usr/local/bin/nsbox
	@if [ -e $(APPARMOR_D)/abi/4.0 ]; then \
		install -D -m 0644 contrib/apparmor/nsbox $(DESTDIR)$(APPARMOR_D)/nsbox; \
		if [ -z "$(DESTDIR)" ] && [ "$$(cat /sys/module/apparmor/parameters/enabled 2>/dev/null)" = Y ] && command -v apparmor_parser >/dev/null; then \
			apparmor_parser -r $(APPARMOR_D)/nsbox; fi; \
	else echo "AppArmor 4 not found: contrib/apparmor/nsbox not installed (needed only where kernel.apparmor_restrict_unprivileged_userns=1)"; fi

clean:
	rm -rf bin .cache

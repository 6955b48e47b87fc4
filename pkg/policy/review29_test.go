package policy

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestReview29TrustProjectProfileSeccompOutside
//
// Severity: MEDIUM.
//
// Weakness: commit 96b81cd made a project profile's chain "trusted
// whole": a file it extends outside .nsbox/policy/ "decides the policy as
// much as the profile, and could be anyone's", so it needs a record
// (pkg/policy/trust.go resolver.trust, the `project` loop). The seccomp
// file such a profile names is left out of that rule: trust() asks for a
// record of the seccomp file only when it is itself in, or named through,
// a .nsbox/policy/ directory (`IsProjectPolicyFile(r.seccompFile) ||
// namesProjectPolicy(r.seccompNamed)`), not when a project profile of the
// chain chose it. And the seccomp step (resolve.go resolver.seccomp)
// refuses it only when it lies in a writable directory of *this* run.
//
// Attack: the project's trusted .nsbox/policy/ci.toml says
// `seccomp = "/home/u/shared/sandbox.json"` (a file next to the project,
// in a sibling checkout, a shared tools directory: anywhere another run
// of the user's, with another workspace, can write). A sandbox of that
// other run rewrites sandbox.json to {"defaultAction":"SCMP_ACT_ALLOW"}
// (io_uring, bpf, keyctl, ptrace... back). The next run with ci.toml
// loads it with no trust prompt: ci.toml's bytes did not change, and the
// file that switched the filter off is not in .nsbox/policy/. The extend
// case of exactly this attack is refused (TestTrustChainExtendsOutside);
// the seccomp case is not. The docs say "A project profile's chain is
// trusted whole" (docs/profiles.md).
//
// Fix: in resolver.trust, when the seccomp value comes from a project
// profile of the chain (r.m.seccomp.at.layer is one of the project
// needs, or, simpler, whenever `project` is true and the seccomp file is
// not in the config directory), add the seccomp file to needs.
func TestReview29TrustProjectProfileSeccompOutside(t *testing.T) {
	h := testHost(t)
	sc := filepath.Join(h.Home, "shared", "sandbox.json")
	write(t, sc, `{"defaultAction":"SCMP_ACT_ALLOW"}`)
	p := filepath.Join(h.Cwd, ".nsbox", "policy", "ci.toml")
	write(t, p, "extend = \"workspace\"\nseccomp = \""+sc+"\"\n")
	trustAll(t, h, p) // the user read ci.toml and trusted it, not sandbox.json
	req := Request{ConfigFile: "-", Profile: "./.nsbox/policy/ci.toml"}
	res, err := Load(h, req)
	if err == nil {
		t.Fatalf("a seccomp file a trusted project profile names outside .nsbox/policy/ was used with no trust record: policy seccomp %s (sha256 %s); anyone who can write %s chooses the next run's filter", res.Policy.Seccomp, res.Policy.SeccompSHA256, sc)
	}
	if !errors.Is(err, ErrUntrustedPolicyFile) || !strings.Contains(err.Error(), sc) {
		t.Fatalf("refused, but not as an untrusted policy file naming %s: %v", sc, err)
	}
	trustAll(t, h, sc)
	mustLoad(t, h, req)
}

// TestReview29TrustProjectConfigProfileOutside
//
// Severity: LOW.
//
// Weakness: the same "trusted whole" rule is keyed on a project
// *profile* only (trust.go resolver.trust: `project = project || l.Kind
// == KindProfile`). A config file in .nsbox/policy/ (docs/profiles.md:
// a project policy file is needed "whichever file names it (--profile,
// --seccomp, an extend, config.toml)"; `nsbox run --config
// .nsbox/policy/config.toml`) is trusted itself, but the profile it
// chooses with `profile = "../../../shared/base.toml"` (relative to the
// config file, loadLayers) is read with no record when it lies outside
// .nsbox/policy/ and outside this run's writable directories.
//
// Attack: as for an extended file: a sandbox of another run that can
// write ~/shared rewrites base.toml (network = "host", no hides), and the
// next run with the trusted project config obeys it unprompted.
//
// Fix: count a project config layer like a project profile when deciding
// that the chain must be trusted whole (project = true for KindConfig
// too), so every file-backed profile of the chain outside the config
// directory needs a record.
func TestReview29TrustProjectConfigProfileOutside(t *testing.T) {
	h := testHost(t)
	base := filepath.Join(h.Home, "shared", "base.toml")
	write(t, base, "extend = \"workspace\"\nnetwork = \"host\"\n")
	cfg := filepath.Join(h.Cwd, ".nsbox", "policy", "config.toml")
	write(t, cfg, "profile = \"../../../shared/base.toml\"\n")
	trustAll(t, h, cfg)
	req := Request{ConfigFile: cfg}
	res, err := Load(h, req)
	if err == nil {
		t.Fatalf("the profile a trusted project config names outside .nsbox/policy/ (%s) was used with no trust record (network %v)", base, res.Policy.Network)
	}
	if !errors.Is(err, ErrUntrustedPolicyFile) || !strings.Contains(err.Error(), base) {
		t.Fatalf("refused, but not as an untrusted policy file naming %s: %v", base, err)
	}
	trustAll(t, h, base)
	mustLoad(t, h, req)
}

package backend

import (
	"strings"
	"testing"
)

// TestCheckContainerNamesTheMissingKnob: each outer-container refusal is
// answered with its own Kubernetes setting.
func TestCheckContainerNamesTheMissingKnob(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
	ok := Check{OK: true}
	cases := []struct {
		name                  string
		userns, proc, sandbox Check
		want                  string
	}{
		{"masked proc", ok, Check{Value: "masked"}, Check{}, "procMount: Unmasked"},
		{"all fine", ok, Check{OK: true, Value: "mountable"}, ok, ""},
	}
	if selfSeccomp() == "2" {
		cases = append(cases, struct {
			name                  string
			userns, proc, sandbox Check
			want                  string
		}{"seccomp", Check{}, Check{}, Check{}, "type: Localhost"})
	}
	if l := appArmorLabel(); l != "" && l != "unconfined" {
		cases = append(cases, struct {
			name                  string
			userns, proc, sandbox Check
			want                  string
		}{"apparmor", ok, Check{OK: true}, Check{Detail: "mount proc: permission denied"}, "appArmorProfile"})
	}
	for _, c := range cases {
		got := checkContainer(c.userns, c.proc, c.sandbox)
		if got.Value != "kubernetes" {
			t.Errorf("%s: runtime %q, want kubernetes", c.name, got.Value)
		}
		if c.want == "" {
			if !got.OK || got.Fix != "" {
				t.Errorf("%s: %+v, want ok without a fix", c.name, got)
			}
			continue
		}
		if got.OK || !strings.Contains(got.Fix, c.want) || !strings.HasPrefix(got.Fix, "Kubernetes:") {
			t.Errorf("%s: fix %q, want the Kubernetes spelling with %q", c.name, got.Fix, c.want)
		}
	}
}

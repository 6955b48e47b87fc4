// Package kubernetes holds nsbox's Kubernetes manifests. This test validates
// them offline: every document decodes strictly (no unknown or misspelled
// field) into the Kubernetes API types of k8s.io/api, and the parts that
// must agree with each other and with nsbox do. It is a module of its own
// so that k8s.io/api never reaches the nsbox binary's dependencies.
package kubernetes

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

type manifests struct {
	deployments map[string]*appsv1.Deployment // by file
	services    []*corev1.Service
	secrets     []*corev1.Secret
}

// load decodes every YAML document of every *.yaml file strictly.
func load(t *testing.T) manifests {
	t.Helper()
	m := manifests{deployments: map[string]*appsv1.Deployment{}}
	files, _ := filepath.Glob("*.yaml")
	if len(files) == 0 {
		t.Fatal("no manifests")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			var obj any
			switch tm.APIVersion + "/" + tm.Kind {
			case "apps/v1/Deployment":
				d := &appsv1.Deployment{}
				m.deployments[f], obj = d, d
			case "v1/Service":
				s := &corev1.Service{}
				m.services, obj = append(m.services, s), s
			case "v1/Secret":
				s := &corev1.Secret{}
				m.secrets, obj = append(m.secrets, s), s
			default:
				t.Fatalf("%s document %d: unexpected %s %s", f, i, tm.APIVersion, tm.Kind)
			}
			// Strict: a field the API does not have is an error, not a
			// silently ignored typo.
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s document %d (%s): %v", f, i, tm.Kind, err)
			}
		}
	}
	return m
}

func TestManifestsDecodeStrictly(t *testing.T) {
	m := load(t)
	if len(m.deployments) != 2 || len(m.services) != 1 || len(m.secrets) != 1 {
		t.Fatalf("want 2 deployments, a service and a secret; got %d, %d, %d", len(m.deployments), len(m.services), len(m.secrets))
	}
	secret := m.secrets[0]
	svc := m.services[0]
	for f, d := range m.deployments {
		spec := d.Spec.Template.Spec
		if d.Spec.Selector == nil || !selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
			t.Errorf("%s: the selector does not select its own pods", f)
		}
		if !selects(svc.Spec.Selector, d.Spec.Template.Labels) {
			t.Errorf("%s: the Service does not select these pods", f)
		}
		if len(spec.Containers) != 1 {
			t.Fatalf("%s: want one container", f)
		}
		c := spec.Containers[0]
		// nsbox mcp --http :8080 --token-file FILE (cmd/nsbox mcp.go on
		// the mcp branch), the file from the Secret's volume.
		if !slices.Equal(c.Args[:3], []string{"mcp", "--http", ":8080"}) || c.Args[3] != "--token-file" {
			t.Errorf("%s: args %v", f, c.Args)
		}
		tokenFile := c.Args[4]
		var vol *corev1.Volume
		for i := range spec.Volumes {
			if spec.Volumes[i].Secret != nil && spec.Volumes[i].Secret.SecretName == secret.Name {
				vol = &spec.Volumes[i]
			}
		}
		if vol == nil {
			t.Fatalf("%s: no volume of Secret %s", f, secret.Name)
		}
		mounted := false
		for _, vm := range c.VolumeMounts {
			if vm.Name == vol.Name && filepath.Join(vm.MountPath, "token") == tokenFile && vm.ReadOnly {
				mounted = true
			}
		}
		if _, ok := secret.StringData["token"]; !ok || !mounted {
			t.Errorf("%s: %s is not the Secret's token key mounted read-only", f, tokenFile)
		}
		port := c.Ports[0]
		if port.ContainerPort != 8080 || svc.Spec.Ports[0].TargetPort.StrVal != port.Name {
			t.Errorf("%s: the Service's target port %v is not the container's %s:%d", f, svc.Spec.Ports[0].TargetPort, port.Name, port.ContainerPort)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("%s: no resource requests", f)
		}
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("%s: the container must drop all capabilities and privilege escalation", f)
		}
		if sc != nil && sc.Privileged != nil && *sc.Privileged {
			t.Errorf("%s: privileged", f)
		}
	}
	native := m.deployments["deployment.yaml"]
	spec := native.Spec.Template.Spec
	sc := spec.Containers[0].SecurityContext
	// The three settings that give the native backend (README.md).
	if spec.HostUsers == nil || *spec.HostUsers {
		t.Error("deployment.yaml: hostUsers: false is what procMount: Unmasked requires")
	}
	if sc.ProcMount == nil || *sc.ProcMount != corev1.UnmaskedProcMount {
		t.Error("deployment.yaml: procMount: Unmasked missing")
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost ||
		sc.SeccompProfile.LocalhostProfile == nil || filepath.Base(*sc.SeccompProfile.LocalhostProfile) != "seccomp-nsbox.json" {
		t.Error("deployment.yaml: the Localhost seccomp profile seccomp-nsbox.json missing")
	}
	if sc.AppArmorProfile == nil || sc.AppArmorProfile.Type != corev1.AppArmorProfileTypeUnconfined {
		t.Error("deployment.yaml: appArmorProfile Unconfined missing")
	}
	ll := m.deployments["deployment-landlock.yaml"].Spec.Template.Spec.Containers[0].SecurityContext
	if ll.ProcMount != nil || ll.SeccompProfile == nil || ll.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("deployment-landlock.yaml: must keep the runtime's defaults (masked /proc, RuntimeDefault seccomp)")
	}
}

func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestSeccompProfile: the profile decodes strictly as an OCI seccomp
// section (what the kubelet hands the runtime), allows what nsbox's native
// backend needs, and still denies what no sandbox needs.
func TestSeccompProfile(t *testing.T) {
	data, err := os.ReadFile("seccomp-nsbox.json")
	if err != nil {
		t.Fatal(err)
	}
	var p specs.LinuxSeccomp
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatal(err)
	}
	// An allow list: whatever no rule names, and every call a later
	// kernel adds, is refused.
	if p.DefaultAction != specs.ActErrno {
		t.Fatalf("defaultAction %s, want SCMP_ACT_ERRNO (an allow list)", p.DefaultAction)
	}
	allowed := map[string]bool{} // by a rule without argument conditions
	named := map[string]bool{}   // by any rule
	for _, s := range p.Syscalls {
		for _, n := range s.Names {
			named[n] = true
			if s.Action == specs.ActAllow && len(s.Args) == 0 {
				allowed[n] = true
			}
		}
	}
	for _, need := range []string{"clone", "clone3", "unshare", "setns", "mount", "umount2", "pivot_root", "fsopen", "fsmount",
		"move_mount", "open_tree", "mount_setattr", "sethostname", "pidfd_getfd", "landlock_create_ruleset", "landlock_add_rule",
		"landlock_restrict_self", "seccomp", "pidfd_open", "execve", "openat2", "close_range"} {
		if !allowed[need] {
			t.Errorf("%s is not allowed: nsbox needs it", need)
		}
	}
	for _, deny := range []string{"bpf", "kexec_load", "init_module", "finit_module", "keyctl", "add_key", "perf_event_open", "userfaultfd",
		"open_by_handle_at", "io_uring_setup", "ptrace", "process_vm_readv", "process_vm_writev"} {
		if named[deny] {
			t.Errorf("%s is named by a rule: the profile must leave it to the default (refused)", deny)
		}
	}
	if strings.Contains(string(data), "comment") {
		t.Error("comments are not OCI fields; they belong in README.md")
	}
}

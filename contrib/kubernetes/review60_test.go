package kubernetes

import (
	"bytes"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Review 60 (containers and Kubernetes): each test failed on the manifests before the fix.

// TestReview60SeccompProfileAddsOnlyWhatNsboxNeeds: the Localhost profile is
// a deny list (defaultAction SCMP_ACT_ALLOW). Compared with the runtime's
// default (moby/profiles seccomp/default.json, containerd's contrib/seccomp:
// an allow list, for a container without capabilities) it lets through,
// beyond what the native backend needs (clone/clone3/unshare with
// CLONE_NEW*, setns, the mount family, pivot_root, sethostname,
// pidfd_getfd for the supervisor), calls no sandbox runtime needs, and
// every system call a future kernel adds.
func TestReview60SeccompProfileAddsOnlyWhatNsboxNeeds(t *testing.T) {
	data, err := os.ReadFile("seccomp-nsbox.json")
	if err != nil {
		t.Fatal(err)
	}
	var p specs.LinuxSeccomp
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&p); err != nil {
		t.Fatal(err)
	}
	if p.DefaultAction == specs.ActAllow {
		t.Errorf("defaultAction SCMP_ACT_ALLOW: every system call not listed, and every one a later kernel adds, reaches the node's kernel; the runtime default is an allow list (defaultAction SCMP_ACT_ERRNO)")
	}
	// allowedUnconditionally: no rule refuses it for any argument.
	denied := map[string]bool{}
	conditional := map[string]bool{}
	for _, s := range p.Syscalls {
		for _, n := range s.Names {
			if s.Action != specs.ActAllow {
				if len(s.Args) == 0 {
					denied[n] = true
				} else {
					conditional[n] = true
				}
			}
		}
	}
	allowed := func(n string) bool {
		if p.DefaultAction == specs.ActAllow {
			return !denied[n] && !conditional[n]
		}
		for _, s := range p.Syscalls {
			if s.Action == specs.ActAllow && len(s.Args) == 0 && contains(s.Names, n) {
				return true
			}
		}
		return false
	}
	// Refused by the runtime default for a container without capabilities,
	// not used by nsbox (grep of pkg/ and cmd/), and on nsbox's own list of
	// dangerous calls (pkg/seccomp/dangerous.go) or restricted by moby:
	for _, n := range []string{
		"process_madvise", // ptrace-family (PTRACE_MODE_READ); moby: CAP_SYS_PTRACE only; nsbox's DangerousSet
		"vhangup",         // moby: CAP_SYS_TTY_CONFIG only; nsbox's DangerousSet
		"fanotify_init",   // moby: CAP_SYS_ADMIN only
		"setdomainname",   // moby: CAP_SYS_ADMIN only; nsbox sets the hostname only
		"migrate_pages",   // moby: CAP_SYS_NICE only; the profile denies its siblings mbind, move_pages
		"set_mempolicy_home_node",
		"open_tree_attr", // mount API, Linux 6.15; on nsbox's DangerousSet, unused by nsbox
	} {
		if allowed(n) {
			t.Errorf("%s is allowed: the runtime default refuses it without capabilities and nsbox does not use it", n)
		}
	}
	// Allowed by moby only for some arguments: socket of every family but
	// AF_VSOCK (40), personality of 0, 8, 0x20000, 0x20008, 0xffffffff.
	for _, n := range []string{"socket", "personality"} {
		if allowed(n) {
			t.Errorf("%s is allowed for every argument: the runtime default restricts its arguments (socket: not AF_VSOCK; personality: no ADDR_NO_RANDOMIZE/READ_IMPLIES_EXEC)", n)
		}
	}
}

func contains(s []string, n string) bool {
	for _, x := range s {
		if x == n {
			return true
		}
	}
	return false
}

// TestReview60SandboxesBoundedWithinTheContainer: the Deployments run the
// default (workspace) profile, which sets no limits (nsbox mcp --dry-run:
// "limits": {}), with up to 64 sessions (--max-sessions default). In a
// pod nsbox has no cgroup of its own to give (nsbox status: "cgroups:
// rlimit"), so every sandbox shares the container's memory limit with the
// server and the other sessions, and nothing bounds processes: Kubernetes
// has no per-container pids limit (only the kubelet's podPidsLimit). One
// sandbox can OOM the container (with memory.oom.group, Kubernetes 1.28+
// on cgroup v2, that kills the server and every session) or exhaust the
// node's PIDs.
func TestReview60SandboxesBoundedWithinTheContainer(t *testing.T) {
	m := load(t)
	for f, d := range m.deployments {
		c := d.Spec.Template.Spec.Containers[0]
		flag := func(name string) string {
			for i, a := range c.Args {
				if a == name && i+1 < len(c.Args) {
					return c.Args[i+1]
				}
				if strings.HasPrefix(a, name+"=") {
					return strings.TrimPrefix(a, name+"=")
				}
			}
			return ""
		}
		mem, pids, sessions := flag("--memory"), flag("--pids"), flag("--max-sessions")
		if mem == "" || pids == "" || sessions == "" {
			t.Errorf("%s: args %v set no per-sandbox --memory, --pids and --max-sessions: sandboxes are bounded only by the container's limit, shared with the server", f, c.Args)
			continue
		}
		q, err := resource.ParseQuantity(strings.TrimSuffix(strings.TrimSuffix(mem, "B"), "i") + "i")
		n, err2 := strconv.Atoi(sessions)
		if err != nil || err2 != nil {
			t.Errorf("%s: --memory %q --max-sessions %q", f, mem, sessions)
			continue
		}
		limit := c.Resources.Limits[corev1.ResourceMemory]
		total := q.Value() * int64(n)
		if limit.IsZero() || total >= limit.Value() {
			t.Errorf("%s: %d sessions x %s >= the container's memory limit %s: one pod's sandboxes together can OOM the server", f, n, mem, limit.String())
		}
	}
}

// TestReview60LandlockDeploymentHostUsers: the landlock Deployment, where
// sandboxes have no namespace of their own and run as the container's
// uid, is the one that most needs the pod's user namespace; hostUsers:
// false is allowed under Pod Security "restricted".
func TestReview60LandlockDeploymentHostUsers(t *testing.T) {
	m := load(t)
	spec := m.deployments["deployment-landlock.yaml"].Spec.Template.Spec
	if spec.HostUsers == nil || *spec.HostUsers {
		t.Error("deployment-landlock.yaml: no hostUsers: false: the sandboxes' uid 65532 is uid 65532 on the node")
	}
}

// TestReview60NativeDeploymentPodSecurityLevel: appArmorProfile Unconfined is
// refused by Pod Security "baseline" (allowed: RuntimeDefault, Localhost),
// so deployment.yaml is admitted only in a namespace at "privileged", which
// admits privileged pods too. README.md says "Nothing else is loosened"
// and names no level.
func TestReview60NativeDeploymentPodSecurityLevel(t *testing.T) {
	m := load(t)
	sc := m.deployments["deployment.yaml"].Spec.Template.Spec.Containers[0].SecurityContext
	if sc.AppArmorProfile != nil && sc.AppArmorProfile.Type == corev1.AppArmorProfileTypeUnconfined {
		readme, _ := os.ReadFile("README.md")
		if !bytes.Contains(readme, []byte("pod-security.kubernetes.io/enforce")) {
			t.Error("deployment.yaml: appArmorProfile Unconfined needs Pod Security level privileged for the namespace, and README.md does not say so (a Localhost AppArmor profile allowing mount passes baseline)")
		}
	}
}

// TestReview60ServiceAccountTokenNotMounted guards what holds today: no
// Deployment mounts the pod's service-account token (nsbox does not hide
// /var/run/secrets/kubernetes.io inside sandboxes; a sandbox reading it
// would reach the Kubernetes API as the pod).
func TestReview60ServiceAccountTokenNotMounted(t *testing.T) {
	m := load(t)
	for f, d := range m.deployments {
		s := d.Spec.Template.Spec
		if s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken {
			t.Errorf("%s: automountServiceAccountToken is not false", f)
		}
		for _, v := range s.Volumes {
			if v.Projected != nil {
				for _, src := range v.Projected.Sources {
					if src.ServiceAccountToken != nil {
						t.Errorf("%s: a projected service-account token", f)
					}
				}
			}
		}
	}
}

package backend

import (
	"os"
	"strings"
)

// Container knobs: what an outer container runtime must allow for the
// native backend, spelled for each runtime. `nsbox status` names the one
// that is missing here.

// runtimeHint guesses which container runtime nsbox runs under: "kubernetes",
// "docker", "podman", "container" (masked /proc, runtime unknown, e.g.
// containerd's ctr) or "" (no sign of a container).
func runtimeHint() string {
	switch {
	case os.Getenv("KUBERNETES_SERVICE_HOST") != "" || exists("/var/run/secrets/kubernetes.io"):
		return "kubernetes"
	case exists("/.dockerenv"):
		return "docker"
	case exists("/run/.containerenv"):
		return "podman"
	case len(procOvermounts()) > 0:
		return "container"
	}
	return ""
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// knob is one container setting, by runtime.
type knob struct {
	what                                     string
	kubernetes, docker, podman, containerCtr string
}

var (
	knobSeccomp = knob{
		what:         "a seccomp profile that allows creating user namespaces (the runtime's default refuses clone/unshare of namespaces without CAP_SYS_ADMIN)",
		kubernetes:   "securityContext.seccompProfile: {type: Localhost, localhostProfile: profiles/seccomp-nsbox.json} (contrib/kubernetes/seccomp-nsbox.json copied to /var/lib/kubelet/seccomp/profiles/ on each node)",
		docker:       "docker run --security-opt seccomp=contrib/kubernetes/seccomp-nsbox.json",
		podman:       "podman run --security-opt seccomp=contrib/kubernetes/seccomp-nsbox.json",
		containerCtr: "ctr run --seccomp --seccomp-profile contrib/kubernetes/seccomp-nsbox.json",
	}
	knobProc = knob{
		what:         "an unmasked /proc (the runtime covers parts of /proc, so the kernel refuses a fresh one in a user namespace)",
		kubernetes:   "securityContext.procMount: Unmasked, which needs hostUsers: false in the pod spec (a user namespace for the pod)",
		docker:       "docker run --security-opt systempaths=unconfined",
		podman:       "podman run --security-opt unmask=ALL",
		containerCtr: "an OCI spec without maskedPaths/readonlyPaths (ctr run has no flag for it; --privileged does far more)",
	}
	knobAppArmor = knob{
		what:         "no AppArmor profile that refuses mounts (the runtime's default profile denies mount, which the sandbox's root needs inside its own namespaces)",
		kubernetes:   "securityContext.appArmorProfile: {type: Unconfined} (or a Localhost profile allowing mount)",
		docker:       "docker run --security-opt apparmor=unconfined",
		podman:       "podman run --security-opt apparmor=unconfined",
		containerCtr: "ctr run without --apparmor-default-profile",
	}
)

// spell says a knob for the runtime nsbox runs under (all of them when it
// is unknown).
func (k knob) spell(rt string) string {
	switch rt {
	case "kubernetes":
		return "Kubernetes: " + k.kubernetes
	case "docker":
		return "Docker: " + k.docker
	case "podman":
		return "Podman: " + k.podman
	}
	return "Kubernetes: " + k.kubernetes + "; Docker: " + k.docker + "; Podman: " + k.podman + "; containerd ctr: " + k.containerCtr
}

// checkContainer names the one setting of an outer container that stands
// between this host and the native backend, given what the other checks
// found: user namespaces refused under a seccomp filter, a masked /proc,
// or mounts refused under a confining AppArmor profile.
func checkContainer(userns, proc, sandboxCheck Check) Check {
	rt := runtimeHint()
	c := Check{Name: "container", OK: true}
	switch rt {
	case "":
		c.Value = "none detected"
		c.Detail = "no sign of an outer container"
		return c
	case "container":
		c.Value = "yes (runtime unknown)"
	default:
		c.Value = rt
	}
	label := appArmorLabel()
	var missing []knob
	switch {
	case !userns.OK && selfSeccomp() == "2":
		missing = append(missing, knobSeccomp)
	case userns.OK && !proc.OK && proc.Value == "masked":
		missing = append(missing, knobProc)
	case userns.OK && !sandboxCheck.OK && label != "" && label != "unconfined" && strings.Contains(sandboxCheck.Detail, "mount"):
		missing = append(missing, knobAppArmor)
	}
	if len(missing) == 0 {
		c.Detail = "nothing of the container stands in the native backend's way"
		if !userns.OK {
			c.Detail = "user namespaces are refused for a reason of the host, not the container's seccomp profile (see user namespaces)"
			c.OK = false
		}
		return c
	}
	c.OK = false
	k := missing[0]
	c.Detail = "the native backend needs " + k.what + "; until then auto runs the landlock backend where Landlock is available"
	if k.what == knobProc.what {
		c.Detail = "a sandbox of its own /proc needs " + k.what + "; until then the native backend binds the container's /proc read-only, and the sandbox sees the container's processes"
	}
	c.Fix = k.spell(rt)
	return c
}

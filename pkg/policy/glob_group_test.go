package policy

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

// Grouping the patterns "PREFIX/**/NAME" into one walk (groupNames)
// changes nothing a pattern matches or meets: every field of every result,
// and the links, are those of the walk pattern by pattern, over random
// trees (files, directories, symlinks, directories this user can search
// but not list, skipped names), with depth and directory bounds reached.
// So does keeping of each listing only the entries the walk uses (keep):
// the walk with whole listings meets the same.
func TestGlobGroupedSameAsSeparate(t *testing.T) {
	names := []string{".vscode", ".roo", ".env", ".crushrc", "kilo.json", ".git", "node_modules", "x", ".helix", "mise.toml"}
	escapedMatches := 0 // below the prefixes that must be escaped
	for seed := int64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewSource(seed))
		root := t.TempDir()
		if seed%2 == 0 {
			// A prefix whose names read as wildcards unless escaped.
			root = filepath.Join(root, `we[i]r*d?\x`)
			if err := os.Mkdir(root, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		pr := escapeGlob(root)
		var dirs []string
		dirs = append(dirs, root)
		for i := 0; i < 60; i++ {
			parent := dirs[rng.Intn(len(dirs))]
			p := filepath.Join(parent, names[rng.Intn(len(names))])
			switch rng.Intn(5) {
			case 0, 1:
				if os.Mkdir(p, 0o755) == nil {
					dirs = append(dirs, p)
				}
			case 2:
				os.WriteFile(p, []byte("x"), 0o644)
			case 3:
				os.Symlink(dirs[rng.Intn(len(dirs))], p)
			case 4:
				p = filepath.Join(parent, fmt.Sprintf("d%d", i))
				if os.Mkdir(p, 0o755) == nil {
					dirs = append(dirs, p)
				}
			}
		}
		// A directory this user may search but not list (no effect as
		// root, who reads it all the same).
		locked := dirs[rng.Intn(len(dirs))]
		if locked != root {
			os.WriteFile(filepath.Join(locked, ".roo"), nil, 0o644)
			os.Chmod(locked, 0o311)
			t.Cleanup(func() { os.Chmod(locked, 0o755) })
		}
		var pats []globPattern
		for _, prefix := range []string{pr + "/**", pr + "/*/**"} {
			for _, n := range names[:6] {
				if rng.Intn(3) > 0 {
					pats = append(pats, globPattern{path: prefix + "/" + n, fileOnly: n == ".env", links: rng.Intn(4) == 0, maxDepth: []int{0, 2}[rng.Intn(2)]})
				}
			}
		}
		pats = append(pats, globPattern{path: pr + "/**/.env*", fileOnly: true}, globPattern{path: pr + "/*/**/.github/hooks"}, globPattern{path: pr + "/**/.roo"}, globPattern{path: pr + "/**/.roo"})
		for _, maxDirs := range []int{25000, 7} {
			old := walkMaxDirs
			walkMaxDirs = maxDirs
			walkGroup = false
			want, wantLinks, err1 := globAllLinks(pats, 3, true)
			walkGroup = true
			got, gotLinks, err2 := globAllLinks(pats, 3, true)
			// Each directory's whole listing kept, as before the
			// listing kept only what the walk uses (review 71 #7):
			// the same walk.
			walkListAll = true
			all, allLinks, err4 := globAllLinks(pats, 3, true)
			walkListAll = false
			if err4 != nil {
				t.Fatalf("seed %d: %v", seed, err4)
			}
			for i := range pats {
				if !reflect.DeepEqual(normal(all[i]), normal(got[i])) {
					t.Errorf("seed %d, max dirs %d, %s: whole listings %+v, kept entries %+v", seed, maxDirs, pats[i].path, all[i], got[i])
				}
			}
			if !reflect.DeepEqual(allLinks, gotLinks) {
				t.Errorf("seed %d: links with whole listings %q, with kept entries %q", seed, allLinks, gotLinks)
			}
			// Started at an open fd of the prefix (the audit's held
			// roots) instead of from "/": the same walk.
			afd, err3 := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err3 != nil {
				t.Fatal(err3)
			}
			anchored, anchoredLinks, err3 := globAllLinksAt(map[string]int{root: afd}, pats, 3, true)
			unix.Close(afd)
			walkMaxDirs = old
			if err1 != nil || err2 != nil || err3 != nil {
				t.Fatalf("seed %d: %v, %v, %v", seed, err1, err2, err3)
			}
			for i := range pats {
				if !reflect.DeepEqual(normal(got[i]), normal(want[i])) {
					t.Errorf("seed %d, max dirs %d, %s: grouped %+v, separate %+v", seed, maxDirs, pats[i].path, got[i], want[i])
				}
				if !reflect.DeepEqual(normal(anchored[i]), normal(got[i])) {
					t.Errorf("seed %d, max dirs %d, %s: anchored %+v, from / %+v", seed, maxDirs, pats[i].path, anchored[i], got[i])
				}
			}
			if !reflect.DeepEqual(anchoredLinks, gotLinks) {
				t.Errorf("seed %d: anchored links %q, from / %q", seed, anchoredLinks, gotLinks)
			}
			for _, r := range want {
				if seed%2 == 0 {
					escapedMatches += len(r.matches)
				}
			}
			if !reflect.DeepEqual(gotLinks, wantLinks) {
				t.Errorf("seed %d: links %q, want %q", seed, gotLinks, wantLinks)
			}
		}
	}
	if escapedMatches == 0 {
		t.Errorf("nothing matched below an escaped prefix: the comparison tested nothing there")
	}
}

// normal makes nil and empty lists compare equal.
func normal(r globResult) globResult {
	for _, l := range []*[]string{&r.matches, &r.unlisted, &r.foreign} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	return r
}

// The grouping happens for the base profile's nested agent-config
// patterns: one walk pattern for them all.
func TestGroupNamesMerges(t *testing.T) {
	pats := []globPattern{{path: "/w/*/**/.roo"}, {path: "/w/*/**/.kiro"}, {path: "/w/**/.git"}, {path: "/w/*/**/.config/mise"}, {path: "/w/*/**/.env*", fileOnly: true}, {path: "/w/*/**/.amp", links: true}}
	walked, alts, of := groupNames(pats)
	if len(walked) != 5 || of[0] != of[1] || !alts[of[0]][".roo"] || !alts[of[0]][".kiro"] || alts[of[2]] != nil || of[5] == of[0] {
		t.Errorf("groupNames: %v %v %v", walked, alts, of)
	}
}

// A pattern's escaped prefix matches the directory it names, whatever
// characters that holds: the walk looks "we[i]r*d?\x" up as a name.
func TestGlobEscapedPrefix(t *testing.T) {
	root := filepath.Join(t.TempDir(), `we[i]r*d?\x`)
	if err := os.MkdirAll(filepath.Join(root, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(root, ".env"), filepath.Join(root, "a", "b", ".env.local")} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g, err := glob(escapeGlob(root)+"/**/.env*", true)
	if err != nil || len(g.matches) != 2 {
		t.Errorf("glob below %q: %v, %v", root, g.matches, err)
	}
	pat, ok, err := globPatternOf(lstatCache{}, escapeGlob(root)+"/a/*/.env*")
	if !ok || err != nil || fixedPart(pat) != filepath.Join(root, "a") {
		t.Errorf("globPatternOf: %q %v %v, fixed part %q", pat, ok, err, fixedPart(pat))
	}
	if unescapeGlob(escapeGlob(root)) != root || hasGlob(escapeGlob(root)) {
		t.Errorf("escape round trip of %q: %q", root, escapeGlob(root))
	}
}

package policy

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Grouping the patterns "PREFIX/**/NAME" into one walk (groupNames)
// changes nothing a pattern matches or meets: every field of every result,
// and the links, are those of the walk pattern by pattern, over random
// trees (files, directories, symlinks, directories this user can search
// but not list, skipped names), with depth and directory bounds reached.
func TestGlobGroupedSameAsSeparate(t *testing.T) {
	names := []string{".vscode", ".roo", ".env", ".crushrc", "kilo.json", ".git", "node_modules", "x", ".helix", "mise.toml"}
	for seed := int64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewSource(seed))
		root := t.TempDir()
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
		for _, prefix := range []string{root + "/**", root + "/*/**"} {
			for _, n := range names[:6] {
				if rng.Intn(3) > 0 {
					pats = append(pats, globPattern{path: prefix + "/" + n, fileOnly: n == ".env", links: rng.Intn(4) == 0, maxDepth: []int{0, 2}[rng.Intn(2)]})
				}
			}
		}
		pats = append(pats, globPattern{path: root + "/**/.env*", fileOnly: true}, globPattern{path: root + "/*/**/.github/hooks"}, globPattern{path: root + "/**/.roo"}, globPattern{path: root + "/**/.roo"})
		for _, maxDirs := range []int{25000, 7} {
			old := walkMaxDirs
			walkMaxDirs = maxDirs
			walkGroup = false
			want, wantLinks, err1 := globAllLinks(pats, 3, true)
			walkGroup = true
			got, gotLinks, err2 := globAllLinks(pats, 3, true)
			walkMaxDirs = old
			if err1 != nil || err2 != nil {
				t.Fatalf("seed %d: %v, %v", seed, err1, err2)
			}
			for i := range pats {
				if !reflect.DeepEqual(normal(got[i]), normal(want[i])) {
					t.Errorf("seed %d, max dirs %d, %s: grouped %+v, separate %+v", seed, maxDirs, pats[i].path, got[i], want[i])
				}
			}
			if !reflect.DeepEqual(gotLinks, wantLinks) {
				t.Errorf("seed %d: links %q, want %q", seed, gotLinks, wantLinks)
			}
		}
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

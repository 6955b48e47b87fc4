package policy

import (
	"path/filepath"
	"strings"
)

// walkGroup: patterns "PREFIX/**/NAME" that differ only in NAME walk as
// one (groupNames). A variable only so that a test can compare.
var walkGroup = true

// groupNames merges the patterns "PREFIX/**/NAME" with the same PREFIX and
// options and a plain NAME into one walk pattern whose last part is any of
// their names (alts), so that a walk for thirty agent-config names costs
// what one costs: the walk keeps a state per pattern in every directory
// below "**", and looked each name up in each listing. of[i] is the walk
// pattern of patterns[i]; nil when nothing merged (walked is patterns).
// The merged pattern meets what each would have: its directories, depth
// and budget are the same (they depend on PREFIX and the options only).
func groupNames(patterns []globPattern) (walked []globPattern, alts []map[string]bool, of []int) {
	if !walkGroup {
		return patterns, make([]map[string]bool, len(patterns)), nil
	}
	type key struct {
		prefix          string
		fileOnly, links bool
		maxDepth        int
	}
	groupable := func(gp globPattern) (key, string, bool) {
		dir, name := filepath.Split(gp.path)
		dir = strings.TrimSuffix(dir, "/")
		if name == "" || name == "**" || hasGlob(name) || filepath.Base(dir) != "**" {
			return key{}, "", false
		}
		return key{dir, gp.fileOnly, gp.links, gp.maxDepth}, unescapeGlob(name), true
	}
	count := map[key]int{}
	for _, gp := range patterns {
		if k, _, ok := groupable(gp); ok {
			count[k]++
		}
	}
	merged := false
	for _, c := range count {
		merged = merged || c > 1
	}
	if !merged {
		return patterns, make([]map[string]bool, len(patterns)), nil
	}
	at := map[key]int{}
	of = make([]int, len(patterns))
	for i, gp := range patterns {
		k, name, ok := groupable(gp)
		if !ok || count[k] < 2 {
			of[i] = len(walked)
			walked = append(walked, gp)
			alts = append(alts, nil)
			continue
		}
		g, seen := at[k]
		if !seen {
			g = len(walked)
			at[k] = g
			// "*" stands for the names: a wildcard to the walk, which
			// matches it by alts (matchPart).
			walked = append(walked, globPattern{path: k.prefix + "/*", fileOnly: k.fileOnly, links: k.links, maxDepth: k.maxDepth})
			alts = append(alts, map[string]bool{})
		}
		alts[g][name] = true
		of[i] = g
	}
	return walked, alts, of
}

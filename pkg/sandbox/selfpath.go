package sandbox

import (
	"path"
	"strings"
)

// withSelfOnPath puts the directory of SelfPath first on PATH, so that the
// commands of a sandbox with host APIs (or tool registration) can run
// `nsbox call ...` by name, as the docs show: the directory holds only
// the nsbox binary the supervisor bound there (read-only), the one that
// speaks this supervisor's protocol. env is not modified.
func withSelfOnPath(env []string) []string {
	dir := path.Dir(SelfPath)
	out := make([]string, 0, len(env)+1)
	found := false
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			found = true
			if v == "" {
				kv = "PATH=" + dir
			} else if !strings.HasPrefix(v, dir+":") && v != dir {
				kv = "PATH=" + dir + ":" + v
			}
		}
		out = append(out, kv)
	}
	if !found {
		out = append(out, "PATH="+dir+":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	return out
}

package policy

import (
	"path/filepath"
	"strings"
	"testing"
)

// Review of 0933efe ("policy: fixes from review 15 of the --rw walk").

// LOW. The too-big error's hint (shallowHint) says: "... can be left
// unsearched with --shallow DIR (or shallow = ["DIR"] under [filesystem]
// in your config file)". A user who follows the second spelling for a
// package cache given with --rw (the docs' example, --rw ~/.npm) breaks
// every later run that does not pass that --rw (nsbox run in any other
// project, an MCP server): the config's entry is an error,
// "is not a writable directory of this run". The config applies to every
// run; an entry there for a directory this run does not write should be
// skipped (at most a note), not stop it.
func TestReview16ConfigShallowHintBreaksOtherRuns(t *testing.T) {
	h, other := rwBesideWorkspace(t)
	cfg := filepath.Join(h.ConfigHome, "nsbox", "config.toml")
	write(t, cfg, "[filesystem]\nshallow = [\""+other+"\"]\n")
	if _, err := Load(h, Request{ConfigFile: cfg, Flags: flags(Config{Filesystem: withRW(other)})}); err != nil {
		t.Fatalf("with --rw %s: %v", other, err)
	}
	if _, err := Load(h, Request{ConfigFile: cfg}); err != nil {
		t.Errorf("the config line the too-big hint proposes makes every run without --rw %s fail: %v", other, strings.TrimSpace(err.Error()))
	}
}

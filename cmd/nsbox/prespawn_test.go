package main

import "testing"

// prespawn.c spawns a worker before the Go runtime starts only for argv
// that will start one; a wrong "yes" costs a wasted worker, a wrong "no"
// only the head start.
func TestPrespawnReadsOnlyRunWithACommand(t *testing.T) {
	cases := []struct {
		argv         []string
		wanted, host bool
	}{
		{[]string{"nsbox", "run", "--", "true"}, true, false},
		{[]string{"nsbox", "run", "--rw", ".", "--", "make", "test"}, true, false},
		{[]string{"nsbox", "run", "--net", "host", "--", "curl", "x"}, true, true},
		{[]string{"nsbox", "run", "--net=host", "--", "curl"}, true, true},
		{[]string{"nsbox", "run", "--net", "none", "--", "true"}, true, false},
		{[]string{"nsbox", "run", "--", "sh", "--net", "host"}, true, false}, // the command's own args
		{[]string{"nsbox", "run", "--"}, false, false},                       // no command
		{[]string{"nsbox", "run", "true"}, false, false},                     // no "--": a usage error
		{[]string{"nsbox", "run", "--help", "--", "true"}, false, false},
		{[]string{"nsbox", "run", "-h", "--", "true"}, false, false},
		{[]string{"nsbox", "run", "--dry-run", "--", "true"}, false, false},
		{[]string{"nsbox", "run", "--dry-run=true", "--", "true"}, false, false},
		{[]string{"nsbox", "run", "--allow-privileged", "--", "true"}, false, false},
		{[]string{"nsbox", "run", "-dry-run", "--", "true"}, false, false}, // one dash: a usage error
		{[]string{"nsbox", "run", "-net", "host", "--", "true"}, false, false},
		{[]string{"nsbox", "run", "-", "--", "true"}, false, false},
		{[]string{"nsbox", "run", "--backend", "landlock", "--", "true"}, false, false}, // no namespaces
		{[]string{"nsbox", "run", "--backend=none", "--", "true"}, false, false},
		{[]string{"nsbox", "run", "--backend", "native", "--", "true"}, true, false},
		{[]string{"nsbox", "status"}, false, false},
		{[]string{"nsbox", "mcp", "--", "run"}, false, false},
		{[]string{"nsbox"}, false, false},
	}
	for _, c := range cases {
		w, h := prespawnWanted(c.argv)
		if w != c.wanted || (w && h != c.host) {
			t.Errorf("%q: wanted %v host %v, want %v %v", c.argv, w, h, c.wanted, c.host)
		}
	}
}

package sandbox

import (
	"strings"
	"testing"
)

func TestWithSelfOnPath(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"HOME=/h", "PATH=/usr/bin:/bin"}, []string{"HOME=/h", "PATH=/run/nsbox/bin:/usr/bin:/bin"}},
		{[]string{"PATH=/run/nsbox/bin:/bin"}, []string{"PATH=/run/nsbox/bin:/bin"}},
		{[]string{"PATH="}, []string{"PATH=/run/nsbox/bin"}},
		{[]string{"HOME=/h"}, []string{"HOME=/h", "PATH=/run/nsbox/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}},
	} {
		in := append([]string(nil), c.in...)
		got := withSelfOnPath(in)
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%v: got %v, want %v", c.in, got, c.want)
		}
		if strings.Join(in, "|") != strings.Join(c.in, "|") {
			t.Errorf("%v: input modified", c.in)
		}
	}
	// Only with host APIs or tool registration.
	p := &Policy{Env: []string{"PATH=/bin"}}
	if got := p.env(); got[0] != "PATH=/bin" {
		t.Errorf("no host APIs: %v", got)
	}
	p.HostAPIs = []string{"memory.list"}
	if got := p.env(); got[0] != "PATH=/run/nsbox/bin:/bin" {
		t.Errorf("host APIs: %v", got)
	}
}

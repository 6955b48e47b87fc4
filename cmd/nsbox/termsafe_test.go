package main

import (
	"bytes"
	"testing"
)

func TestTermSafe(t *testing.T) {
	for in, want := range map[string]string{
		"plain warning: /home/u/proj\n":   "plain warning: /home/u/proj\n",
		"tab\tand é€😀\n":                  "tab\tand é€😀\n",
		"x\x1b[2K\r\x1b[8m hidden\n":      `x\x1b[2K\x0d\x1b[8m hidden` + "\n",
		"bell\a del\x7f\n":                `bell\x07 del\x7f` + "\n",
		"c1 \u009b31m csi\n":              `c1 \u009b31m csi` + "\n",
		"bidi \u202eevil\u202c \u2066i\n": `bidi \u202eevil\u202c \u2066i` + "\n",
		"bad \xff\xfe utf8\n":             `bad \xff\xfe utf8` + "\n",
		"":                                "",
	} {
		var b bytes.Buffer
		n, err := termSafe{&b}.Write([]byte(in))
		if err != nil || n != len(in) || b.String() != want {
			t.Errorf("%q: wrote %q (n %d, err %v), want %q", in, b.String(), n, err, want)
		}
	}
}

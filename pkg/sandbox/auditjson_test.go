package sandbox

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestAppendRedactedJSON: the streaming audit of arguments no handler
// parsed writes what Redact and encoding/json write, for a whole value,
// and stops at the cut.
func TestAppendRedactedJSON(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"user":"a","api_key":"k","nested":[{"Password":{"deep":[1]},"ok":1.5e-7}],"html":"<&>"}`,
			`{"user":"a","api_key":"[REDACTED]","nested":[{"Password":"[REDACTED]","ok":1.5e-7}],"html":"\u003c\u0026\u003e"}`},
		{`[1, 2.50, -0, true, false, null, "s", [], {}]`, `[1,2.5,-0,true,false,null,"s",[],{}]`},
		{`{"token":"a","token":"b"}`, `{"token":"[REDACTED]","token":"[REDACTED]"}`},
		{`"plain"`, `"plain"`},
		{`{"a":1e400}`, `"\u003cinvalid JSON\u003e"`},
		{`{"a":1} {"b":2}`, `"\u003cinvalid JSON\u003e"`},
		{`{"a":`, `"\u003cinvalid JSON\u003e"`},
		{`{"secret":[1,`, `"\u003cinvalid JSON\u003e"`},
	} {
		if got := string(appendRedactedJSON(nil, []byte(c.in), 1<<20)); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.in, got, c.want)
		}
	}
	// Whole values agree with Redact through encoding/json.
	in := `{"z":[{"Secret":"x","k":{"b":1,"a":[null]}}],"a":"é\u2028"}`
	var v any
	json.Unmarshal([]byte(in), &v)
	var got, want any
	json.Unmarshal(appendRedactedJSON(nil, []byte(in), 1<<20), &got)
	w, _ := json.Marshal(Redact(v))
	json.Unmarshal(w, &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// The cut: reading stops just past stop, whatever follows.
	big := `[` + strings.Repeat(`{},`, 1<<20) + `{}]`
	if b := appendRedactedJSON(nil, []byte(big), 100); len(b) > 110 {
		t.Errorf("%d bytes written for a stop at 100", len(b))
	}
}

// FuzzAppendRedactedJSON: any text from inside gives no panic, and a
// whole answer (not cut) is JSON.
func FuzzAppendRedactedJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"token":"x"}]}`, `[`, `"\ud800"`, `{"a":1}}`, `1e400`, `[[[[]]]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		const stop = 256
		b := appendRedactedJSON(nil, raw, stop)
		if len(b) <= stop && !json.Valid(b) {
			t.Fatalf("%q gave %q, not JSON", raw, b)
		}
	})
}

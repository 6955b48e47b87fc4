package sandbox

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzExecuteText: the execute request and reply are written as
// encoding/json writes them, and read back as it reads them.
func FuzzExecuteText(f *testing.F) {
	f.Add("/bin/true", "PATH=/usr/bin:/bin", "/", int64(0), false, 1234, 0, 0, "", "")
	f.Add("a<b>&\"\\\n\u2028\xff", "", "", int64(-5), true, -1, 137, 9, "not_found", "x: command not found")
	f.Fuzz(func(t *testing.T, arg, env, dir string, timeout int64, hostCall bool, pid, code, sig int, startErr, msg string) {
		for _, m := range []executeMsg{
			{Argv: []string{arg, env}, Env: []string{env}, Dir: dir, TimeoutMs: timeout, HostCall: hostCall, Seq: int64(pid)},
			{Argv: []string{}, Dir: dir},
			{},
		} {
			want, _ := json.Marshal(m)
			if got := m.encode(); string(got) != string(want) {
				t.Fatalf("execute\n got %s\nwant %s", got, want)
			}
			var back, ref executeMsg
			json.Unmarshal(want, &ref)
			if err := back.decode(want); err != nil || !reflect.DeepEqual(back, ref) {
				t.Fatalf("%s read back as %#v (%v)", want, back, err)
			}
		}
		r := executeReply{Pid: pid, ExitCode: code, Signal: sig, TimedOut: hostCall, Canceled: !hostCall, StartErr: startErr, Message: msg}
		want, _ := json.Marshal(r)
		if got := r.encode(); string(got) != string(want) {
			t.Fatalf("reply\n got %s\nwant %s", got, want)
		}
		var back, ref executeReply
		json.Unmarshal(want, &ref)
		if err := back.decode(want); err != nil || back != ref {
			t.Fatalf("%s read back as %#v (%v)", want, back, err)
		}
	})
}

// FuzzExecuteDecode: any text is read as encoding/json reads it into the
// same structs.
func FuzzExecuteDecode(f *testing.F) {
	f.Add([]byte(`{"argv":["/bin/true"],"env":["A=1"],"dir":"/","timeoutMs":10,"hostCall":true}`))
	f.Add([]byte(`{"argv":["/bin/true"],"env":null,"dir":"","seq":42,"SEQ":-1}`))
	f.Add([]byte(`{"pid":12,"exitCode":0,"signal":9,"timedOut":true,"canceled":false,"startError":"x","message":"y"}`))
	f.Add([]byte(`{"ARGV":null,"Pid":1.5,"exitcode":"1","TimeoutMS":-0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var wm, gm executeMsg
		werr, gerr := json.Unmarshal(data, &wm), gm.decode(data)
		if (werr == nil) != (gerr == nil) || (werr == nil && !reflect.DeepEqual(wm, gm)) {
			t.Fatalf("execute %q: encoding/json %#v %v, decode %#v %v", data, wm, werr, gm, gerr)
		}
		var wr, gr executeReply
		werr, gerr = json.Unmarshal(data, &wr), gr.decode(data)
		if (werr == nil) != (gerr == nil) || (werr == nil && wr != gr) {
			t.Fatalf("reply %q: encoding/json %#v %v, decode %#v %v", data, wr, werr, gr, gerr)
		}
	})
}

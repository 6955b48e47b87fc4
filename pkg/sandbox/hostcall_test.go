package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/ipc"
)

// referenceAuditLine is the audit line as it was written before the
// one-pass encoder: a map marshalled by encoding/json, args decoded into
// any and redacted.
func referenceAuditLine(session string, call hostCallRequest, errMsg string) []byte {
	var args any
	if len(call.Args) > 0 && json.Unmarshal(call.Args, &args) != nil {
		args = "<invalid JSON>"
	}
	entry := map[string]any{
		"time":        "T",
		"session":     session,
		"kind":        "hostCall",
		"api":         call.API,
		"method":      call.Method,
		"args":        Redact(args),
		"ok":          errMsg == "",
		"duration_us": 0,
	}
	if errMsg != "" {
		entry["error"] = errMsg
	}
	line, _ := json.Marshal(entry)
	return append(line, '\n')
}

var (
	auditTime     = regexp.MustCompile(`"time":"[^"]*"`)
	auditDuration = regexp.MustCompile(`"duration_us":[0-9]+`)
)

// TestAuditLineMatchesReference: the audit line of each hostCall is the
// same text as before, secrets redacted at any depth, whatever the call.
func TestAuditLineMatchesReference(t *testing.T) {
	h := NewHandlers()
	h.Handle("t", "echo", func(ctx context.Context, c HostCall) (ipc.Value, error) { return c.Args, nil })
	h.Handle("t", "fail", func(ctx context.Context, c HostCall) (ipc.Value, error) { return nil, errors.New("it <failed>") })
	h.Handle("t", "nan", func(ctx context.Context, c HostCall) (ipc.Value, error) { return ipc.Number(math.NaN()), nil })
	var out bytes.Buffer
	s := newHostCallServer([]string{"t.echo", "t.fail", "t.nan", "t.none", "a.b.c"})
	s.handlers = h
	s.audit = &auditLog{w: &out}
	s.session = "sess<1>"
	deep := strings.Repeat("[", 70) + `{"token":1}` + strings.Repeat("]", 70)
	for _, payload := range []string{
		`{"api":"t","method":"echo","args":{"user":"a","api_key":"k","nested":[{"Password":"p","ok":1.5e-7}],"html":"<&>"}}`,
		`{"api":"t","method":"echo","args":{"\u017fecret":"long s","\u212aey":"kelvin","ToKeN":{"x":1},"author":"x","keyboard":[1]}}`,
		`{"api":"t","method":"echo","args":[{"secret":{"inner":"x"}},"s",2,true,null]}`,
		`{"api":"t","method":"echo","args":"plain"}`,
		`{"api":"t","method":"echo"}`,
		`{"api":"t","method":"echo","args":null}`,
		`{"api":"t","method":"echo","args":{"a":1e400}}`,
		`{"api":"t","method":"echo","args":` + deep + `}`,
		`{"api":"t","method":"fail","args":{"password":"x"}}`,
		`{"api":"t","method":"nan","args":{}}`,
		`{"api":"t","method":"none","args":{"auth":"x"}}`,
		`{"api":"x","method":"denied","args":{"credential":"x","ok":[1,2]}}`,
		`{"API":"t","Method":"echo","args":{"é":"\u2028"}}`,
		// api and method escaped, or not ASCII, or cut at either dot of
		// an allowed name: the audit line names them as sent.
		`{"api":"\u0074","method":"ech\u006f","args":1}`,
		`{"api":"t","method":"echo","api":null,"method":"none"}`,
		`{"api":"t` + "\xff" + `","method":"éc\"ho"}`,
		`{"api":"a.b","method":"c"}`,
		`{"api":"a","method":"b.c"}`,
		`{"api":"a.b.c"}`,
		`{"method":"a.b.c"}`,
	} {
		out.Reset()
		res, err := s.serveCall(context.Background(), &ipc.Request{Type: ipc.TypeHostCall, ID: 1, Payload: json.RawMessage(payload)})
		if err != nil {
			t.Fatalf("%s: %v", payload, err)
		}
		var call hostCallRequest
		if err := json.Unmarshal([]byte(payload), &call); err != nil {
			t.Fatal(err)
		}
		errMsg := ""
		switch r := res.(type) {
		case hostCallResult:
			errMsg = r.Error
		case json.RawMessage:
		default:
			t.Fatalf("%s: result %T", payload, res)
		}
		got := auditDuration.ReplaceAll(auditTime.ReplaceAll(out.Bytes(), []byte(`"time":"T"`)), []byte(`"duration_us":0`))
		want := referenceAuditLine("sess<1>", call, errMsg)
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", payload, got, want)
		}
		if !auditTime.Match(out.Bytes()) {
			t.Errorf("no time in %s", out.Bytes())
		}
	}
}

// TestHostCallResultText: the reply payload of a successful call is the
// text json.Marshal gives for a hostCallResult.
func TestHostCallResultText(t *testing.T) {
	h := NewHandlers()
	h.Handle("t", "echo", func(ctx context.Context, c HostCall) (ipc.Value, error) { return c.Args, nil })
	h.Handle("t", "nil", func(ctx context.Context, c HostCall) (ipc.Value, error) { return nil, nil })
	s := newHostCallServer([]string{"t.echo", "t.nil"})
	s.handlers = h
	for _, c := range []struct{ payload, result string }{
		{`{"api":"t","method":"echo","args":{"b":[1,"x<"],"a":null}}`, `{"a":null,"b":[1,"x\u003c"]}`},
		{`{"api":"t","method":"echo"}`, `null`},
		{`{"api":"t","method":"nil","args":1}`, `null`},
	} {
		res, err := s.serveCall(context.Background(), &ipc.Request{Payload: json.RawMessage(c.payload)})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(hostCallResult{OK: true, Result: json.RawMessage(c.result)})
		if got, ok := res.(json.RawMessage); !ok || string(got) != string(want) {
			t.Errorf("%s: got %s, want %s", c.payload, res, want)
		}
	}
	var re *ipc.RemoteError
	for _, payload := range []string{`{"api":1}`, `{"api":"t","method":["echo"]}`, `{"api":"t","method":"echo"`} {
		if _, err := s.serveCall(context.Background(), &ipc.Request{Payload: json.RawMessage(payload)}); !errors.As(err, &re) || re.Code != ipc.CodeBadRequest {
			t.Fatalf("bad payload %s: %v", payload, err)
		}
	}
}

// FuzzIsSecretKey: the fast key check redacts exactly what the regexp
// redacts.
func FuzzIsSecretKey(f *testing.F) {
	for _, k := range []string{"token", "API_KEY", "user", "\u017fecret", "\u212aey", "passWD", "authoriZation", "ké", "", "x\xffkey"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		if got, want := isSecretKey(k), secretKey().MatchString(k); got != want {
			t.Fatalf("%q: isSecretKey %v, regexp %v", k, got, want)
		}
	})
}

// BenchmarkAuditRecord is the audit path of one hostCall.
func BenchmarkAuditRecord(b *testing.B) {
	a := &auditLog{w: discard{}}
	call := hostCallRequest{API: "bench", Method: "echo", Args: json.RawMessage(`{"text":"0123456789abcdefghij","token":"x"}`)}
	args, _ := ipc.ParseValue(call.Args)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		a.record("s", &call, args, "", time.Microsecond)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// An error that quotes a redacted argument does not print it: a
// memory.recall by key that does not exist ("memory \"ghp_…\" not
// found") wrote the key in clear beside its "[REDACTED]" args.
func TestAuditErrorRedactsSecretArgs(t *testing.T) {
	var buf bytes.Buffer
	a := &auditLog{w: &buf}
	const secret = "ghp_0123456789abcdef"
	call := hostCallRequest{API: "memory", Method: "recall", Args: json.RawMessage(`{"key":"` + secret + `","query":"","nested":{"auth":["` + secret + `x"]}}`)}
	args, err := ipc.ParseValue(call.Args)
	if err != nil {
		t.Fatal(err)
	}
	a.record("s", &call, args, `memory "`+secret+`" not found; also "`+secret+`x"`, time.Microsecond)
	a.recordTool("s", "memory_recall", call.Args, nil, errors.New(`memory "`+secret+`" not found`), time.Microsecond)
	a.recordTool("s", "memory_recall", call.Args, &ipc.Reply{Payload: json.RawMessage(`{"success":false,"error":"no memory ` + secret + `"}`)}, nil, time.Microsecond)
	out := buf.String()
	if strings.Contains(out, "ghp_") || strings.Count(out, "[REDACTED]") < 6 {
		t.Fatalf("audit lines show a redacted argument in an error:\n%s", out)
	}
	// Short values and values under other keys stay.
	buf.Reset()
	call = hostCallRequest{API: "t", Method: "m", Args: json.RawMessage(`{"key":"ab","name":"plain-name"}`)}
	args, _ = ipc.ParseValue(call.Args)
	a.record("s", &call, args, "no ab named plain-name", time.Microsecond)
	if !strings.Contains(buf.String(), `"error":"no ab named plain-name"`) {
		t.Fatalf("error changed without a secret in it: %s", buf.String())
	}
}

package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/ipc"
)

// Review 57: bypasses of redactError (hostcall.go).

func review57AuditError(t *testing.T, args, errMsg string) string {
	t.Helper()
	var buf bytes.Buffer
	a := &auditLog{w: &buf}
	call := hostCallRequest{API: "memory", Method: "recall", Args: json.RawMessage(args)}
	v, err := ipc.ParseValue(call.Args)
	if err != nil {
		t.Fatal(err)
	}
	a.record("s", &call, v, errMsg, time.Microsecond)
	var line struct{ Error string }
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	return line.Error
}

// TestReview57RedactErrorQuotedSecret
//
// Finding (LOW): redactError replaces the secret's raw bytes only. An
// error that quotes the argument with %q / strconv.Quote (the form the
// host APIs' errors use, `memory %q not found`) escapes " and \ and
// control bytes: a password such as `hunter2"pass\word` appears as
// `hunter2\"pass\\word` and is not replaced.
func TestReview57RedactErrorQuotedSecret(t *testing.T) {
	secret := `hunter2"pass\word`
	args, _ := json.Marshal(map[string]any{"password": secret})
	got := review57AuditError(t, string(args), fmt.Sprintf("login for %q refused", secret))
	if strings.Contains(got, "hunter2") {
		t.Fatalf("error shows the %%q-quoted secret: %q", got)
	}
}

// TestReview57RedactErrorOverlappingSecrets
//
// Finding (LOW): the secrets are replaced in map order. When one is a
// prefix (or part) of another ("abcd1234" and "abcd1234-LONGERSECRET"),
// replacing the short one first leaves "[REDACTED]-LONGERSECRET": the
// rest of the long one in clear. Longest first fixes it.
func TestReview57RedactErrorOverlappingSecrets(t *testing.T) {
	args := `{"token":"abcd1234","password":"abcd1234-LONGERSECRET"}`
	for i := 0; i < 64; i++ { // map order is random
		got := review57AuditError(t, args, "bad credentials abcd1234-LONGERSECRET")
		if strings.Contains(got, "LONGERSECRET") {
			t.Fatalf("error shows the tail of a secret: %q", got)
		}
	}
}

// TestReview57RedactErrorManySecrets
//
// Finding (LOW): at most 32 secrets are looked for (maxRedactedQuotes),
// chosen in map order: a call with more secret-keyed strings gets an
// error line with some of them in clear. Redact (the args) has no such
// bound, so the args line hides what the error beside it shows.
func TestReview57RedactErrorManySecrets(t *testing.T) {
	m := map[string]string{}
	var msg []string
	for i := 0; i < 40; i++ {
		v := "SECRETVALUE" + strconv.Itoa(100+i)
		m["token"+strconv.Itoa(i)] = v
		msg = append(msg, v)
	}
	args, _ := json.Marshal(m)
	got := review57AuditError(t, string(args), "refused: "+strings.Join(msg, ","))
	if strings.Contains(got, "SECRETVALUE") {
		t.Fatalf("error shows secrets past the 32nd: %q", got)
	}
}

// TestReview57RedactErrorNumericSecret
//
// Finding (LOW): Redact hides any value under a secret key, numbers
// included; redactError looks for strings only, so {"pin_token":
// 84736251} is [REDACTED] in args and in clear in "token 84736251
// expired".
func TestReview57RedactErrorNumericSecret(t *testing.T) {
	got := review57AuditError(t, `{"pin_token":84736251}`, "token 84736251 expired")
	if strings.Contains(got, "84736251") {
		t.Fatalf("error shows a numeric secret: %q", got)
	}
}

// A long hostCall error is cut once, and its marker names the error's own
// length (review 65: redaction's cut and the line's cut each added one,
// the second naming the first's length).
func TestAuditLongErrorNamesItsLength(t *testing.T) {
	msg := "bad " + strings.Repeat("x", 10000)
	got := review57AuditError(t, `{"token":"abc123"}`, msg)
	if strings.Count(got, "[truncated") != 1 || !strings.Contains(got, "[truncated, 10004 bytes]") {
		t.Fatalf("error %q", got[max(0, len(got)-80):])
	}
}

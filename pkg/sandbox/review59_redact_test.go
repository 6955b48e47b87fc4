package sandbox

import (
	"strings"
	"testing"
)

// Review 59: redactError after review 57's fix.

// TestReview59RedactErrorOverlappingSecrets
//
// Finding (LOW): forms are replaced one after the other, longest first.
// Where two secrets overlap in the message (one's tail is the other's
// head, as when a handler quotes a value it built from both: "token"
// then "password" joined), the first replacement breaks the second's
// occurrence and the second's remaining bytes stay in the error.
func TestReview59RedactErrorOverlappingSecrets(t *testing.T) {
	args := map[string]any{"token": "ghp_AAAA1111", "password": "1111zzzzsecret"}
	msg := redactError(`login "ghp_AAAA1111zzzzsecret" refused`, args)
	if strings.Contains(msg, "zzzzsecret") || strings.Contains(msg, "ghp_AAAA") {
		t.Errorf("redacted error still shows a secret's bytes: %q", msg)
	}
}

// TestReview59RedactErrorKeysUnderSecretKey
//
// Finding (LOW): Redact hides the whole value of a secret-looking key,
// map keys below it included ({"tokens": {"ghp_…": "ci"}}), but
// collectSecrets collects values only: an error that quotes such a key
// ("unknown token \"ghp_…\"") prints it beside the redacted args.
func TestReview59RedactErrorKeysUnderSecretKey(t *testing.T) {
	args := map[string]any{"tokens": map[string]any{"ghp_SECRETSECRET": "ci"}}
	msg := redactError(`unknown token "ghp_SECRETSECRET"`, args)
	if strings.Contains(msg, "ghp_SECRETSECRET") {
		t.Errorf("redacted error still shows a secret map key: %q", msg)
	}
}

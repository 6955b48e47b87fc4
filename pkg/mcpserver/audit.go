package mcpserver

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The server's own audit lines (register_tool, unregister_tool). What they
// hide and what they keep, as docs/agents.md says:
//
//   - Values under a key that names a secret are "[REDACTED]": a key whose
//     words (split at punctuation and camelCase) include token, password,
//     passwd, secret, credential(s), auth or authorization, or "key" right
//     after api, private, access, secret, signing or encryption (api_key,
//     privateKey). A word "key" alone, a memory's or a tool's "key", or
//     "author" is not a secret name: redacting it hid what was done and
//     protected nothing.
//   - Secrets inside values (a password in a command line, a token in a
//     script) are not found: the audit log holds them as given.
//   - Every string (and every object key) is cut to maxAuditField bytes,
//     with a marker and its length, so one call cannot write megabytes.

// maxAuditField bounds one string of an audit line's args.
const maxAuditField = 4 << 10

var secretWords = map[string]bool{
	"token": true, "tokens": true, "password": true, "passwords": true, "passwd": true,
	"secret": true, "secrets": true, "credential": true, "credentials": true,
	"auth": true, "authorization": true, "apikey": true,
}

// keyQualifiers make the word after them, "key", a secret's name.
var keyQualifiers = map[string]bool{
	"api": true, "private": true, "access": true, "secret": true, "signing": true, "encryption": true,
}

// isSecretName reports whether values under the object key k are redacted.
func isSecretName(k string) bool {
	words := splitWords(k)
	for i, w := range words {
		if secretWords[w] {
			return true
		}
		if w == "key" && i > 0 && keyQualifiers[words[i-1]] {
			return true
		}
	}
	return false
}

// splitWords splits "apiKey", "API_KEY", "x-auth-token" into lower-case
// words.
func splitWords(s string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	var prev rune
	for _, r := range s {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
		prev = r
	}
	flush()
	return words
}

// auditArgs returns decoded JSON arguments as an audit line holds them:
// secret-named values redacted, every string cut to maxAuditField bytes.
func auditArgs(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if isSecretName(k) {
				out[clipField(k)] = "[REDACTED]"
			} else {
				out[clipField(k)] = auditArgs(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = auditArgs(e)
		}
		return out
	case string:
		return clipField(x)
	}
	return v
}

// clipField cuts s to maxAuditField bytes (not inside a character), with a
// marker that gives its length.
func clipField(s string) string {
	if len(s) <= maxAuditField {
		return s
	}
	n := maxAuditField
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…[truncated, " + strconv.Itoa(len(s)) + " bytes]"
}

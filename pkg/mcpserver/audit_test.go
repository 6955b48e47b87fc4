package mcpserver

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

func TestIsSecretName(t *testing.T) {
	for k, want := range map[string]bool{
		"password": true, "db_password": true, "Passwd": true, "token": true, "X-Auth-Token": true, "auth": true,
		"Authorization": true, "client_secret": true, "credentials": true, "api_key": true, "apiKey": true,
		"APIKEY": true, "privateKey": true, "AWS_SECRET_ACCESS_KEY": true, "access-key": true,
		// A memory's or a tool's name, and words that only contain one.
		"key": false, "keys": false, "sort_key": false, "author": false, "keyboard": false, "monkey": false,
		"text": false, "tokenizer": false, "name": false,
	} {
		if got := isSecretName(k); got != want {
			t.Errorf("isSecretName(%q) = %v, want %v", k, got, want)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The server's audit line of register_tool: a "key" is a name, not a
// secret, and a long value is cut with its length.
func TestAuditRedactsSecretNamesAndBoundsFields(t *testing.T) {
	var buf syncBuffer
	h := startHarness(t, func(c *Config) { c.AllowRegistration = true; c.Audit = &buf; c.AuditID = "s1" }, "")
	long := strings.Repeat("d", 10000)
	res := h.call(RegisterToolName, map[string]any{
		"name": "kv", "description": long,
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"key": map[string]any{"type": "string"}}},
		"api_key":    "sk-live-123",
	})
	if res.IsError {
		t.Fatalf("register: %q", text(res))
	}
	line := buf.String()
	var entry struct {
		Tool string         `json:"tool"`
		Args map[string]any `json:"args"`
	}
	if err := json.Unmarshal([]byte(line), &entry); err != nil {
		t.Fatalf("%v: %q", err, line)
	}
	if entry.Args["api_key"] != "[REDACTED]" || strings.Contains(line, "sk-live-123") {
		t.Errorf("api_key not redacted: %s", line)
	}
	props := entry.Args["parameters"].(map[string]any)["properties"].(map[string]any)
	if _, ok := props["key"].(map[string]any); !ok {
		t.Errorf("the property named key was redacted: %v", props)
	}
	d := entry.Args["description"].(string)
	if len(d) > maxAuditField+64 || !strings.HasSuffix(d, "…[truncated, 10000 bytes]") {
		t.Errorf("description of %d bytes: ...%q", len(d), d[max(0, len(d)-40):])
	}
}

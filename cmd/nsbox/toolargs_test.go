package main

import (
	"strings"
	"testing"
)

func TestToolArgs(t *testing.T) {
	for in, want := range map[string]string{"": "{}", "  \n": "{}", `{"a":1}`: `{"a":1}`} {
		if got, err := toolArgs(in); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	_, err := toolArgs(`{"path": x}`)
	if err == nil || !strings.Contains(err.Error(), "not valid JSON at byte 10") {
		t.Errorf("syntax error: %v", err)
	}
	if _, err := toolArgs(`{"a":1`); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("truncated: %v", err)
	}
}

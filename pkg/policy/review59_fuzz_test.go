package policy

import (
	"strings"
	"testing"
	"time"
)

// FuzzReview59CommandFiles: commandFiles must not panic, and its output
// is bounded by its input (each entry is a word of it, at most a few per
// word, and each word's text is at most the input's length).
func FuzzReview59CommandFiles(f *testing.F) {
	for _, s := range []string{
		"!sh -c 'cd tools && ./x.sh'", "ssh -o ProxyCommand='nc %h %p' -F cfg",
		"python3 -m a.b.c", "(cd x && ./y)", "$(git rev-parse --show-toplevel)/x",
		"\"$(\"", "`", "\\", "'", "cd ..; cd ../..; ./x", "node -r ./a --import ./b c.js",
		"timeout 5 env A=1 nice -n 1 ./x | sh -c \"bash -lc 'sh -c ./y'\"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := commandFiles(s)
		if len(out) > 2*len(s)+2 {
			t.Fatalf("%d entries for %d bytes", len(out), len(s))
		}
		for _, c := range out {
			if c.word == "" && !c.pythonCwd {
				t.Fatalf("empty word from %q", s)
			}
		}
	})
}

// TestReview59CommandFilesHostileSize: a config value as large as a
// config may be (maxSubmoduleConfig, 64 KiB) is read in bounded time.
func TestReview59CommandFilesHostileSize(t *testing.T) {
	for name, s := range map[string]string{
		"words":      strings.Repeat("a/b ", 1<<14),
		"sh-c":       "sh -c " + strings.Repeat("'sh -c ", 1<<13),
		"subst":      strings.Repeat("$(", 1<<15),
		"quotes":     strings.Repeat("\"'", 1<<15),
		"cd":         strings.Repeat("cd a/b; ", 1<<13),
		"nested-cd":  strings.Repeat("cd ../../a; ", 1<<12) + "./x",
		"proxy":      strings.Repeat("ssh -o ProxyCommand=", 1<<11),
		"separators": strings.Repeat(";|&", 1<<14),
		"python-m":   strings.Repeat("python -m a.b.c.d.e ", 1<<11),
	} {
		start := time.Now()
		out := commandFiles(s)
		t.Logf("%s: %v for %d bytes (%d entries)", name, time.Since(start), len(s), len(out))
		if d := time.Since(start); d > time.Second/4 {
			t.Errorf("%s: %v for %d bytes (%d entries)", name, d, len(s), len(out))
		}
	}
}

// TestReview59CommandFilesCdMemory
//
// Finding (LOW): cmdReader.cd joins each relative `cd DIR` onto r.dir
// with no bound, and add() joins r.dir onto every later word: one 64 KiB
// config value ("cd a/a/…; x/y x/y …") yields thousands of entries each
// as long as half the value, quadratic memory and time (here ~256 MiB)
// before a single path is looked at.
func TestReview59CommandFilesCdMemory(t *testing.T) {
	s := "cd " + strings.Repeat("a/", 1<<14) + "; " + strings.Repeat("x/y ", 1<<13)
	out := commandFiles(s)
	total := 0
	for _, c := range out {
		total += len(c.word)
	}
	if total > 64*len(s) {
		t.Errorf("%d bytes of paths from a %d-byte value (%d entries)", total, len(s), len(out))
	}
}

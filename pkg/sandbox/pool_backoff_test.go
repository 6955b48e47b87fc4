package sandbox

import (
	"testing"
	"time"
)

// TestPoolBackoff: no wait before the first recovery (its replan may have
// fixed the cause), then 0.1 s doubling, never more than 10 s.
func TestPoolBackoff(t *testing.T) {
	want := map[int]time.Duration{
		0: 0, 1: 0, 2: 100 * time.Millisecond, 3: 200 * time.Millisecond,
		4: 400 * time.Millisecond, 8: 6400 * time.Millisecond,
		9: 10 * time.Second, 50: 10 * time.Second, 1 << 30: 10 * time.Second,
	}
	for n, d := range want {
		if got := poolBackoff(n); got != d {
			t.Errorf("poolBackoff(%d) = %v, want %v", n, got, d)
		}
	}
}

package script

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// TestReview47NoopOutputCut
//
// Finding (LOW): review 46 made nsbox script fail (exit 125, "the
// script's output was cut") when a stream passed the 16 MiB it keeps, and
// NoopSandbox (`nsbox script --no-sandbox`) sets capped.cut in
// capped.Write. But capped embeds bytes.Buffer, whose ReadFrom is
// promoted: os/exec copies the script's pipe with io.Copy, which takes
// the destination's ReadFrom and never calls capped.Write. So the
// no-sandbox runner keeps everything the script prints (nsbox's own
// memory grows without bound: a script `yes` fills the host's memory
// until the timeout) and the cut never fires: the 16 MiB bound the docs
// state and the new exit 125 do not exist for --no-sandbox.
//
// Attack/repro: nsbox script --no-sandbox --lang bash -c 'head -c
// 17000000 /dev/zero' | wc -c → 17000000, exit 0.
func TestReview47NoopOutputCut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stdout, stderr, err := NoopSandbox{}.Execute(ctx, ExecConfig{Language: "bash", Script: "head -c 17000000 /dev/zero; head -c 17000000 /dev/zero >&2"})
	if len(stdout) > sandbox.DefaultMaxOutput || len(stderr) > sandbox.DefaultMaxOutput {
		t.Errorf("the no-sandbox runner kept %d bytes of stdout and %d of stderr, past its bound of %d a stream", len(stdout), len(stderr), sandbox.DefaultMaxOutput)
	}
	if !errors.Is(err, ErrOutputCut) {
		t.Errorf("a script that printed 17,000,000 bytes a stream: err %v, want ErrOutputCut", err)
	}
}

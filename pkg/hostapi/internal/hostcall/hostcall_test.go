package hostcall

import (
	"errors"
	"testing"

	"github.com/nsbox/nsbox/pkg/hostapi/store"
	"github.com/nsbox/nsbox/pkg/ipc"
)

func TestDecodeIsStrict(t *testing.T) {
	type args struct {
		Key   string   `json:"key"`
		Limit int      `json:"limit"`
		Tags  []string `json:"tags"`
	}
	for in, want := range map[string]string{
		`{"key":"k","limit":3}`: "",
		`null`:                  "",
		`{}`:                    "",
		`{"limit":2.5}`:         `invalid argument "limit": want an integer, got number 2.5`,
		`{"key":["x"]}`:         `invalid argument "key": want a string, got array`,
		`{"tags":"x"}`:          `invalid argument "tags": want an array, got string`,
		`{"other":1}`:           `invalid argument "other": unknown argument`,
		`"text"`:                `invalid arguments: arguments must be a JSON object`,
	} {
		v, err := ipc.ParseValue([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		var a args
		err = Decode(v, &a)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", in, err)
		case want != "" && (err == nil || err.Error() != want || !errors.Is(err, store.ErrInvalid)):
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

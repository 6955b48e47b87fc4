package ipc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// decodeSeeds are texts on the edges of the grammar and of encoding/json's
// rules for structs.
var decodeSeeds = []string{
	`{"type":"hostCall","id":1,"payload":{"api":"memory","method":"save","args":{}}}`,
	`{"type":"reply","id":1,"error":{"code":"denied","message":"no"}}`,
	`{"type":"a","payload":null}`,
	`{"TYPE":"a","Id":3,"PayLoad":[1, 2 ,{"x" : "y"}] }`,
	`{"error":{"code":"a"},"error":{"message":"b"}}`,
	`{"error":{"code":"a"},"error":null}`,
	`{"error":[],"type":"x"}`,
	`{"type":"x","type":null}`,
	`{"id":1.0}`, `{"id":-0}`, `{"id":18446744073709551615}`, `{"id":18446744073709551616}`, `{"id":1e2}`,
	`{"id":5,"id":null}`, `{"id":"5"}`, `{"id":true}`,
	`null`, ` null `, `nul`, `[]`, `"x"`, `1`, ``, ` `, `{`, `{}`, `{} x`, `{},`,
	`{"type":5,"id":3}`,
	`{"type":"\ud800x\udc00\ud83d\ude00\u00e9\/\b\f\n\r\t\"\\"}`,
	"{\"type\":\"\xff\xfe\xed\xa0\x80\"}",
	"{\"type\":\"a\x01\"}",
	`{"t\u0079pe":"esc","\u0069d":4}`,
	"{\"\xc5\xbftep\":1,\"type\":\"\u212a\"}",
	`{"type":"x","payload":01}`, `{"type":"x","payload":1.}`, `{"type":"x","payload":-}`, `{"type":"x","payload":1e}`,
	`{"type":"x","payload":[1,]}`, `{"type":"x","payload":{"a":1,}}`, `{"type":"x","payload":{"a" 1}}`,
	`{"type":"x","payload":tru}`, `{"type":"x","payload":"\x"}`, `{"type":"x","payload":"\u12"}`,
	`{"type":"x","extra":{"deep":[[[[{"a":[null,true,false,-1.5e+3]}]]]]}}`,
	`{"type":"x","payload":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
	`{"api":"a","API":"b","method":null,"args":[1,{"k":"v"}],"ARGS":null}`,
	`{"api":1}`, `{"api":"x","args":}`,
	`{"type":"hostCall","id":2}`, `{"type":"reply","id":2}`, `{"type":"host\u0043all"}`, `{"type":"hostcall"}`, `{"type":"execute","type":"callTool"}`,
}

// FuzzDecodeEnvelope: decodeEnvelope accepts what json.Unmarshal accepts
// into an Envelope and yields the same envelope.
func FuzzDecodeEnvelope(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want, got Envelope
		werr := json.Unmarshal(data, &want)
		gerr := decodeEnvelope(data, &got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%q: encoding/json says %v, decodeEnvelope says %v", data, werr, gerr)
		}
		if werr != nil {
			return
		}
		if got.Type != want.Type || got.ID != want.ID || !bytes.Equal(got.Payload, want.Payload) ||
			(got.Payload == nil) != (want.Payload == nil) || !reflect.DeepEqual(got.Error, want.Error) {
			t.Fatalf("%q:\n got %+v %+v\nwant %+v %+v", data, got, got.Error, want, want.Error)
		}
	})
}

// FuzzDecodeFields: DecodeFields decodes like json.Unmarshal into a fresh
// struct of string, []string, int64, bool and RawMessage fields.
func FuzzDecodeFields(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	for _, s := range []string{
		`{"argv":["/bin/true","a\u00e9",null],"env":null,"dir":"/","timeoutMs":1500,"hostCall":true}`,
		`{"argv":[],"n":-0,"ok":false,"n":null,"ok":null}`,
		`{"argv":"x"}`, `{"argv":[1]}`, `{"argv":[["a"]]}`, `{"n":1.5}`, `{"n":1e3}`, `{"n":"1"}`, `{"n":true}`,
		`{"n":9223372036854775807}`, `{"n":9223372036854775808}`, `{"n":-9223372036854775808}`, `{"ok":1}`, `{"ok":"true"}`,
		`{"ARGV":["x"],"argv":null}`, `{"argv":["x",]}`, `{"argv":["x" "y"]}`,
	} {
		f.Add([]byte(s))
	}
	type target struct {
		API    string          `json:"api"`
		Method string          `json:"method"`
		Args   json.RawMessage `json:"args"`
		Argv   []string        `json:"argv"`
		N      int64           `json:"n"`
		OK     bool            `json:"ok"`
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want, got target
		werr := json.Unmarshal(data, &want)
		gerr := DecodeFields(data, []Field{
			{Name: "api", String: &got.API}, {Name: "method", String: &got.Method}, {Name: "args", Raw: &got.Args},
			{Name: "argv", Strings: &got.Argv}, {Name: "n", Int: &got.N}, {Name: "ok", Bool: &got.OK},
		})
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%q: encoding/json says %v, DecodeFields says %v", data, werr, gerr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %#v\nwant %#v", data, got, want)
		}
	})
}

// parseValueReference is ParseValue as it was before the one-pass decoder:
// encoding/json into any, then converted.
func parseValueReference(data []byte) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data")
	}
	return referenceFromAny(raw, 0)
}

func referenceFromAny(raw any, depth int) (Value, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("too deep")
	}
	switch x := raw.(type) {
	case nil:
		return Null{}, nil
	case bool:
		return Bool(x), nil
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return nil, err
		}
		return Number(f), nil
	case string:
		return String(x), nil
	case []any:
		l := make(List, len(x))
		for i, e := range x {
			v, err := referenceFromAny(e, depth+1)
			if err != nil {
				return nil, err
			}
			l[i] = v
		}
		return l, nil
	case map[string]any:
		m := make(Map, len(x))
		for k, e := range x {
			v, err := referenceFromAny(e, depth+1)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	}
	return nil, fmt.Errorf("unsupported %T", raw)
}

// FuzzParseValue: ParseValue yields what encoding/json yields for valid
// JSON, and refuses anything else (encoding/json's Decoder let a stray
// closing bracket after the value through; ParseValue does not).
func FuzzParseValue(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`[1e400]`))
	f.Add([]byte(`[1e-400, -0, 0.1, 123456789012345678901234567890]`))
	f.Add([]byte(`{"a":1,"a":2,"b":{"c":[]}}`))
	f.Add([]byte(`1]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gerr := ParseValue(data)
		if !json.Valid(data) {
			if gerr == nil {
				t.Fatalf("%q is not JSON, ParseValue gave %#v", data, got)
			}
			return
		}
		want, werr := parseValueReference(data)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%q: reference says %v, ParseValue says %v", data, werr, gerr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %#v\nwant %#v", data, got, want)
		}
	})
}

// TestNestingBound: encoding/json refuses more than 10,000 levels; so does
// the envelope decoder, at the same level, without recursing.
func TestNestingBound(t *testing.T) {
	for _, levels := range []int{maxNesting - 1, maxNesting, maxNesting + 1} {
		inner := levels - 1 // the envelope itself is a level
		msg := `{"type":"x","payload":` + strings.Repeat("[", inner) + strings.Repeat("]", inner) + `}`
		var want, got Envelope
		werr := json.Unmarshal([]byte(msg), &want)
		gerr := decodeEnvelope([]byte(msg), &got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%d levels: encoding/json %v, decodeEnvelope %v", levels, werr, gerr)
		}
		if (levels > maxNesting) != (gerr != nil) {
			t.Fatalf("%d levels: %v", levels, gerr)
		}
	}
}

func TestParseValueDepthAndNumbers(t *testing.T) {
	ok := strings.Repeat("[", maxDepth) + "1" + strings.Repeat("]", maxDepth)
	if _, err := ParseValue([]byte(ok)); err != nil {
		t.Fatalf("%d levels refused: %v", maxDepth, err)
	}
	deep := strings.Repeat("[", maxDepth+1) + "1" + strings.Repeat("]", maxDepth+1)
	if _, err := ParseValue([]byte(deep)); err == nil {
		t.Fatal("nesting past the bound accepted")
	}
	if _, err := ParseValue([]byte(`1e400`)); err == nil {
		t.Fatal("a number past float64 accepted")
	}
	for _, bad := range []string{``, `1]`, `{} {}`, `[1,]`, `"\u"`, `01`} {
		if v, err := ParseValue([]byte(bad)); err == nil {
			t.Errorf("%q accepted as %#v", bad, v)
		}
	}
}

// BenchmarkDecode compares the one-pass decoder with encoding/json on a
// typical hostCall request.
func BenchmarkDecode(b *testing.B) {
	msg := []byte(`{"type":"hostCall","id":12345,"payload":{"api":"bench","method":"echo","args":{"text":"0123456789abcdefghij","n":[1,2.5,true,null]}}}`)
	b.Run("envelope/encoding-json", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var env Envelope
			if err := json.Unmarshal(msg, &env); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("envelope/one-pass", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var env Envelope
			if err := decodeEnvelope(msg, &env); err != nil {
				b.Fatal(err)
			}
		}
	})
	var env Envelope
	decodeEnvelope(msg, &env)
	var api, method string
	var args json.RawMessage
	DecodeFields(env.Payload, []Field{{Name: "api", String: &api}, {Name: "method", String: &method}, {Name: "args", Raw: &args}})
	b.Run("value/encoding-json", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := parseValueReference(args); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("value/one-pass", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := ParseValue(args); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzRawPayload: a raw payload is accepted exactly when it is one JSON
// value, and written compact.
func FuzzRawPayload(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(" [1, {\"a\" :\t\"b c\"}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := appendRawValue([]byte("x"), data, 1)
		if !json.Valid(data) || len(data) == 0 {
			if err == nil {
				t.Fatalf("%q accepted", data)
			}
			return
		}
		var want bytes.Buffer
		json.Compact(&want, data)
		if err != nil || string(got) != "x"+want.String() {
			t.Fatalf("%q: got %q %v, want %q", data, got, err, want.String())
		}
	})
}

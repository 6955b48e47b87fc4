package ipc

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"testing"
)

// plainFromBytes builds a payload of the shapes appendPlain encodes itself
// (map[string]any, []any, string, int, float64, bool, nil, and nil maps
// and lists) from arbitrary bytes: keys and strings are raw bytes (invalid
// UTF-8, control characters, U+2028, HTML characters), numbers any bit
// pattern (NaN, Inf, -0, subnormals, integers past 2^53), nesting up to
// past maxDepth. FuzzPlainPayload builds its payloads with json.Unmarshal,
// which never yields invalid UTF-8, an int or a non-finite number.
type plainBuilder struct {
	data []byte
	pos  int
}

func (b *plainBuilder) byte() byte {
	if b.pos >= len(b.data) {
		return 0
	}
	c := b.data[b.pos]
	b.pos++
	return c
}

func (b *plainBuilder) str() string {
	n := int(b.byte() % 12)
	b.pos = min(b.pos, len(b.data))
	end := min(b.pos+n, len(b.data))
	s := string(b.data[b.pos:end])
	b.pos = end
	return s
}

func (b *plainBuilder) u64() uint64 {
	var x [8]byte
	copy(x[:], b.data[min(b.pos, len(b.data)):])
	b.pos = min(b.pos+8, len(b.data))
	return binary.LittleEndian.Uint64(x[:])
}

func (b *plainBuilder) value(depth int) any {
	if b.pos >= len(b.data) {
		return nil
	}
	switch c := b.byte(); c % 12 {
	case 0:
		return nil
	case 1:
		return c&0x80 != 0
	case 2:
		return b.str()
	case 3:
		return int(int64(b.u64()))
	case 4:
		return math.Float64frombits(b.u64())
	case 5:
		return float64(int64(b.u64() >> (c >> 4)))
	case 6:
		return []any(nil)
	case 7:
		return map[string]any(nil)
	case 8, 9:
		n := int(b.byte() % 5)
		l := make([]any, 0, n)
		for i := 0; i < n; i++ {
			l = append(l, b.value(depth+1))
		}
		return l
	case 10:
		// A chain past maxDepth now and then.
		v := b.value(depth + 1)
		for i := 0; i < int(b.byte()%80); i++ {
			v = []any{v}
		}
		return v
	default:
		n := int(b.byte() % 5)
		m := make(map[string]any, n)
		for i := 0; i < n; i++ {
			m[b.str()] = b.value(depth + 1)
		}
		return m
	}
}

// FuzzPlainPayloadAnyBytes compares appendPayload with json.Marshal on the
// payloads plainFromBytes builds: the same text, or both refuse.
func FuzzPlainPayloadAnyBytes(f *testing.F) {
	f.Add([]byte("\x0b\x03\x02\x02\xff\xfe\x02\x02\x02\xef\xbf\xbd"))
	f.Add([]byte("\x0b\x02\x03\xe2\x80\xa8\x04\x00\x00\x00\x00\x00\x00\xf8\x7f"))
	f.Add([]byte("\x08\x04\x03\xff\xff\xff\xff\xff\xff\x3f\x00\x05\x01\x02\x02<>&\x00"))
	f.Add([]byte("\x0a\x02\x01\x7f\x4f"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := &plainBuilder{data: data}
		v := b.value(0)
		for _, p := range []any{v, map[string]any{"p": v}, []any{v}} {
			if p == nil {
				continue // a nil payload is omitted from the envelope
			}
			want, werr := json.Marshal(p)
			got, gerr := appendPayload([]byte("prefix"), p)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("%#v: appendPayload error %v, json.Marshal error %v", p, gerr, werr)
			}
			if werr != nil {
				continue
			}
			if string(got) != "prefix"+string(want) {
				t.Fatalf("%#v\n got %q\nwant %q", p, got, "prefix"+string(want))
			}
		}
	})
}

// FuzzValueMapKeys compares the Value encoder with json.Marshal on maps
// whose several keys are arbitrary bytes (the key order of invalid UTF-8
// and of keys that escape to the same text).
func FuzzValueMapKeys(f *testing.F) {
	f.Add("\xff", "\xfe", "\ufffd", "<")
	f.Add("a\u2028", "a\u2029", "a\x00", "a")
	f.Fuzz(func(t *testing.T, k1, k2, k3, k4 string) {
		v := Map{k1: String(k2), k2: List{String(k3), Map{k4: Null{}, k3: Bool(true)}}, k3: Number(1), k4: String(k1)}
		got, err := MarshalValue(v)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(valueToAny(v))
		if string(got) != string(want) {
			t.Fatalf("%q\n got %s\nwant %s", []string{k1, k2, k3, k4}, got, want)
		}
	})
}

// TestValueNestedInPlainPayload: a Value inside a map[string]any (a host
// API result that carries the arguments it was given, ToValue of a struct
// with a Value field) is left to json.Marshal, for which Null is an empty
// struct: it is written {}, an object, where the Value encoder writes
// null; a nil Map or List becomes null where the Value encoder writes {}
// and []. The same Value meant different data depending on what held it
// (found by review); Null, Map and List now encode themselves
// (MarshalJSON) and appendPlain encodes a Value with appendValue.
func TestValueNestedInPlainPayload(t *testing.T) {
	for _, v := range []Value{Null{}, Map(nil), List(nil), Map{"n": Null{}}} {
		want, err := MarshalValue(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendPayload(nil, map[string]any{"v": v})
		if err != nil || string(got) != `{"v":`+string(want)+`}` {
			t.Errorf("%#v in a map payload: got %s %v, want {\"v\":%s}", v, got, err, want)
		}
		tv, err := ToValue(map[string]any{"v": v})
		if err != nil {
			t.Fatal(err)
		}
		if tvText, _ := MarshalValue(tv); string(tvText) != `{"v":`+string(want)+`}` {
			t.Errorf("ToValue of %#v in a map: %s, want {\"v\":%s}", v, tvText, want)
		}
	}
}

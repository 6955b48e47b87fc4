package netfilter

import (
	"errors"
	"net/netip"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// FuzzDNSAnswer feeds the resolver's answer any message a sandbox could
// send (go test -run '^$' -fuzz FuzzDNSAnswer ./pkg/netfilter), and checks
// what the filter's guarantees rest on, whatever the bytes:
//
//   - no panic; a reply is a response to the query's ID, or nothing;
//   - a name goes upstream only when the allowlist covers it and no pin
//     answers it: made-up names carry nothing out (DNS tunnelling);
//   - an A record is always a virtual address nsbox handed out for the
//     very name asked, never the upstream's own address, which the
//     sandbox could then try to reach by number.
func FuzzDNSAnswer(f *testing.F) {
	up := newFakeUpstream(f)
	flt := newFilter(f, up, []string{"*.up.test", "pinned.test"}, []string{"bad.up.test"}, []string{"pinned.test:127.0.0.1"}, nil)
	f.Cleanup(func() { flt.Close() })

	seed := func(id uint16, name string, typ dnsmessage.Type, class dnsmessage.Class, op dnsmessage.OpCode) {
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true, OpCode: op})
		b.StartQuestions()
		b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: class})
		msg, err := b.Finish()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(msg)
	}
	seed(1, "www.up.test.", dnsmessage.TypeA, dnsmessage.ClassINET, 0)
	seed(2, "WWW.UP.TEST.", dnsmessage.TypeAAAA, dnsmessage.ClassINET, 0)
	seed(3, "nothere.up.test.", dnsmessage.TypeA, dnsmessage.ClassINET, 0)
	seed(4, "pinned.test.", dnsmessage.TypeA, dnsmessage.ClassINET, 0)
	seed(5, "bad.up.test.", dnsmessage.TypeA, dnsmessage.ClassINET, 0)
	seed(6, "secret-data-1234.evil.example.", dnsmessage.TypeA, dnsmessage.ClassINET, 0)
	seed(7, "www.up.test.", dnsmessage.TypeA, dnsmessage.ClassCHAOS, 0)
	seed(8, "www.up.test.", dnsmessage.TypeA, dnsmessage.ClassINET, 2)
	seed(9, "a\\.b.up.test.", dnsmessage.TypeA, dnsmessage.ClassINET, 0)
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3})

	f.Fuzz(func(t *testing.T, q []byte) {
		up.mu.Lock()
		before := len(up.names)
		up.mu.Unlock()

		resp := flt.answer(q)

		// The upstream is asked synchronously (resolve waits for its
		// answer), so every query this message caused is counted now.
		up.mu.Lock()
		sent := append([]string(nil), up.names[before:]...)
		up.mu.Unlock()
		for _, n := range sent {
			name, err := NormalizeName(n)
			if err != nil || !flt.cfg.Allow.Resolvable(name) || name == "pinned.test" {
				t.Fatalf("%q went upstream (normalized %q, %v) for query %x", n, name, err, q)
			}
		}

		var qp dnsmessage.Parser
		qh, qerr := qp.Start(q)
		if resp == nil {
			return
		}
		if qerr != nil || qh.Response {
			t.Fatalf("a reply %x to a message that is not a query: %x", resp, q)
		}
		var p dnsmessage.Parser
		h, err := p.Start(resp)
		if err != nil {
			t.Fatalf("unparsable reply %x to %x: %v", resp, q, err)
		}
		if !h.Response || h.ID != qh.ID {
			t.Fatalf("reply header %+v to query %+v", h, qh)
		}
		qs, err := p.AllQuestions()
		if err != nil {
			t.Fatalf("reply's questions: %v", err)
		}
		for {
			rh, err := p.AnswerHeader()
			if errors.Is(err, dnsmessage.ErrSectionDone) {
				break
			}
			if err != nil {
				t.Fatalf("reply's answers: %v", err)
			}
			if rh.Type != dnsmessage.TypeA || len(qs) != 1 || h.RCode != dnsmessage.RCodeSuccess {
				t.Fatalf("answer %+v in a reply %+v with questions %v", rh, h, qs)
			}
			a, err := p.AResource()
			if err != nil {
				t.Fatal(err)
			}
			addr := netip.AddrFrom4(a.A)
			asked, err := NormalizeName(qs[0].Name.String())
			if err != nil {
				t.Fatalf("an address for a name that is not valid: %q", qs[0].Name)
			}
			e := flt.lookupVirtual(addr)
			if !VirtualPrefix.Contains(addr) || e == nil || e.name != asked {
				t.Fatalf("A %v for %q: not a virtual address handed out for that name (entry %+v)", addr, asked, e)
			}
		}
	})
}

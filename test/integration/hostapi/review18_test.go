package hostapiit

import (
	"strings"
	"testing"

	"github.com/nsbox/nsbox/pkg/hostapi"
	"github.com/nsbox/nsbox/pkg/hostapi/notepad"
)

// TestReview18StoredDocumentUnreadable
//
// Severity: LOW.
//
// Attack: docs/hostapi.md promises that the 2 MiB document bound makes
// every stored document readable from inside ("no document exists that a
// sandbox could not read"). The bound counts the document's bytes, but a
// result is bounded by its JSON text (3 MiB, hostcall.MaxResultBytes), and
// JSON escapes `<`, `>`, `&` (to \u003c: 6 bytes), control characters
// (6 bytes), quotes, backslashes, newlines and tabs (2 bytes). A session
// writes a document within the bound made of such characters (an HTML
// page, a file of quotes or newlines): document_overwrite accepts it, and
// from then on document_read / notepad.content of that tab fails for every
// sandbox with "the result is too large", and the agents sharing the
// notepad cannot read or show it (only patch it blind).
//
// Should: a document the store accepts can be read back: bound the
// document by the size of its JSON form (or lower the byte bound to what
// fits escaped, MaxResultBytes/6), or send the result unescaped.
func TestReview18StoredDocumentUnreadable(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		dir := dataDir(t)
		b := startBox(t, dir, hostapi.Methods())
		// Fixed: such a document is refused when it is written, saying
		// why; one that is stored can be read back.
		for id, doc := range map[string]string{
			"page":   strings.Repeat("<", notepad.MaxDocumentBytes-1) + "\n",
			"quotes": strings.Repeat("\"\n", notepad.MaxDocumentBytes/2),
		} {
			if w := b.tool("document_overwrite", map[string]any{"id": id, "content": doc}); !w.Success {
				expect(t, strings.Contains(w.errText(), "JSON"), "%s refused without the reason: %s", id, w.errText())
				continue
			}
			r := b.tool("document_read", map[string]any{"id": id})
			expect(t, r.Success, "a %d-byte document (within the %d-byte bound) was stored but cannot be read back from inside: %s", len(doc), notepad.MaxDocumentBytes, r.errText())
		}
		// The largest document of plain text fits, and reads back.
		doc := strings.Repeat("a", notepad.MaxDocumentBytes-1) + "\n"
		b.mustTool("document_overwrite", map[string]any{"id": "plain", "content": doc}, nil)
		r := b.tool("document_read", map[string]any{"id": "plain"})
		expect(t, r.Success, "the largest plain document cannot be read back: %s", r.errText())
	})
}

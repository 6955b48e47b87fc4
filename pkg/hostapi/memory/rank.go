package memory

import (
	"math"
	"sort"
	"strings"
	"unicode"
)

// Ranking is Okapi BM25 over the tokens of a memory's text and key, plus a
// boost for query terms that name one of its tags and for a query equal to
// its key. Tokens are lower-cased runs of letters and digits, with common
// English stop words dropped and plural endings folded ("notes" = "note").
const (
	bm25K1 = 1.2
	bm25B  = 0.75
	// tagBoost weighs a query term matching a tag against one occurrence
	// in the text: a tag is a deliberate label.
	tagBoost = 1.5
	// keyBoost is added when the whole query is the memory's key.
	keyBoost = 10.0
)

var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an and are as at be by do does for from has have i if in into is it its
		me my of on or our so that the their then there these this to was we were what when where which who
		will with you your`) {
		stopWords[w] = true
	}
}

// tokens splits s into normalised terms.
func tokens(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if stopWords[f] {
			continue
		}
		out = append(out, stem(f))
	}
	return out
}

// stem folds the commonest English plural endings; it is deliberately
// small, so that ranking stays predictable.
func stem(w string) string {
	n := len(w)
	switch {
	case n > 4 && strings.HasSuffix(w, "ies"):
		return w[:n-3] + "y"
	case n > 4 && (strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "sses") || strings.HasSuffix(w, "xes")):
		return w[:n-2]
	case n > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:n-1]
	}
	return w
}

type scored struct {
	rec   Record
	score float64
}

// rank scores recs against query and returns those that match, best first
// (ties: most recently updated, then key).
func rank(recs []Record, query string) []scored {
	q := uniq(tokens(query))
	normQuery := strings.TrimSpace(strings.ToLower(query))
	if len(q) == 0 && normQuery == "" {
		return nil
	}
	// Only the query's terms are counted: a count of every word of every
	// memory, and a shared one of all of them, took about 0.9 MiB a
	// memory of words found nowhere else, 4 GB a recall of a full store,
	// outside every sandbox limit (review 50). qi maps a term to its
	// place in q.
	qi := make(map[string]int, len(q))
	for k, t := range q {
		qi[t] = k
	}
	type doc struct {
		tf   []int // the query terms' counts in the text and key
		len  int
		tags []bool // the query terms among the tags' words
	}
	docs := make([]doc, len(recs))
	df := make([]int, len(q))
	total := 0
	for i, r := range recs {
		d := doc{tf: make([]int, len(q)), tags: make([]bool, len(q))}
		for _, part := range []string{r.Text, r.Key} {
			for _, t := range tokens(part) {
				d.len++
				if k, ok := qi[t]; ok {
					d.tf[k]++
				}
			}
		}
		for _, tag := range r.Tags {
			for _, t := range tokens(tag) {
				if k, ok := qi[t]; ok {
					d.tags[k] = true
				}
			}
		}
		for k := range q {
			if d.tf[k] > 0 || d.tags[k] {
				df[k]++
			}
		}
		total += d.len
		docs[i] = d
	}
	n := float64(len(recs))
	avg := 1.0
	if len(recs) > 0 && total > 0 {
		avg = float64(total) / n
	}
	var out []scored
	for i, d := range docs {
		s := 0.0
		for k := range q {
			if df[k] == 0 {
				continue
			}
			idf := math.Log(1 + (n-float64(df[k])+0.5)/(float64(df[k])+0.5))
			if tf := float64(d.tf[k]); tf > 0 {
				s += idf * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*float64(d.len)/avg))
			}
			if d.tags[k] {
				s += tagBoost * idf
			}
		}
		if normQuery != "" && strings.ToLower(recs[i].Key) == normQuery {
			s += keyBoost
		}
		if s > 0 {
			out = append(out, scored{rec: recs[i], score: s})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.score != b.score {
			return a.score > b.score
		}
		if !a.rec.Updated.Equal(b.rec.Updated) {
			return a.rec.Updated.After(b.rec.Updated)
		}
		return a.rec.Key < b.rec.Key
	})
	return out
}

func uniq(ts []string) []string {
	seen := map[string]bool{}
	out := ts[:0:0]
	for _, t := range ts {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

//go:build !amd64

package notify

// legacyMetaSteps: only x86-64 has the older calls (meta_amd64_test.go).
func legacyMetaSteps(rw, ro string) []metaStep { return nil }

var legacyMetaWant = map[string]string{}

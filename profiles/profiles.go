// Package profiles holds nsbox's built-in profiles as data embedded in the
// binary. It contains no logic and imports nothing from nsbox, so any
// package may use it.
package profiles

import "embed"

// Seccomp holds the built-in seccomp profiles, seccomp/*.json, in the
// OCI/Docker seccomp JSON format. pkg/seccomp parses them; every file here
// is a "shipped profile" and is tested to deny pkg/seccomp.DangerousSet().
//
//go:embed seccomp/*.json
var Seccomp embed.FS

// Policies holds the built-in policy profiles, *.toml at the top of this
// directory (workspace, strict, network, batch and their shared base).
// pkg/policy decodes them strictly; a file of the same name in
// $XDG_CONFIG_HOME/nsbox/profiles overrides one. Every file here is tested
// to load and validate.
//
//go:embed *.toml
var Policies embed.FS

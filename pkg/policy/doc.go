// Package policy turns profiles, a config file and command-line settings
// into one resolved sandbox.Policy, before anything starts.
//
// # Model
//
// A Config is one layer of policy in its file form (the TOML schema of
// profiles/*.toml and config.toml, documented in docs/profiles.md). Layers
// are applied in order of precedence, lowest first:
//
//	built-in defaults < config file < profile (its extend chain, base first) < flags
//
// A scalar set in a higher layer replaces the lower one. Lists (rw, ro,
// tmpfs, hide, protect, env.pass, host_apis, tools.blocked_commands) add up
// across layers; an entry "!X" removes X added by a lower layer. env.set
// merges key by key. host_dirs is a scalar (the whole list is replaced).
//
// Every layer is checked on its own first (each error is an *Error naming
// the source, line and key), then the merged result is resolved against the
// caller's Host: variables expanded, paths made absolute and their symlinks
// resolved, duplicates removed, hidden and protected paths mapped onto
// every place a bind makes them visible, and finally checked by
// sandbox.Policy.Validate. Problems that do not stop a run (an unknown
// variable, a loosening setting) are returned as Warnings, never printed:
// this package does not print, exit or parse flags.
//
// A caller that runs a sandbox from a Result does three things around it:
// it holds the writable roots while the sandbox lives (Hold, which also
// removes the Placeholders afterwards), and once the sandbox has ended it
// runs Result.GitAudit, which makes the git repositories the sandbox made
// inert before anyone runs git in them (cmd/nsbox does all three).
//
// Imports point downward: policy imports sandbox and leaf packages, never
// the reverse.
package policy

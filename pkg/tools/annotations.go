package tools

// Annotations are MCP's tool annotations: hints to a client (which may,
// for instance, run a read-only tool without asking the user), never a
// security boundary — the sandbox is. Every built-in tool states all four.
type Annotations struct {
	// ReadOnlyHint: the tool changes nothing.
	ReadOnlyHint bool `json:"readOnlyHint"`
	// DestructiveHint: a change it makes may destroy or replace data
	// (meaningful when ReadOnlyHint is false).
	DestructiveHint bool `json:"destructiveHint"`
	// IdempotentHint: calling it again with the same arguments has no
	// further effect.
	IdempotentHint bool `json:"idempotentHint"`
	// OpenWorldHint: it may reach beyond the session's own world (the
	// network, when the policy allows it).
	OpenWorldHint bool `json:"openWorldHint"`
}

// Annotation presets.
var (
	// ReadOnly is a tool that only reads the workspace or a store.
	ReadOnly = Annotations{ReadOnlyHint: true, IdempotentHint: true}
	// Replaces is a tool that overwrites or removes something by name:
	// repeating it changes nothing more.
	Replaces = Annotations{DestructiveHint: true, IdempotentHint: true}
	// Edits is a tool whose change builds on the current content.
	Edits = Annotations{DestructiveHint: true}
	// Runs is a tool that runs a program: anything the policy allows.
	Runs = Annotations{DestructiveHint: true, OpenWorldHint: true}
)

type presentation struct {
	title string
	ann   Annotations
}

// builtinPresentation gives the built-in tools their title and annotations
// (NewRegistry applies it to a built-in tool that has none).
var builtinPresentation = map[string]presentation{
	"read_file":      {"Read file", ReadOnly},
	"write_file":     {"Write file", Replaces},
	"edit_file":      {"Edit file", Edits},
	"list_directory": {"List directory", ReadOnly},
	"search_files":   {"Search files", ReadOnly},
	"run_command":    {"Run command", Runs},
	"run_script":     {"Run script", Runs},
}

// Present returns def with title and annotations filled in from table
// when it has none: for packages that define tools (the host APIs) to
// describe theirs the same way.
func Present(def Definition, title string, ann Annotations) Definition {
	if def.Title == "" {
		def.Title = title
	}
	if def.Annotations == nil {
		a := ann
		def.Annotations = &a
	}
	return def
}

func presentBuiltin(def Definition) Definition {
	if p, ok := builtinPresentation[def.Name]; ok {
		return Present(def, p.title, p.ann)
	}
	return def
}

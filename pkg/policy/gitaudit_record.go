package policy

import (
	"encoding/json"
	"slices"
)

// gitAuditRecord is a GitAudit as a record on disk holds it (see
// MarshalJSON): what a run that was killed before its audit leaves for
// the next nsbox to finish.
type gitAuditRecord struct {
	// Workspace: the one directory a record of an earlier version
	// names; read as Dirs.
	Workspace  string               `json:"workspace,omitempty"`
	Dirs       []string             `json:"dirs,omitempty"`
	Roots      []string             `json:"roots"`
	GitRoots   []string             `json:"gitRoots,omitempty"`
	Submodules []string             `json:"submodules,omitempty"`
	Locked     []string             `json:"locked,omitempty"`
	Known      [][3]uint64          `json:"known"` // device, inode, ctime (ns)
	NoGit      bool                 `json:"noGit,omitempty"`
	Created    []createdPattern     `json:"created,omitempty"`
	Since      int64                `json:"since,omitempty"`
	Places     map[string][2]uint64 `json:"places,omitempty"` // device, inode
	// StartLinks: the symlinks the start's walk saw (device, inode,
	// ctime), so that a link moved into the walk's view is new.
	StartLinks     [][5]uint64 `json:"startLinks,omitempty"` // the link's device, inode, ctime; its target's device, inode
	StartLinkDepth int         `json:"startLinkDepth,omitempty"`
}

// MarshalJSON writes the audit with what it trusts, so that another nsbox
// process can run it (a run killed with SIGKILL cannot).
func (a *GitAudit) MarshalJSON() ([]byte, error) {
	rec := gitAuditRecord{Dirs: a.dirs, Roots: a.roots, GitRoots: a.gitRoots, Submodules: a.submodules, Locked: a.locked, Known: [][3]uint64{}, NoGit: a.noGit, Created: a.created, Since: a.since}
	for id := range a.known {
		rec.Known = append(rec.Known, [3]uint64{id.dev, id.ino, uint64(id.ctime)})
	}
	rec.StartLinkDepth = a.startLinkDepth
	for id, t := range a.startLinks {
		rec.StartLinks = append(rec.StartLinks, [5]uint64{id.dev, id.ino, uint64(id.ctime), t.dev, t.ino})
	}
	if len(a.places) > 0 {
		rec.Places = map[string][2]uint64{}
		for p, id := range a.places {
			rec.Places[p] = [2]uint64{id.dev, id.ino}
		}
	}
	return json.Marshal(rec)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (a *GitAudit) UnmarshalJSON(b []byte) error {
	var rec gitAuditRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return err
	}
	if rec.Workspace != "" && !slices.Contains(rec.Dirs, rec.Workspace) {
		rec.Dirs = append(rec.Dirs, rec.Workspace)
	}
	*a = GitAudit{dirs: rec.Dirs, roots: rec.Roots, gitRoots: rec.GitRoots, submodules: rec.Submodules, locked: rec.Locked, known: map[fileID]bool{}, noGit: rec.NoGit, created: rec.Created, since: rec.Since}
	for _, k := range rec.Known {
		a.known[fileID{dev: k[0], ino: k[1], ctime: int64(k[2])}] = true
	}
	if rec.StartLinks != nil {
		a.startLinkDepth = rec.StartLinkDepth
		a.startLinks = map[fileID]fileID{}
		for _, k := range rec.StartLinks {
			a.startLinks[fileID{dev: k[0], ino: k[1], ctime: int64(k[2])}] = fileID{dev: k[3], ino: k[4]}
		}
	}
	for p, id := range rec.Places {
		if a.places == nil {
			a.places = map[string]fileID{}
		}
		a.places[p] = fileID{dev: id[0], ino: id[1]}
	}
	return nil
}

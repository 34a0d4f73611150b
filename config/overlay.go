package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// AddedSource is the Pos.File of a rule added at run time.
const AddedSource = "salt-run reactor.add"

// Added is a rule added at run time, with salt-run reactor.add: kept
// apart from the configuration's files and laid over them (Overlaid).
type Added struct {
	// Glob is the rule's tag glob.
	Glob string `json:"glob"`
	// Files are its reaction files as given.
	Files []string `json:"files"`
	// At is when it was added.
	At time.Time `json:"at"`
	// Master is the id of the master whose salt-run added it.
	Master string `json:"master,omitempty"`
}

// Overlaid returns a copy of c with the changes made at run time laid
// over its rules, as Salt's reactor applies salt-run reactor.delete and
// reactor.add to its running list: each glob of deleted removes the first
// rule of c left with that glob (none: nothing), then each of added is
// appended, with Added set and an ID of its own. A relative reaction file
// is read from the configuration's folder, as a rule of it would be.
func (c *Config) Overlaid(added []Added, deleted []string) *Config {
	out := *c
	out.Rules = slices.Clone(c.Rules)
	for _, g := range deleted {
		if i := slices.IndexFunc(out.Rules, func(r Rule) bool { return r.Glob == g }); i >= 0 {
			out.Rules = slices.Delete(out.Rules, i, i+1)
		}
	}
	ids := map[string]bool{}
	for _, r := range out.Rules {
		ids[r.ID] = true
	}
	dir := "."
	if len(c.Files) > 0 {
		dir = filepath.Dir(c.Files[0])
	}
	for i := range added {
		a := added[i]
		r := Rule{Glob: a.Glob, Pos: Pos{File: AddedSource}, Added: &a}
		for _, f := range a.Files {
			s := SLS{Ref: f, Pos: r.Pos}
			switch rest, ok := strings.CutPrefix(f, "salt://"); {
			case ok:
				s.Pattern = c.SaltPath(rest)
			case filepath.IsAbs(f):
				s.Pattern = f
			default:
				s.Pattern = filepath.Join(dir, f)
			}
			r.SLS = append(r.SLS, s)
		}
		id := RuleID(a.Glob, a.Files)
		for n := 2; ids[id]; n++ {
			id = fmt.Sprintf("%s-%d", RuleID(a.Glob, a.Files), n)
		}
		r.ID, ids[id] = id, true
		out.Rules = append(out.Rules, r)
	}
	return &out
}

// SaltList is the rules as Salt's reactor lists them (salt-run
// reactor.list): one {glob: [reaction files]} per rule, in order.
func (c *Config) SaltList() []map[string][]string {
	out := make([]map[string][]string, 0, len(c.Rules))
	for _, r := range c.Rules {
		files := make([]string, len(r.SLS))
		for i, s := range r.SLS {
			files[i] = s.Ref
		}
		out = append(out, map[string][]string{r.Glob: files})
	}
	return out
}

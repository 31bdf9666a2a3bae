package main

import (
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/mod/semver"
)

// ErrUsage marks a command line the tool cannot act on.
var ErrUsage = errors.New("usage")

// Problem is one reason the tree cannot be released as it is.
type Problem struct {
	// File is the file at fault, relative to the repository root.
	File string
	// Msg says what is wrong with it.
	Msg string
}

// String returns the problem as one line: the file, then the message.
func (p Problem) String() string { return p.File + ": " + p.Msg }

// CheckError is the error of a tree that cannot be released; it lists
// every problem found.
type CheckError struct {
	Problems []Problem
}

// Error returns the problems, one a line.
func (e *CheckError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Check returns the version at which the released modules require one
// another ("" when none requires another) and a *CheckError when a
// released module has a replace directive, requires a released module at
// another version than the other such requirements, or imports a package
// of a released module (directly, or through a released module it
// imports) that its go.mod does not require.
func (t *Tree) Check() (string, error) {
	var problems []Problem
	type req struct {
		file, path, version string
	}
	var reqs []req
	count := make(map[string]int)
	for _, m := range t.Released {
		file := path.Join(m.Dir, "go.mod")
		for _, r := range m.Mod.Replace {
			problems = append(problems, Problem{File: file, Msg: fmt.Sprintf(
				"replace %s => %s: a released module must not replace (the go command ignores a dependency's replace directives)",
				modString(r.Old.Path, r.Old.Version), modString(r.New.Path, r.New.Version))})
		}
		for _, r := range m.Mod.Require {
			if t.released(r.Mod.Path) != nil && r.Mod.Path != m.Path {
				reqs = append(reqs, req{file, r.Mod.Path, r.Mod.Version})
				count[r.Mod.Version]++
			}
		}
	}
	version := ""
	for v, n := range count {
		if version == "" || n > count[version] || (n == count[version] && semver.Compare(v, version) > 0) {
			version = v
		}
	}
	for _, r := range reqs {
		if r.version != version {
			problems = append(problems, Problem{File: r.file, Msg: fmt.Sprintf(
				"requires %s %s, but the released modules' other requirements of one another are at %s",
				r.path, r.version, version)})
		}
	}
	missing, err := t.missingRequirements()
	if err != nil {
		return "", err
	}
	problems = append(problems, missing...)
	if len(problems) > 0 {
		return version, &CheckError{Problems: problems}
	}
	return version, nil
}

func modString(p, v string) string {
	if v == "" {
		return p
	}
	return p + " " + v
}

// missingRequirements finds, for each released module, the released
// modules its packages (tests included) need and its go.mod does not
// require, and the imports of modules that are not released.
func (t *Tree) missingRequirements() ([]Problem, error) {
	all := t.all()
	owner := func(importPath string) *Module {
		var best *Module
		for _, m := range all {
			if (importPath == m.Path || strings.HasPrefix(importPath, m.Path+"/")) && (best == nil || len(m.Path) > len(best.Path)) {
				best = m
			}
		}
		return best
	}
	imported := make(map[string]map[string]string) // module path -> imported module path -> an importing file
	var problems []Problem
	for _, m := range t.Released {
		imported[m.Path] = make(map[string]string)
		files, err := t.moduleFiles(m.Dir)
		if err != nil {
			return nil, err
		}
		for _, rel := range files {
			if !goSource(rel) {
				continue
			}
			file := path.Join(m.Dir, rel)
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(t.Root, filepath.FromSlash(file)), nil, parser.ImportsOnly)
			if err != nil {
				return nil, fmt.Errorf("release: %w", err)
			}
			for _, spec := range f.Imports {
				p, err := strconv.Unquote(spec.Path.Value)
				if err != nil {
					return nil, fmt.Errorf("release: %s: import %s: %w", file, spec.Path.Value, err)
				}
				o := owner(p)
				switch {
				case o == nil || o == m:
				case t.released(o.Path) == nil:
					problems = append(problems, Problem{File: file, Msg: fmt.Sprintf("imports %s, a package of %s, a module that is not released", p, o.Dir)})
				default:
					if _, ok := imported[m.Path][o.Path]; !ok {
						imported[m.Path][o.Path] = file
					}
				}
			}
		}
	}
	for _, m := range t.Released {
		required := make(map[string]bool)
		for _, r := range m.Mod.Require {
			required[r.Mod.Path] = true
		}
		// A module needs what it imports and what those modules require
		// of the released modules: with pruned module graphs, its go.mod
		// lists every module that provides a package it builds.
		need := make(map[string]string)
		var queue []string
		for p, file := range imported[m.Path] {
			need[p] = "imports it (" + file + ")"
			queue = append(queue, p)
		}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			for _, r := range t.released(p).Mod.Require {
				if t.released(r.Mod.Path) == nil || r.Mod.Path == m.Path {
					continue
				}
				if _, ok := need[r.Mod.Path]; !ok {
					need[r.Mod.Path] = "needs it through " + p
					queue = append(queue, r.Mod.Path)
				}
			}
		}
		var paths []string
		for p := range need {
			if !required[p] {
				paths = append(paths, p)
			}
		}
		sort.Strings(paths)
		for _, p := range paths {
			problems = append(problems, Problem{File: path.Join(m.Dir, "go.mod"), Msg: fmt.Sprintf("does not require %s, and the module %s", p, need[p])})
		}
	}
	return problems, nil
}

// goSource reports whether a file of a module is Go source the go command
// may build: not under testdata, vendor, or a directory whose name starts
// with "." or "_".
func goSource(rel string) bool {
	if !strings.HasSuffix(rel, ".go") {
		return false
	}
	dirs := strings.Split(path.Dir(rel), "/")
	for _, d := range dirs {
		if d == "testdata" || d == "vendor" || (d != "." && (strings.HasPrefix(d, ".") || strings.HasPrefix(d, "_"))) {
			return false
		}
	}
	base := path.Base(rel)
	return !strings.HasPrefix(base, ".") && !strings.HasPrefix(base, "_")
}

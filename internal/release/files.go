package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// listFiles returns the files of the work tree, slash-separated and
// relative to the root: in a git work tree, those a commit of everything
// would hold (tracked files still present, and untracked files git does
// not ignore); elsewhere every regular file outside .git directories.
func (t *Tree) listFiles() ([]string, error) {
	if t.files != nil {
		return t.files, nil
	}
	files, err := gitFiles(t.Root)
	if err != nil {
		if files, err = walkFiles(t.Root); err != nil {
			return nil, err
		}
	}
	sort.Strings(files)
	t.files = files
	return files, nil
}

// gitFiles lists the files of the git work tree whose top level is root;
// it fails when root is not the top level of a git work tree.
func gitFiles(root string) ([]string, error) {
	top, err := exec.Command("git", "-C", root, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return nil, fmt.Errorf("release: git rev-parse: %w", err)
	}
	a, errA := filepath.EvalSymlinks(strings.TrimSpace(string(top)))
	b, errB := filepath.EvalSymlinks(root)
	if errA != nil || errB != nil || a != b {
		return nil, fmt.Errorf("release: %s is not the top level of a git work tree", root)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return nil, fmt.Errorf("release: git ls-files: %w", err)
	}
	var files []string
	seen := make(map[string]bool)
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" || seen[f] {
			continue
		}
		seen[f] = true
		info, err := os.Lstat(filepath.Join(root, filepath.FromSlash(f)))
		if errors.Is(err, fs.ErrNotExist) {
			continue // tracked, deleted from the work tree
		}
		if err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
		if info.Mode().IsRegular() {
			files = append(files, f)
		}
	}
	return files, nil
}

func walkFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("release: listing %s: %w", root, err)
	}
	return files, nil
}

// moduleFiles returns the files of the module at dir, relative to dir,
// leaving out those of modules nested in it.
func (t *Tree) moduleFiles(dir string) ([]string, error) {
	all, err := t.listFiles()
	if err != nil {
		return nil, err
	}
	prefix := ""
	if dir != "." {
		prefix = dir + "/"
	}
	var rel []string
	nested := make(map[string]bool) // directories, relative to dir, holding a go.mod
	for _, f := range all {
		if !strings.HasPrefix(f, prefix) {
			continue
		}
		r := strings.TrimPrefix(f, prefix)
		rel = append(rel, r)
		if path.Base(r) == "go.mod" && r != "go.mod" {
			nested[path.Dir(r)] = true
		}
	}
	var files []string
	for _, r := range rel {
		in := false
		for d := path.Dir(r); d != "."; d = path.Dir(d) {
			if nested[d] {
				in = true
				break
			}
		}
		if !in {
			files = append(files, r)
		}
	}
	return files, nil
}

// zipEntry is a file of a module zip, its content read into memory.
type zipEntry struct {
	rel  string // path relative to the module's directory
	data []byte
}

// Path returns the file's path relative to the module's directory.
func (e zipEntry) Path() string { return e.rel }

// Lstat describes the file as a regular file of its content's size.
func (e zipEntry) Lstat() (os.FileInfo, error) {
	return dataInfo{name: path.Base(e.rel), size: int64(len(e.data))}, nil
}

// Open returns a reader of the file's content.
func (e zipEntry) Open() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(e.data)), nil
}

// dataInfo describes content held in memory as a regular file.
type dataInfo struct {
	name string
	size int64
}

func (i dataInfo) Name() string       { return i.name }
func (i dataInfo) Size() int64        { return i.size }
func (i dataInfo) Mode() os.FileMode  { return 0o644 }
func (i dataInfo) ModTime() time.Time { return time.Time{} }
func (i dataInfo) IsDir() bool        { return false }
func (i dataInfo) Sys() any           { return nil }

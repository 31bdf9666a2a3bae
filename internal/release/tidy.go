package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// ErrUntidy is the error of Tidy when a released module is not tidy.
var ErrUntidy = errors.New("go mod tidy would change a released module")

// goEnv returns the value the go command gives a setting.
func goEnv(ctx context.Context, name string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("release: go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// ProxyEnv returns the process environment with the go command set to
// resolve jobstate's modules from the file proxy at proxyDir: outside any
// workspace, the proxy first, then the machine's module download cache
// read as a proxy, then the proxy the machine is set up with; the
// checksum database not asked about jobstate's modules (the proxy's are
// not published); modules downloaded into modCache, left writable so
// that it can be removed.
func ProxyEnv(ctx context.Context, proxyDir, modCache string) ([]string, error) {
	cache, err := goEnv(ctx, "GOMODCACHE")
	if err != nil {
		return nil, err
	}
	fallback, err := goEnv(ctx, "GOPROXY")
	if err != nil {
		return nil, err
	}
	goflags, err := goEnv(ctx, "GOFLAGS")
	if err != nil {
		return nil, err
	}
	proxy := fileURL(proxyDir) + "," + fileURL(filepath.Join(cache, "cache", "download"))
	if fallback != "" && fallback != "off" {
		proxy += "," + fallback
	}
	set := map[string]string{
		"GOWORK":     "off",
		"GOPROXY":    proxy,
		"GONOSUMDB":  "github.com/jobstate",
		"GOMODCACHE": modCache,
		"GOFLAGS":    strings.TrimSpace(goflags + " -modcacherw"),
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			env = append(env, kv)
		}
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	return env, nil
}

func fileURL(dir string) string {
	return "file://" + filepath.ToSlash(dir)
}

// Tidy checks that every released module is tidy as it would be
// released at the version the tree requires them at: it builds the
// proxy of the tree at that version in a temporary directory, unpacks
// each module's zip (its go.sum lines of jobstate's modules are those of
// that content, as Set would write them) and runs `go mod tidy -diff`
// there, resolving jobstate's modules from the proxy and the others as
// usual. It writes each untidy module's differences to w and returns
// ErrUntidy, or the check's error when the tree cannot be released. With
// dirs, it checks only the released modules in those directories.
func (t *Tree) Tidy(ctx context.Context, w io.Writer, dirs ...string) error {
	only := make(map[string]bool)
	for _, d := range dirs {
		d = path.Clean(filepath.ToSlash(d))
		if t.releasedDir(d) == nil {
			return fmt.Errorf("release: %s is not the directory of a released module: %w", d, ErrUsage)
		}
		only[d] = true
	}
	version, err := t.Check()
	if err != nil {
		return err
	}
	if version == "" {
		version = "v0.0.0"
	}
	tmp, err := os.MkdirTemp("", "jobstate-tidy-")
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	defer os.RemoveAll(tmp)
	proxyDir := filepath.Join(tmp, "proxy")
	built, err := t.WriteProxy(version, proxyDir)
	if err != nil {
		return err
	}
	env, err := ProxyEnv(ctx, proxyDir, filepath.Join(tmp, "modcache"))
	if err != nil {
		return err
	}
	untidy := false
	for _, b := range built {
		if len(only) > 0 && !only[b.Module.Dir] {
			continue
		}
		mv := module.Version{Path: b.Module.Path, Version: version}
		esc, err := module.EscapePath(mv.Path)
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		src := filepath.Join(tmp, "src", filepath.FromSlash(b.Module.Dir))
		if b.Module.Dir == "." {
			src = filepath.Join(tmp, "src", "root")
		}
		if err := modzip.Unzip(src, mv, filepath.Join(proxyDir, filepath.FromSlash(esc), "@v", version+".zip")); err != nil {
			return fmt.Errorf("release: unpacking %s: %w", b.Module.Dir, err)
		}
		cmd := exec.CommandContext(ctx, "go", "mod", "tidy", "-diff")
		cmd.Dir = src
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				return fmt.Errorf("release: go mod tidy -diff in %s: %w", b.Module.Dir, err)
			}
			untidy = true
			fmt.Fprintf(w, "%s: go mod tidy would change go.mod or go.sum (the module as released at %s, in %s):\n%s", b.Module.Dir, version, src, out)
		}
	}
	if untidy {
		return ErrUntidy
	}
	return nil
}

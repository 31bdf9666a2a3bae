package conformance

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"testing"

	"github.com/jobstate/jobstate"
)

// The generated corpus (docs/conformance.md §6): generated/<label>.json.gz
// holds the scenarios of one machine, and generated/manifest.json says how
// they were made.
//
//go:embed generated
var generatedFiles embed.FS

// Manifest describes the generated corpus: the command that wrote it and,
// per file, what it holds.
type Manifest struct {
	// Command regenerates the corpus, run from the repository's top.
	Command string `json:"command"`
	// Rand is the seed value of the random draws.
	Rand uint64 `json:"rand"`
	// PerMachine, MinSteps and MaxSteps are the generator's options.
	PerMachine int `json:"per_machine"`
	MinSteps   int `json:"min_steps"`
	MaxSteps   int `json:"max_steps"`
	// Scenarios and Steps count the whole corpus.
	Scenarios int `json:"scenarios"`
	Steps     int `json:"steps"`
	// Files lists the corpus files, sorted by name.
	Files []ManifestFile `json:"files"`
}

// ManifestFile describes one corpus file.
type ManifestFile struct {
	// File is the name in generated/.
	File string `json:"file"`
	// Machine is the definition's name; From the hand-written vector it
	// comes from.
	Machine string `json:"machine"`
	From    string `json:"from"`
	// Scenarios and Steps count what the file holds.
	Scenarios int `json:"scenarios"`
	Steps     int `json:"steps"`
	// SHA256 starts the SHA-256 of the file's uncompressed JSON, so that a
	// change of behaviour shows in the manifest's diff.
	SHA256 string `json:"sha256"`
}

// EncodeGenerated writes scenarios in the corpus format: a JSON array of
// vectors, each vector's steps one per line, compact JSON with the keys in
// the order of the Go types (so the same scenarios always give the same
// bytes).
func EncodeGenerated(vs []Vector) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("[\n")
	for i, v := range vs {
		steps := v.Steps
		v.Steps = nil
		head, err := marshalPlain(v)
		if err != nil {
			return nil, err
		}
		const tail = `,"steps":null}`
		if !bytes.HasSuffix(head, []byte(tail)) {
			return nil, fmt.Errorf("%s: unexpected encoding", v.Name)
		}
		b.Write(head[:len(head)-len(tail)])
		b.WriteString(`,"steps":[`)
		for j, s := range steps {
			line, err := marshalPlain(s)
			if err != nil {
				return nil, err
			}
			b.WriteString("\n")
			b.Write(line)
			if j < len(steps)-1 {
				b.WriteString(",")
			}
		}
		b.WriteString("\n]}")
		if i < len(vs)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("]\n")
	return b.Bytes(), nil
}

// marshalPlain is json.Marshal without the escaping of <, > and &.
func marshalPlain(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Gzip compresses data with a header free of names and times, so that the
// same data always gives the same file with one Go version.
func Gzip(data []byte) ([]byte, error) {
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// DecodeGenerated reads one corpus file's uncompressed JSON: an array of
// vectors, each checked by ParseVector.
func DecodeGenerated(data []byte) ([]Vector, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	out := make([]Vector, 0, len(raw))
	for i, r := range raw {
		v, err := ParseVector(r)
		if err != nil {
			return nil, fmt.Errorf("scenario %d: %w", i+1, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// ReadGenerated reads one .json.gz corpus file.
func ReadGenerated(r io.Reader) ([]Vector, error) {
	data, err := gunzip(r)
	if err != nil {
		return nil, err
	}
	return DecodeGenerated(data)
}

func gunzip(r io.Reader) ([]byte, error) {
	zr, err := gzip.NewReader(bufio.NewReader(r))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	return io.ReadAll(zr)
}

// GeneratedManifest returns the embedded corpus's manifest.
func GeneratedManifest() (Manifest, error) {
	var m Manifest
	data, err := generatedFiles.ReadFile("generated/manifest.json")
	if err != nil {
		return m, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err = dec.Decode(&m)
	return m, err
}

// Generated returns every scenario of the embedded generated corpus in
// replay order: scenario 0 of every machine (machines by label), then
// scenario 1 of every machine, and so on, so that any prefix draws on
// every machine.
func Generated() ([]Vector, error) {
	return readCorpus(generatedFiles, "generated", 0)
}

// GeneratedFirst returns the first n scenarios of Generated's order (all
// when n <= 0), reading no more of each file than it needs.
func GeneratedFirst(n int) ([]Vector, error) {
	if n <= 0 {
		return Generated()
	}
	entries, err := fs.Glob(generatedFiles, "generated/*.json.gz")
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, nil
	}
	vs, err := readCorpus(generatedFiles, "generated", (n+len(entries)-1)/len(entries))
	if err != nil {
		return nil, err
	}
	return vs[:min(n, len(vs))], nil
}

// ReadCorpus reads every .json.gz file of dir in fsys (a corpus the
// generator wrote, such as os.DirFS("more")), in the replay order of
// Generated.
func ReadCorpus(fsys fs.FS, dir string) ([]Vector, error) {
	return readCorpus(fsys, dir, 0)
}

// readCorpus reads the .json.gz files of dir, at most perFile scenarios
// of each (all when perFile <= 0), in replay order.
func readCorpus(fsys fs.FS, dir string, perFile int) ([]Vector, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	type item struct {
		v    Vector
		n    int
		file string
	}
	var all []item
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json.gz") {
			continue
		}
		f, err := fsys.Open(path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		vs, err := readFirst(f, perFile)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", dir, e.Name(), err)
		}
		for i, v := range vs {
			all = append(all, item{v, i, e.Name()})
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n < all[j].n
		}
		return all[i].file < all[j].file
	})
	out := make([]Vector, len(all))
	for i, x := range all {
		out[i] = x.v
	}
	return out, nil
}

// readFirst reads the first n scenarios (all when n <= 0) of a .json.gz
// corpus file, decompressing no further than it needs.
func readFirst(r io.Reader, n int) ([]Vector, error) {
	if n <= 0 {
		return ReadGenerated(r)
	}
	zr, err := gzip.NewReader(bufio.NewReader(r))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	dec := json.NewDecoder(zr)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, fmt.Errorf("not a JSON array (%v)", err)
	}
	var out []Vector
	for len(out) < n && dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		v, err := ParseVector(raw)
		if err != nil {
			return nil, fmt.Errorf("scenario %d: %w", len(out)+1, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// RunGenerated replays the generated corpus (docs/conformance.md §6) on
// stores from newStore, as Run replays the vectors: each scenario is a
// subtest named after it, on a fresh store. n > 0 replays only the first
// n scenarios of Generated's order (every machine is in any prefix of a
// few dozen); n <= 0 replays them all.
func RunGenerated(t *testing.T, newStore func(t *testing.T) jobstate.Store, n int) {
	t.Helper()
	vs, err := GeneratedFirst(n)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) == 0 {
		t.Fatal("the generated corpus is empty")
	}
	RunVectors(t, vs, newStore)
}

// RunVectors replays the given vectors, each as a subtest named after it
// on a fresh store (for a corpus read with ReadCorpus).
func RunVectors(t *testing.T, vs []Vector, newStore func(t *testing.T) jobstate.Store) {
	t.Helper()
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) { RunVector(t, v, newStore) })
	}
}

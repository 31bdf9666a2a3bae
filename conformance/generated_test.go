package conformance

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/memstore"
)

// corpusFile is one file of generated/, read once for every test.
type corpusFile struct {
	name string // in generated/
	data []byte // uncompressed
	vs   []Vector
}

var (
	corpusOnce  sync.Once
	corpusFiles []corpusFile
	corpusErr   error
)

// readCorpusFiles reads and decodes generated/*.json.gz once per test
// binary (decoding the corpus is most of what its tests cost).
func readCorpusFiles(t *testing.T) []corpusFile {
	t.Helper()
	corpusOnce.Do(func() {
		paths, err := filepath.Glob(filepath.Join("generated", "*.json.gz"))
		if err != nil {
			corpusErr = err
			return
		}
		for _, p := range paths {
			raw, err := os.ReadFile(p)
			if err != nil {
				corpusErr = err
				return
			}
			data, err := gunzip(bytes.NewReader(raw))
			if err != nil {
				corpusErr = fmt.Errorf("%s: %w", p, err)
				return
			}
			vs, err := DecodeGenerated(data)
			if err != nil {
				corpusErr = fmt.Errorf("%s: %w", p, err)
				return
			}
			corpusFiles = append(corpusFiles, corpusFile{filepath.Base(p), data, vs})
		}
	})
	if corpusErr != nil {
		t.Fatal(corpusErr)
	}
	return corpusFiles
}

// replayOrder lists the scenarios of the files as Generated does:
// scenario 0 of every file (files by name), then scenario 1, and so on.
func replayOrder(files []corpusFile) []Vector {
	var out []Vector
	for i := 0; ; i++ {
		n := len(out)
		for _, f := range files {
			if i < len(f.vs) {
				out = append(out, f.vs[i])
			}
		}
		if len(out) == n {
			return out
		}
	}
}

// TestGeneratedOnMemstore replays the whole generated corpus on memstore
// (docs/conformance.md §6), as RunGenerated(t, newStore, 0) does.
func TestGeneratedOnMemstore(t *testing.T) {
	RunVectors(t, replayOrder(readCorpusFiles(t)), func(t *testing.T) jobstate.Store { return memstore.New() })
}

// TestRunGenerated checks that GeneratedFirst gives the first scenarios of
// the replay order, every machine among the first ones, and replays a
// prefix with RunGenerated.
func TestRunGenerated(t *testing.T) {
	files := readCorpusFiles(t)
	all := replayOrder(files)
	for _, n := range []int{1, len(files) - 1, len(files) + 1, 3*len(files) + 2} {
		vs, err := GeneratedFirst(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(vs) != min(n, len(all)) {
			t.Fatalf("GeneratedFirst(%d) gives %d scenarios", n, len(vs))
		}
		for i := range vs {
			if vs[i].Name != all[i].Name {
				t.Fatalf("GeneratedFirst(%d): scenario %d is %s, want %s", n, i, vs[i].Name, all[i].Name)
			}
		}
	}
	seen := make(map[string]bool)
	for _, v := range all[:min(len(files), len(all))] {
		seen[string(v.Definition)] = true
	}
	if len(seen) != len(files) {
		t.Errorf("the first %d scenarios hold %d machines, want every one of %d", len(files), len(seen), len(files))
	}
	RunGenerated(t, func(t *testing.T) jobstate.Store { return memstore.New() }, len(files))
}

var generatedDir = flag.String("generated-dir", "", "a directory of scenarios written by cmd/genvectors for TestGeneratedDir to replay")

// TestGeneratedDir replays the scenarios of the directory given by
// -generated-dir (relative to conformance/) on memstore; without the flag
// it is skipped.
func TestGeneratedDir(t *testing.T) {
	if *generatedDir == "" {
		t.Skip("no -generated-dir")
	}
	vs, err := ReadCorpus(os.DirFS(*generatedDir), ".")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) == 0 {
		t.Fatalf("%s holds no scenarios", *generatedDir)
	}
	RunVectors(t, vs, func(t *testing.T) jobstate.Store { return memstore.New() })
}

// TestGeneratedFiles checks the corpus against its manifest and the
// format: every file listed and no other, the counts and fingerprints,
// names, definitions, descriptions, covers, at least 2,000 scenarios, and
// the scenarios valid against the vector schema. (TestGeneratedCurrent
// checks the generator's formatting.)
func TestGeneratedFiles(t *testing.T) {
	t.Parallel()
	man, err := GeneratedManifest()
	if err != nil {
		t.Fatal(err)
	}
	paths, err := filepath.Glob(filepath.Join("generated", "*"))
	if err != nil {
		t.Fatal(err)
	}
	decoded := make(map[string]corpusFile)
	for _, f := range readCorpusFiles(t) {
		decoded[f.name] = f
	}
	listed := make(map[string]ManifestFile)
	for _, f := range man.Files {
		listed[f.File] = f
	}
	machines, err := GenMachines()
	if err != nil {
		t.Fatal(err)
	}
	byLabel := make(map[string]GenMachine)
	for _, m := range machines {
		byLabel[m.Label] = m
	}
	s := loadSchemas(t)
	scenarios, steps := 0, 0
	names := make(map[string]bool)
	shapes := make(map[string]bool)
	zeroth := make(map[string]bool)
	for _, p := range paths {
		base := filepath.Base(p)
		if base == "manifest.json" {
			continue
		}
		mf, ok := listed[base]
		if !ok {
			t.Errorf("%s: not in the manifest", p)
			continue
		}
		delete(listed, base)
		cf, ok := decoded[base]
		if !ok {
			t.Errorf("%s: not a corpus file", p)
			continue
		}
		data, vs := cf.data, cf.vs
		if got := Fingerprint(data); got != mf.SHA256 {
			t.Errorf("%s: fingerprint %s, the manifest says %s", p, got, mf.SHA256)
		}
		label := strings.TrimSuffix(base, ".json.gz")
		invalid := label == InvalidLabel // definitions drawn invalid, one each
		m, ok := byLabel[label]
		if !ok && !invalid {
			t.Errorf("%s: no machine of the vectors is labelled %q", p, label)
		}
		n := 0
		for i, v := range vs {
			if want := fmt.Sprintf("gen_%s_%04d", label, i); v.Name != want {
				t.Errorf("%s: scenario %d is named %q, want %q", p, i, v.Name, want)
			}
			if names[v.Name] {
				t.Errorf("%s: %s twice", p, v.Name)
			}
			names[v.Name] = true
			if i == 0 {
				zeroth[string(v.Definition)] = true
			}
			if ok && !bytes.Equal(v.Definition, m.Definition) {
				t.Errorf("%s: %s: the definition is not that of vector %s", p, v.Name, m.From)
			}
			if !strings.Contains(v.Description, "generated") || !strings.Contains(v.Description, fmt.Sprintf("seed value %d", man.Rand)) {
				t.Errorf("%s: %s: the description does not say it is generated, with seed value %d", p, v.Name, man.Rand)
			}
			if !sort.SliceIsSorted(v.Covers, func(i, j int) bool { return sectionLess(v.Covers[i], v.Covers[j]) }) {
				t.Errorf("%s: %s: covers not in order", p, v.Name)
			}
			switch {
			case invalid && (v.Expect == nil || v.Expect.Error != "invalid_definition" || !v.Expect.Complete || len(v.Expect.Problems) == 0 || len(v.Steps) != 0):
				t.Errorf("%s: %s: not a definition that must not load, with its complete list of problems and no steps", p, v.Name)
			case !invalid && len(v.Steps) == 0:
				t.Errorf("%s: %s: no steps", p, v.Name)
			}
			n += len(v.Steps)
		}
		if len(vs) != mf.Scenarios || n != mf.Steps {
			t.Errorf("%s: %d scenarios, %d steps; the manifest says %d, %d", p, len(vs), n, mf.Scenarios, mf.Steps)
		}
		scenarios += len(vs)
		steps += n
		// Schema: validate the scenarios as vector files, each with only
		// the steps that show a shape not seen yet, and those left with no
		// step only when first in the file (their definition is the same;
		// validating all 50,000 steps takes a quarter of a minute, and
		// minutes with -race).
		for i, v := range vs {
			keep := []Step{}
			for _, st := range v.Steps {
				fresh := false
				for _, sh := range stepShapes(st) {
					if !shapes[sh] {
						shapes[sh] = true
						fresh = true
					}
				}
				if fresh {
					keep = append(keep, st)
				}
			}
			if len(keep) == 0 && i > 0 {
				continue
			}
			v.Steps = keep
			b, err := marshalPlain(v)
			if err != nil {
				t.Fatal(err)
			}
			inst, err := decodeInstance(b)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.vec.Validate(inst); err != nil {
				t.Errorf("%s: %s: not valid against %s:\n%v", p, v.Name, vectorSchemaFile, err)
				break
			}
		}
	}
	for f := range listed {
		t.Errorf("the manifest lists %s, which generated/ does not hold", f)
	}
	if scenarios != man.Scenarios || steps != man.Steps {
		t.Errorf("%d scenarios, %d steps; the manifest says %d, %d", scenarios, steps, man.Scenarios, man.Steps)
	}
	if scenarios < 2000 {
		t.Errorf("%d generated scenarios, want at least 2000", scenarios)
	}
	// The replay order (Generated, RunGenerated): scenario 0 of every
	// machine first.
	if want := len(machines) + len(man.Files) - len(byLabelFiles(man, byLabel)); len(zeroth) != want {
		t.Errorf("the corpus has a scenario 0000 for %d definitions, want %d (every machine's, and the invalid definitions' first)", len(zeroth), want)
	}
}

// TestGeneratedCurrent draws again the first scenario of every machine
// with the manifest's options and checks that they are the committed ones
// (the generator and the engine have not changed without the corpus being
// regenerated); as a consequence, it checks that drawing is deterministic.
func TestGeneratedCurrent(t *testing.T) {
	t.Parallel()
	man, err := GeneratedManifest()
	if err != nil {
		t.Fatal(err)
	}
	machines, err := GenMachines()
	if err != nil {
		t.Fatal(err)
	}
	if len(machines)+1 != len(man.Files) {
		t.Errorf("%d machines in the vectors and the invalid definitions, %d files in the corpus: regenerate it (%s)", len(machines)+1, len(man.Files), man.Command)
	}
	const k = 1
	for _, m := range machines {
		raw, err := os.ReadFile(filepath.Join("generated", m.Label+".json.gz"))
		if err != nil {
			t.Errorf("%s: %v (regenerate: %s)", m.Label, err, man.Command)
			continue
		}
		data, err := gunzip(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		opts := GenOptions{Rand: man.Rand, PerMachine: k, MinSteps: man.MinSteps, MaxSteps: man.MaxSteps}
		fresh, findings, err := Generate(m, opts, func() jobstate.Store { return memstore.New() })
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range findings {
			t.Logf("%s step %d: finding: %s", f.Scenario, f.Step, f.Problem)
		}
		got, err := EncodeGenerated(fresh)
		if err != nil {
			t.Fatal(err)
		}
		// The file starts with the same k scenarios, followed by a comma
		// where the drawn ones end the array.
		got = bytes.TrimSuffix(got, []byte("\n]\n"))
		want := data[:min(len(got), len(data))]
		if !bytes.Equal(got, want) || (len(data) > len(got) && data[len(got)] != ',' && !bytes.Equal(data[len(got):], []byte("\n]\n"))) {
			t.Errorf("%s: the first %d scenarios drawn now differ from the committed ones: regenerate the corpus (%s) and review the difference\n%s",
				m.Label, k, man.Command, firstDifference(want, got))
		}
	}
}

// TestGeneratedInvalidCurrent draws again the first invalid definitions
// with the manifest's options and checks that they are the committed
// ones, and that each holds a problem of NewDefinition or of its JSON.
func TestGeneratedInvalidCurrent(t *testing.T) {
	t.Parallel()
	man, err := GeneratedManifest()
	if err != nil {
		t.Fatal(err)
	}
	machines, err := GenMachines()
	if err != nil {
		t.Fatal(err)
	}
	var committed []Vector
	for _, f := range readCorpusFiles(t) {
		if f.name == InvalidLabel+".json.gz" {
			committed = f.vs
		}
	}
	if len(committed) < 100 {
		t.Fatalf("%d invalid definitions in the corpus, want at least 100 (regenerate: %s)", len(committed), man.Command)
	}
	const k = 20
	fresh, err := GenerateInvalid(machines, GenOptions{Rand: man.Rand}, 0, k)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range fresh {
		if !reflect.DeepEqual(v, committed[i]) {
			t.Errorf("%s: drawn now, it differs from the committed one: regenerate the corpus (%s) and review the difference", v.Name, man.Command)
		}
	}
}

// byLabelFiles returns the manifest's files that are a machine's.
func byLabelFiles(man Manifest, byLabel map[string]GenMachine) []ManifestFile {
	var out []ManifestFile
	for _, f := range man.Files {
		if _, ok := byLabel[strings.TrimSuffix(f.File, ".json.gz")]; ok {
			out = append(out, f)
		}
	}
	return out
}

// stepShapes describes what the schema sees of a step, coarsely: its
// operation and error code with the keys the step and its expectation
// write, and, for each key of the operation, whether its value is an empty
// string or a negative number. The generator writes times and durations in fixed
// forms, so that a step none of whose shapes is new passes the schema if
// the steps that showed them did.
func stepShapes(s Step) []string {
	var keys []string
	shapeFields(&keys, "", reflect.ValueOf(s))
	names := make([]string, len(keys))
	out := make([]string, 0, len(keys)+1)
	for i, k := range keys {
		names[i], _, _ = strings.Cut(k, "=")
		names[i], _, _ = strings.Cut(names[i], "<")
		out = append(out, s.Op+" "+k)
	}
	return append(out, s.Op+" "+s.Expect.Error+" "+strings.Join(names, ","))
}

// shapeFields appends the JSON keys a struct's encoding holds, each with
// its class, in field order.
func shapeFields(keys *[]string, prefix string, v reflect.Value) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		f := v.Field(i)
		if opts == "omitempty" && f.IsZero() {
			continue
		}
		key := prefix + name
		for f.Kind() == reflect.Pointer && !f.IsNil() {
			f = f.Elem()
		}
		switch f.Kind() {
		case reflect.String:
			if f.Len() == 0 {
				key += "=empty"
			}
		case reflect.Int, reflect.Int64:
			if f.Int() < 0 {
				key += "<0"
			}
		case reflect.Struct:
			shapeFields(keys, key+".", f)
		}
		*keys = append(*keys, key)
	}
}

// firstDifference shows the first line where a and b differ.
func firstDifference(a, b []byte) string {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(la) || i < len(lb); i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n committed %s\n drawn     %s", i+1, x, y)
		}
	}
	return "no line differs"
}

package storemigrate

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoadOrdersByVersion(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0002_keys.sql": {Data: []byte("two")},
		"m/0001_jobs.sql": {Data: []byte("one")},
		"m/0003_more.sql": {Data: []byte("three")},
	}
	got, err := Load(fsys, "m", "teststore")
	if err != nil {
		t.Fatal(err)
	}
	want := []Migration{{1, "jobs", "one"}, {2, "keys", "two"}, {3, "more", "three"}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestLoadRefuses(t *testing.T) {
	for name, files := range map[string][]string{
		"not named NNNN_name.sql":   {"m/0001_jobs.sql", "m/readme.txt"},
		"no positive version":       {"m/0000_jobs.sql"},
		"not 1..n: 3 at position 2": {"m/0001_jobs.sql", "m/0003_more.sql"},
		"not 1..n: 1 at position 2": {"m/0001_jobs.sql", "m/0001_again.sql"},
	} {
		fsys := fstest.MapFS{}
		for _, f := range files {
			fsys[f] = &fstest.MapFile{Data: []byte("x")}
		}
		_, err := Load(fsys, "m", "teststore")
		if err == nil || !strings.Contains(err.Error(), name) || !strings.HasPrefix(err.Error(), "teststore: ") {
			t.Errorf("%v: error %v, want one saying %q", files, err, name)
		}
	}
	if _, err := Load(fstest.MapFS{}, "missing", "teststore"); err == nil {
		t.Error("a missing folder gives no error")
	}
}

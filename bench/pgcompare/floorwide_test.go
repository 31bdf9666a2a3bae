package main

import (
	"strings"
	"testing"
)

func TestParseVariants(t *testing.T) {
	got, err := parseVariants([]string{"bare=DROP INDEX jobs_updated", "hot-noexecs= SELECT 1 = 1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []wideVariant{
		{name: "floor on jobstate's rows, bare", schema: "floor_bare", alter: "DROP INDEX jobs_updated"},
		{name: "floor on jobstate's rows, hot-noexecs", schema: "floor_hot_noexecs", alter: " SELECT 1 = 1", noExecs: true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d variants, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("variant %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range [][]string{
		{"no sql"},
		{"=SELECT 1"},
		{"Upper=SELECT 1"},
		{"1st=SELECT 1"},
		{"a;b=SELECT 1"},
		{strings.Repeat("x", 32) + "=SELECT 1"},
		{"jobstate=SELECT 1"},            // the unaltered copy's schema
		{"a-b=SELECT 1", "a_b=SELECT 2"}, // one schema for both
		{"same=SELECT 1", "same=SELECT 2"},
	} {
		if v, err := parseVariants(bad); err == nil {
			t.Errorf("parseVariants(%q) = %+v, want an error", bad, v)
		}
	}
}

// FuzzParseVariants: whatever the flags, parseVariants returns an error
// or variants whose schemas are distinct identifiers, none the
// unaltered copy's.
func FuzzParseVariants(f *testing.F) {
	f.Add("bare=DROP INDEX jobs_updated", "hot-noexecs=SELECT 1")
	f.Add("a-b=x", "a_b=y")
	f.Add("=", "")
	f.Fuzz(func(t *testing.T, a, b string) {
		vs, err := parseVariants([]string{a, b})
		if err != nil {
			return
		}
		seen := map[string]bool{baseSchema: true}
		for _, v := range vs {
			if seen[v.schema] {
				t.Fatalf("schema %s given twice: %+v", v.schema, vs)
			}
			seen[v.schema] = true
			for _, r := range v.schema {
				if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
					t.Fatalf("schema %q is not a plain identifier", v.schema)
				}
			}
		}
	})
}

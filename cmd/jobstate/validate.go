package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/jobstate/jobstate"
)

// validate checks JSON definitions: every problem of each file on
// stdout, prefixed by the file's name; exit 1 when any file has one.
func (a *app) validate(_ context.Context, args []string) error {
	fs := a.newFlags("validate", "FILE.json...")
	files, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return usagef("validate: name one or more definition files")
	}
	bad := 0
	for _, f := range files {
		df, err := parseDefinitionFile(f)
		if err != nil {
			bad++
			var de *jobstate.DefinitionError
			if !errors.As(err, &de) {
				fmt.Fprintf(a.stdout, "%s: %v\n", f, err)
				continue
			}
			for _, p := range de.Problems {
				fmt.Fprintf(a.stdout, "%s: %s\n", f, p)
			}
			continue
		}
		fmt.Fprintf(a.stdout, "%s: machine %q is valid (%d states, %d rules)\n", f, df.def.Name(), len(df.def.States()), len(df.def.Rules()))
		if df.code.any() {
			fmt.Fprintf(a.stdout, "%s: names code the service registers: %s\n", f, df.code)
		}
	}
	if bad > 0 {
		return refusedf("validate: %d of %d file(s) are not valid definitions", bad, len(files))
	}
	return nil
}

// diagram prints a JSON definition as a Mermaid state diagram.
func (a *app) diagram(_ context.Context, args []string) error {
	fs := a.newFlags("diagram", "FILE.json")
	files, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return usagef("diagram: name exactly one definition file")
	}
	df, err := parseDefinitionFile(files[0])
	if err != nil {
		var de *jobstate.DefinitionError
		if errors.As(err, &de) {
			return refusedf("diagram: %s is not a valid definition (%d problem(s); run `jobstate validate %s`): %s", files[0], len(de.Problems), files[0], de.Problems[0])
		}
		return refusedf("diagram: %v", err)
	}
	fmt.Fprint(a.stdout, df.def.Mermaid())
	return nil
}

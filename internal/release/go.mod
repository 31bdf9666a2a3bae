module github.com/jobstate/jobstate/internal/release

go 1.23.0

require golang.org/x/mod v0.25.0

// This module is never released: it builds from the tree, with or
// without the workspace (GOWORK=off), through these replace directives.
replace (
	github.com/jobstate/jobstate => ../..
	github.com/jobstate/jobstate/pgstore => ../../pgstore
)

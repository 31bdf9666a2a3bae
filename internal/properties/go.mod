module github.com/jobstate/jobstate/internal/properties

go 1.23.0

require (
	github.com/google/uuid v1.6.0
	github.com/jobstate/jobstate v0.1.0
	github.com/jobstate/jobstate/conformance v0.1.0
	pgregory.net/rapid v1.3.0
)

require github.com/google/btree v1.1.3 // indirect

// This module holds property tests of the root module's packages, one
// package of tests per package under test, so that the property-testing
// library never reaches the root module's users. It is never released: it
// builds from the tree, with or without the workspace (GOWORK=off),
// through these replace directives.
replace (
	github.com/jobstate/jobstate => ../..
	github.com/jobstate/jobstate/conformance => ../../conformance
)

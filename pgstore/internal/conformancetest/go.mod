module github.com/jobstate/jobstate/pgstore/internal/conformancetest

go 1.23.0

require (
	github.com/google/uuid v1.6.0
	github.com/jackc/pgx/v5 v5.7.5
	github.com/jobstate/jobstate v0.1.0
	github.com/jobstate/jobstate/conformance v0.1.0
	github.com/jobstate/jobstate/pgstore v0.1.0
	github.com/jobstate/jobstate/storetest v0.1.0
	go.uber.org/goleak v1.3.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/google/btree v1.1.3 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.2 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.37.0 // indirect
	golang.org/x/sync v0.13.0 // indirect
	golang.org/x/text v0.24.0 // indirect
)

// This module holds pgstore's tests that run the Store suite
// (storetest, conformance) or use test-only libraries (goleak, rapid),
// so that none of them reaches pgstore's users. It is never released: it
// builds from the tree, with or without the workspace (GOWORK=off),
// through these replace directives.
replace (
	github.com/jobstate/jobstate => ../../..
	github.com/jobstate/jobstate/conformance => ../../../conformance
	github.com/jobstate/jobstate/pgstore => ../..
	github.com/jobstate/jobstate/storetest => ../../../storetest
)

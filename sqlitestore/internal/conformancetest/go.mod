module github.com/jobstate/jobstate/sqlitestore/internal/conformancetest

go 1.23.0

require (
	github.com/jobstate/jobstate v0.1.0
	github.com/jobstate/jobstate/sqlitestore v0.1.0
	github.com/jobstate/jobstate/storetest v0.1.0
)

require (
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jobstate/jobstate/conformance v0.1.0 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/ncruces/go-strftime v0.1.9 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/exp v0.0.0-20250620022241-b7579e27df2b // indirect
	golang.org/x/sys v0.34.0 // indirect
	modernc.org/libc v1.66.3 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.11.0 // indirect
	modernc.org/sqlite v1.38.2 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)

// This module runs the Store suite (storetest) on sqlitestore, so that
// neither the suite nor the libraries it uses reach sqlitestore's users.
// It is never released: it builds from the tree, with or without the
// workspace (GOWORK=off), through these replace directives.
replace (
	github.com/jobstate/jobstate => ../../..
	github.com/jobstate/jobstate/conformance => ../../../conformance
	github.com/jobstate/jobstate/sqlitestore => ../..
	github.com/jobstate/jobstate/storetest => ../../../storetest
)

module github.com/jobstate/jobstate/examples

go 1.23.0

require (
	github.com/google/uuid v1.6.0
	github.com/jackc/pgx/v5 v5.7.5
	github.com/jobstate/jobstate v0.1.0
	github.com/jobstate/jobstate/pgstore v0.1.0
	github.com/jobstate/jobstate/sqlitestore v0.1.0
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/google/btree v1.1.3 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.2 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/ncruces/go-strftime v0.1.9 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.37.0 // indirect
	golang.org/x/exp v0.0.0-20250620022241-b7579e27df2b // indirect
	golang.org/x/sync v0.15.0 // indirect
	golang.org/x/sys v0.34.0 // indirect
	golang.org/x/text v0.24.0 // indirect
	modernc.org/libc v1.66.3 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.11.0 // indirect
	modernc.org/sqlite v1.38.2 // indirect
)

// This module is never released, so nothing depends on it: it builds from
// the tree, with or without the workspace (GOWORK=off), through these
// replace directives.
replace (
	github.com/jobstate/jobstate => ../
	github.com/jobstate/jobstate/pgstore => ../pgstore
	github.com/jobstate/jobstate/sqlitestore => ../sqlitestore
)

module github.com/jobstate/jobstate/bench/sqlitecompare

go 1.26.0

// This module is never released, so nothing depends on it: it builds from
// the tree, with or without the workspace (GOWORK=off), through these
// replace directives.
replace (
	github.com/jobstate/jobstate => ../..
	github.com/jobstate/jobstate/pgstore => ../../pgstore
	github.com/jobstate/jobstate/sqlitestore => ../../sqlitestore
)

require (
	github.com/jackc/pgx/v5 v5.11.0
	github.com/jobstate/jobstate v0.1.0
	github.com/jobstate/jobstate/pgstore v0.1.0
	github.com/jobstate/jobstate/sqlitestore v0.1.0
	github.com/riverqueue/river v0.51.1
	github.com/riverqueue/river/riverdriver/riversqlite v0.51.1
	modernc.org/sqlite v1.38.2
)

require (
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/google/btree v1.1.3 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/ncruces/go-strftime v0.1.9 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	github.com/riverqueue/river/riverdriver v0.51.1 // indirect
	github.com/riverqueue/river/rivershared v0.51.1 // indirect
	github.com/riverqueue/river/rivertype v0.51.1 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.2.0 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	golang.org/x/exp v0.0.0-20250620022241-b7579e27df2b // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.34.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	modernc.org/libc v1.66.3 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.11.0 // indirect
)

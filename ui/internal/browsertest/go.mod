module github.com/jobstate/jobstate/ui/internal/browsertest

go 1.25

require (
	github.com/chromedp/chromedp v0.23.0
	github.com/jobstate/jobstate v0.1.0
	github.com/jobstate/jobstate/pgstore v0.1.0
	github.com/jobstate/jobstate/ui v0.1.0
)

require (
	github.com/chromedp/cdproto v0.159.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/google/btree v1.1.3 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/pgx/v5 v5.7.5 // indirect
	github.com/jackc/puddle/v2 v2.2.2 // indirect
	golang.org/x/crypto v0.37.0 // indirect
	golang.org/x/sync v0.13.0 // indirect
	golang.org/x/text v0.24.0 // indirect
)

// This module holds the ui module's browser tests, so that their
// dependency (chromedp) never reaches the ui module's users. It is never
// released: it builds from the tree, with or without the workspace
// (GOWORK=off), through these replace directives.
replace (
	github.com/jobstate/jobstate => ../../..
	github.com/jobstate/jobstate/pgstore => ../../../pgstore
	github.com/jobstate/jobstate/ui => ../..
)

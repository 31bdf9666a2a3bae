module github.com/jobstate/jobstate/conformance

go 1.23.0

require (
	github.com/google/uuid v1.6.0
	github.com/jobstate/jobstate v0.1.0
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
)

require (
	github.com/google/btree v1.1.3 // indirect
	golang.org/x/text v0.14.0 // indirect
)

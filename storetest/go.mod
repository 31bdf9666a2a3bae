module github.com/jobstate/jobstate/storetest

go 1.23.0

require (
	github.com/google/uuid v1.6.0
	github.com/jobstate/jobstate v0.1.0
	github.com/jobstate/jobstate/conformance v0.1.0
	github.com/stretchr/testify v1.12.1
	pgregory.net/rapid v1.3.0
)

require (
	github.com/google/btree v1.1.3 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)

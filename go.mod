module github.com/jobstate/jobstate

go 1.23

require (
	github.com/google/uuid v1.6.0
	github.com/stretchr/testify v1.12.1
)

require (
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)

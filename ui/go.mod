module github.com/jobstate/jobstate/ui

go 1.23.0

require (
	github.com/google/uuid v1.6.0
	github.com/jobstate/jobstate v0.1.0
)

require github.com/google/btree v1.1.3 // indirect

module github.com/jobstate/jobstate

go 1.23

require (
	github.com/google/btree v1.1.3
	github.com/google/uuid v1.6.0
)

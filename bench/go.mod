module github.com/jobstate/jobstate/bench

go 1.23

require (
	github.com/google/uuid v1.6.0
	github.com/jobstate/jobstate v0.1.0
	github.com/looplab/fsm v1.0.3
	github.com/qmuntal/stateless v1.7.2
)

// This module is never released, so nothing depends on it: it builds from
// the tree, with or without the workspace (GOWORK=off), through these
// replace directives.
replace github.com/jobstate/jobstate => ../

// Package hook names the functions a lifecycle's literal definition leaves
// to the program that runs it: its guards, its effects and its error
// classifier. A definition written as JSON names each function
// (jobstate.MarshalSpec refuses one without a name), so a hook is a
// function with its name.
package hook

import "github.com/jobstate/jobstate"

// Guard is a guard function and the name a definition gives it
// (jobstate.Rule.GuardName and its equivalents).
type Guard struct {
	Name string
	Func jobstate.Guard
}

// Effect is an effect function and the name a definition gives it
// (jobstate.Rule.EffectName and its equivalents).
type Effect struct {
	Name string
	Func jobstate.EffectFunc
}

// Classifier is an error classifier and the name a definition gives it
// (jobstate.Policy.ClassifyName).
type Classifier struct {
	Name string
	Func jobstate.Classifier
}

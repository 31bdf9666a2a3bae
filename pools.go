package jobstate

import "sync"

// statePools keep the records that carry an operation through a store's
// callback (createState, claimState, runState: 1,144, 520 and 256 bytes)
// for reuse, so that a create → claim → succeed allocates about 1.9 KB
// less, which the garbage collector would otherwise mark and sweep. A
// record goes back only once nothing the caller or the store keeps points
// into it: the store copies what it keeps of a Write (see Store's
// ownership clause), and a record an error still refers to is dropped.
type statePools struct {
	create, claim, run sync.Pool
}

func (p *statePools) getCreate() *createState {
	if st, ok := p.create.Get().(*createState); ok {
		return st
	}
	return new(createState)
}

func (p *statePools) putCreate(st *createState) {
	zero(st)
	p.create.Put(st)
}

func (p *statePools) getClaim() *claimState {
	if st, ok := p.claim.Get().(*claimState); ok {
		return st
	}
	return new(claimState)
}

func (p *statePools) putClaim(st *claimState) {
	zero(st)
	p.claim.Put(st)
}

func (p *statePools) getRun() *runState {
	if st, ok := p.run.Get().(*runState); ok {
		return st
	}
	return new(runState)
}

func (p *statePools) putRun(st *runState) {
	zero(st)
	p.run.Put(st)
}

// zero zeroes *v, so that a pooled record keeps nothing alive.
func zero[T any](v *T) {
	var zero T
	*v = zero
}

package memstore

import (
	"slices"

	"github.com/jobstate/jobstate"
)

// listed is where an entry is in the listing indexes: the keys it was
// indexed under, so that it can be found and moved when they change.
type listed struct {
	in               bool
	state            jobstate.State
	created, updated tkey
	owner, key       string
}

// stateLists are the jobs of one machine in one state, by creation time
// and by update time.
type stateLists struct {
	created, updated sortedSet
}

// listIndex holds the listing indexes: per machine and state, by created
// and by updated time; per owner, by created time; per idempotency key,
// the jobs created with it (few). Guarded by the store's mu.
type listIndex struct {
	owners map[string]*sortedSet
	keys   map[string][]*entry
}

func newListIndex() listIndex {
	return listIndex{owners: make(map[string]*sortedSet), keys: make(map[string][]*entry)}
}

// relist brings e's places in the listing indexes up to date with its job.
// A write that changes the state moves the entry between two machine and
// state lists (four set operations); any other write with a new update
// time moves it within one (two). Caller holds mu for writing.
func (s *Store) relist(e *entry) {
	if e.list == nil {
		e.list = &listed{}
	}
	j, l := &e.job, e.list
	created, updated := tk(j.CreatedAt), tk(j.UpdatedAt)
	if l.in && l.state == j.State && l.created == created && l.owner == j.Owner && l.key == j.IdempotencyKey {
		if l.updated != updated {
			sl := e.m.lists[l.state]
			sl.updated.remove(litem{s: l.updated.s, ns: l.updated.ns, e: e})
			l.updated = updated
			sl.updated.insert(litem{s: updated.s, ns: updated.ns, e: e})
		}
		return
	}
	s.unlist(e)
	*l = listed{in: true, state: j.State, created: created, updated: updated, owner: j.Owner, key: j.IdempotencyKey}
	sl := e.m.lists[l.state]
	if sl == nil {
		sl = &stateLists{}
		if e.m.lists == nil {
			e.m.lists = make(map[jobstate.State]*stateLists)
		}
		e.m.lists[l.state] = sl
	}
	sl.created.insert(litem{s: created.s, ns: created.ns, e: e})
	sl.updated.insert(litem{s: updated.s, ns: updated.ns, e: e})
	if l.owner != "" {
		set := s.lists.owners[l.owner]
		if set == nil {
			set = &sortedSet{}
			s.lists.owners[l.owner] = set
		}
		set.insert(litem{s: created.s, ns: created.ns, e: e})
	}
	if l.key != "" {
		s.lists.keys[l.key] = append(s.lists.keys[l.key], e)
	}
}

// unlist takes e out of the listing indexes, and drops the lists it
// leaves empty. Caller holds mu for writing.
func (s *Store) unlist(e *entry) {
	l := e.list
	if l == nil || !l.in {
		return
	}
	if sl := e.m.lists[l.state]; sl != nil {
		sl.created.remove(litem{s: l.created.s, ns: l.created.ns, e: e})
		sl.updated.remove(litem{s: l.updated.s, ns: l.updated.ns, e: e})
		// An empty state's lists stay: a machine has few states, and jobs
		// pass through them over and over.
	}
	if l.owner != "" {
		if set := s.lists.owners[l.owner]; set != nil {
			set.remove(litem{s: l.created.s, ns: l.created.ns, e: e})
			if set.n == 0 {
				delete(s.lists.owners, l.owner)
			}
		}
	}
	if l.key != "" {
		list := s.lists.keys[l.key]
		if i := slices.Index(list, e); i >= 0 {
			list = slices.Delete(list, i, i+1)
		}
		if len(list) == 0 {
			delete(s.lists.keys, l.key)
		} else {
			s.lists.keys[l.key] = list
		}
	}
	*l = listed{}
}

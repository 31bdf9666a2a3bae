package memstore

// smap is a map that gives its memory back after mass deletion. A Go map
// keeps the room of the most entries it ever held; once an smap has fallen
// to a quarter of its peak, its entries are moved, a batch at a time, to
// a new map sized for them, and the old one is dropped once empty. During
// the move both maps are read (new first) and written (the new one, and
// any copy in the old one deleted).
//
// An smap is guarded by its owner's lock.
type smap[K comparable, V any] struct {
	cur  map[K]V
	old  map[K]V // entries not yet moved to cur; nil when not rebuilding
	peak int     // the most entries cur has held
}

// minRebuild is the peak below which an smap is never rebuilt: a small
// map's room is not worth the copy.
const minRebuild = 4096

func newSmap[K comparable, V any]() smap[K, V] {
	return smap[K, V]{cur: make(map[K]V)}
}

func (m *smap[K, V]) get(k K) (V, bool) {
	v, ok := m.cur[k]
	if !ok && m.old != nil {
		v, ok = m.old[k]
	}
	return v, ok
}

func (m *smap[K, V]) put(k K, v V) {
	m.cur[k] = v
	if m.old != nil {
		delete(m.old, k)
	}
	if n := len(m.cur); n > m.peak {
		m.peak = n
	}
}

func (m *smap[K, V]) del(k K) {
	delete(m.cur, k)
	if m.old != nil {
		delete(m.old, k)
	}
}

func (m *smap[K, V]) len() int { return len(m.cur) + len(m.old) }

// each calls fn for every entry, in no particular order.
func (m *smap[K, V]) each(fn func(K, V)) {
	for k, v := range m.cur {
		fn(k, v)
	}
	for k, v := range m.old {
		fn(k, v)
	}
}

// wasteful reports whether the map has fallen to a quarter of its peak,
// so that a rebuild would give back most of its room.
func (m *smap[K, V]) wasteful() bool {
	return m.old == nil && m.peak >= minRebuild && len(m.cur) <= m.peak/4
}

// rebuild starts moving the entries to fresh, an empty map made for them.
// Each entry moved is paid for by at least three deleted since the map's
// peak.
func (m *smap[K, V]) rebuild(fresh map[K]V) {
	m.old, m.cur, m.peak = m.cur, fresh, len(m.cur)
}

// migrate moves up to n entries of a rebuild to the new map, and reports
// whether a rebuild is still under way.
func (m *smap[K, V]) migrate(n int) bool {
	if m.old == nil {
		return false
	}
	for k, v := range m.old {
		if n <= 0 {
			return true
		}
		m.cur[k] = v
		delete(m.old, k)
		n--
	}
	m.old = nil
	return false
}

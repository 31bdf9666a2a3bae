package pgstore

import "slices"

// statements are the store's SQL (queries/*.sql), compiled for its
// schema: each field is the statement newStatements names for it, its
// parameters numbered in the order given there, which is the order its
// callers send the values in.
type statements struct {
	channel                                      string
	get, exists, execs, history, effects, count  string
	staleAny, staleMachine, dueAny, dueMachines  string
	prune                                        string
	lock, snapEffects                            string
	lockMany                                     string
	updateMany, insertTransitions, insertEffects string
	updateManyHot                                string
	keyLocks, holders, takeKeys                  string
	insertJob, updateJob                         string
	insertTransition, insertEffect               string
	notify, claim, claimEffs, claimPlanned       string
	commitPlanned, uncommitPlanned               string
	list                                         string
	claimKeyed, keyWait, keyLive, heads          string
}

var (
	// jobParams are a job's values as jobArgs returns them: those of
	// jobWriteColumns, named as the columns.
	jobParams = columnNames(jobWriteColumns)
	// transitionParams are the values of transitionArgs.
	transitionParams = columnNames(transitionColumns)
	// effectParams are the values of effectArgs.
	effectParams = append([]string{"job_id"}, columnNames(effectColumns)...)
	// writeParams follow jobParams in a job's update: the version read,
	// and whether the payload and the result changed.
	writeParams = []string{"old_version", "payload_changed", "result_changed"}
)

func newStatements(schema string) (statements, error) {
	b, err := newQueryBook(schema)
	if err != nil {
		return statements{}, err
	}
	jobWrite := slices.Concat(jobParams, writeParams)
	s := statements{
		channel: channelName(schema),

		get:          b.stmt("get", "id"),
		exists:       b.stmt("exists", "id"),
		execs:        b.stmt("executions", "id"),
		history:      b.stmt("history", "job_id"),
		effects:      b.stmt("effects", "job_id"),
		count:        b.stmt("count", "machine"),
		staleAny:     b.stmt("stale", "cut_at", "cut_ns", "lim"),
		staleMachine: b.stmt("stale_machine", "cut_at", "cut_ns", "lim", "machine"),
		dueAny:       b.stmt("due", "now_at", "now_ns", "after_at", "after_ns", "after_id", "lim"),
		dueMachines:  b.stmt("due_machines", "now_at", "now_ns", "after_at", "after_ns", "after_id", "lim", "machines"),
		list:         b.stmt("list"),

		lock:              b.stmt("lock", "id"),
		snapEffects:       b.stmt("snapshot_effects", "job_id"),
		lockMany:          b.stmt("lock_many", "ids"),
		insertJob:         b.stmt("insert_job", jobParams...),
		updateJob:         b.stmt("update_job", jobWrite...),
		insertTransition:  b.stmt("insert_transition", transitionParams...),
		insertEffect:      b.stmt("insert_effect", effectParams...),
		updateMany:        b.stmt("update_many", slices.Concat(jobWrite, []string{"rows"})...),
		updateManyHot:     b.stmt("update_many_hot", slices.Concat(hotColumns, []string{"rows"})...),
		insertTransitions: b.stmt("insert_transitions", transitionParams...),
		insertEffects:     b.stmt("insert_effects", effectParams...),
		notify:            b.stmt("notify", "channel", "payload"),
		prune:             b.stmt("prune", "cut_at", "cut_ns", "lim"),
		commitPlanned: b.stmt("commit_planned", "ords", "ids", "exec_ids", "tokens", "actors", "results", "now_at", "now_ns", "sets",
			"m_sets", "m_machines", "m_froms", "m_tos", "m_outcomes", "m_require_starts"),
		uncommitPlanned: b.stmt("uncommit_planned", uncommitParams...),

		claim:      b.stmt("claim", "machine", "now_at", "now_ns", "excluded", "n", "lock_prefix"),
		claimKeyed: b.stmt("claim_keyed", "machine", "now_at", "now_ns", "excluded", "n", "key_limit", "passed", "lock_prefix"),
		claimEffs:  b.stmt("claim_effects", "setting"),
		claimPlanned: b.stmt("claim_planned", "machine", "now_at", "now_ns", "excluded", "n", "lock_prefix",
			"exec_ids", "from_states", "to_states", "outcomes", "expiring", "lease_at", "lease_ns", "worker"),

		keyLocks: b.stmt("key_locks", "names"),
		holders:  b.stmt("holders", "machines", "keys"),
		takeKeys: b.stmt("take_keys", "machines", "keys", "job_ids"),
		keyWait:  b.stmt("key_wait", "names"),
		keyLive:  b.stmt("key_live", "machine", "keys"),
		heads:    b.stmt("key_heads", "machines", "keys", "priorities"),
	}
	return s, b.done()
}

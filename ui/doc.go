// Package ui is an operator web interface for jobstate: an http.Handler a
// service mounts on its own mux, under any prefix, to look at its
// machines, list and inspect jobs, and, when the host allows it, cancel or
// redrive them.
//
// The handler serves three pages: an overview of every machine's job
// counts per state (refreshed in place by a small embedded script polling
// a JSON endpoint), the job list with the filters and keyset paging of
// jobstate.Engine.List, and a job's page with its fields, history,
// executions, effects and the machine's diagram, drawn as SVG on the server
// with the job's state and path highlighted.
//
// Everything is rendered with html/template: payloads, errors, keys and
// owners are shown as text, never interpreted as HTML. Every response
// carries a strict Content-Security-Policy (scripts and styles from the
// handler only, no inline script), X-Content-Type-Options: nosniff,
// Referrer-Policy: same-origin and frame-ancestors 'none'. Assets are
// embedded; nothing is fetched at run time.
//
// Actions are POST only and are offered only when Options.Authorize allows
// them; without it the handler is read-only. Each action form carries an
// HMAC token bound to the action and the job, made with the handler's own
// secret key, and a POST must come from the same origin (Origin and
// Sec-Fetch-Site headers). The operator the hook names is recorded as the
// actor of the move.
//
// The handler needs a store with the Lister capability (memstore,
// pgstore, sqlitestore) and, for the overview, the Counter capability.
// It never counts a whole table: the list pages by keyset and the overview
// reads Engine.Counts, which stores answer per machine and state.
package ui

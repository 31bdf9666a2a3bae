package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// hotUpdates reports, for the tables the work section updates, how many
// row updates the server made and how many of them were HOT (heap-only
// tuples: no index entry written), over every run so far.
func hotUpdates(ctx context.Context, rep *report, js, rv *pgxpool.Pool) error {
	// Backends report their table statistics when idle, at most a
	// second late.
	time.Sleep(1500 * time.Millisecond)
	rep.printf("Row updates in the work runs (pg_stat_user_tables, every run of this section):\n\n")
	rep.printf("| library | table | updates | HOT updates | HOT share |\n|---|---|---:|---:|---:|\n")
	for _, lib := range []struct {
		name   string
		pool   *pgxpool.Pool
		tables []string
	}{{"jobstate", js, []string{jsSchema + ".jobs"}}, {"river", rv, []string{"public.river_job"}}} {
		for _, tbl := range lib.tables {
			var upd, hot int64
			if err := lib.pool.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
 WHERE schemaname || '.' || relname = $1`, tbl).Scan(&upd, &hot); err != nil {
				return fmt.Errorf("update statistics of %s: %w", tbl, err)
			}
			share := 0.0
			if upd > 0 {
				share = 100 * float64(hot) / float64(upd)
			}
			rep.printf("| %s | %s | %d | %d | %.0f%% |\n", lib.name, tbl, upd, hot, share)
		}
	}
	rep.printf("\n")
	return nil
}

// statementTimes reports the statements of one library's database that
// took the most server time in the work section (pg_stat_statements,
// reset when the section began), with their time per job worked (jobs):
// the loading, resetting and analyzing between runs left out.
func statementTimes(ctx context.Context, rep *report, lib string, pool *pgxpool.Pool, jobs int64) error {
	if _, err := pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return err
	}
	rows, err := pool.Query(ctx, `SELECT calls, total_exec_time, left(regexp_replace(query, '\s+', ' ', 'g'), 100)
 FROM pg_stat_statements
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND query !~* '^\s*(copy|truncate|analyze|checkpoint|create|drop|alter|set |select count|select n_tup|select pg_stat)'
 ORDER BY total_exec_time DESC LIMIT 15`)
	if err != nil {
		return err
	}
	defer rows.Close()
	rep.printf("Server statement time of %s (pg_stat_statements; %d jobs worked; loading and resets left out):\n\n", lib, jobs)
	rep.printf("| calls | total ms | µs per job | statement |\n|---:|---:|---:|---|\n")
	var sum float64
	for rows.Next() {
		var calls int64
		var total float64
		var q string
		if err := rows.Scan(&calls, &total, &q); err != nil {
			return err
		}
		sum += total
		perJob := 0.0
		if jobs > 0 {
			perJob = 1000 * total / float64(jobs)
		}
		rep.printf("| %d | %.0f | %.1f | `%s` |\n", calls, total, perJob, q)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if jobs > 0 {
		rep.printf("| | %.0f | **%.1f** | these statements in all |\n", sum, 1000*sum/float64(jobs))
	}
	rep.printf("\n")
	return nil
}

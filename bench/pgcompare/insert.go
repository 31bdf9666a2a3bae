package main

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// insertSection runs the insert section: each way of inserting jobs, by
// both libraries in turn, c.runs times, with the rate and the CPU per job
// inserted on each side.
func insertSection(ctx context.Context, c config, rep *report, j *js, r *rv, meter cpuMeter, checkpoint func() error) error {
	rep.printf("## Inserts per second\n\n")
	rep.printf("| how | jobs | jobstate | river | jobstate/river |\n|---|---:|---:|---:|---:|\n")
	type way struct {
		name, js, rv string
		n            int
		jf           func() error
		rf           func() error
	}
	ways := []way{
		{"one at a time", "Engine.Create", "Client.Insert", c.single,
			func() error {
				for i := 0; i < c.single; i++ {
					if err := j.createOne(ctx); err != nil {
						return err
					}
				}
				return nil
			},
			func() error {
				for i := 0; i < c.single; i++ {
					if err := r.insertOne(ctx); err != nil {
						return err
					}
				}
				return nil
			}},
		{fmt.Sprintf("batches of %d", c.batchPer), "Engine.Create ×" + strconv.Itoa(c.batchPer) + " in one transaction (WithTx)", "InsertMany", c.batchN,
			func() error { return j.createTx(ctx, c.batchN, c.batchPer) },
			func() error { return r.insertMany(ctx, c.batchN, c.batchPer) }},
		{fmt.Sprintf("batches of %d in one transaction", c.batchPer), "Engine.CreateMany in the caller's transaction (WithTx)", "InsertMany", c.batchN,
			func() error { return j.createManyTx(ctx, c.batchN, c.batchPer) },
			func() error { return r.insertMany(ctx, c.batchN, c.batchPer) }},
		{fmt.Sprintf("COPY, batches of %d", c.batchPer), "Engine.CreateMany (pgstore.CreateBatch)", "InsertManyFast", c.batchN,
			func() error { return j.createBatch(ctx, c.batchN, c.batchPer) },
			func() error { return r.insertFast(ctx, c.batchN, c.batchPer) }},
		{fmt.Sprintf("batches of %d, each job under a key of its own", c.batchPer), "Engine.CreateMany with idempotency keys", "InsertMany with UniqueOpts{ByArgs: true}", c.batchN,
			func() error { return j.createKeyed(ctx, c.batchN, c.batchPer) },
			func() error { return r.insertKeyed(ctx, c.batchN, c.batchPer) }},
	}
	var cpuRows []string
	for _, wy := range ways {
		var jr, rr []float64
		var cpu [4][]float64
		for i := 0; i < c.runs; i++ {
			for _, lib := range order(i) {
				if err := j.reset(ctx); err != nil {
					return err
				}
				if err := r.reset(ctx); err != nil {
					return err
				}
				if err := checkpoint(); err != nil {
					return err
				}
				f, res, side := wy.jf, &jr, 0
				if lib == "river" {
					f, res, side = wy.rf, &rr, 2
				}
				before := meter.read()
				t0 := time.Now()
				if err := f(); err != nil {
					return fmt.Errorf("%s insert %s: %w", lib, wy.name, err)
				}
				d := time.Since(t0)
				client, server := perJob(before, meter.read(), wy.n)
				cpu[side], cpu[side+1] = append(cpu[side], client), append(cpu[side+1], server)
				*res = append(*res, float64(wy.n)/d.Seconds())
				rep.logf(c.verbose, "insert %s %s run=%d: %d in %v", lib, wy.name, i, wy.n, d.Round(time.Millisecond))
			}
		}
		rep.printf("| %s (%s; %s) | %d | %s | %s | %.2f |\n", wy.name, wy.js, wy.rv, wy.n, spread(jr, "%.0f"), spread(rr, "%.0f"), median(jr)/median(rr))
		cpuRows = append(cpuRows, cpuRow(wy.name, cpu))
	}
	cpuTable(rep, "CPU per job inserted", "| how |", "|---|", cpuRows)
	rep.printf("\n")
	return nil
}

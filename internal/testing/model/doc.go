// Package model is the randomized model test of compactord on Lance
// tables. LanceDB 0.39 (the oracle) builds a table with a btree and a
// bitmap index, a primary key and a bucket MemWAL spec, then Run drives
// random steps against it: LanceDB programs (MemWAL upserts flushed into
// generations, appends, deletes, plain merge-inserts, tags) and
// compactord jobs run in-process (merge, index catch-up, trim, cleanup,
// Go appends and fragment deletes), the latter with injected storage
// faults (faults.Faulty: failed reads, writes, lists and deletes, puts
// and deletes that land but report failure), lost responses followed by
// outages (model.OutageBucket), simulated crashes
// (model.CrashBucket: every operation after the Nth fails as if the
// process died) and LanceDB commits landing while compactord's commit is
// held. Ref, an in-memory model built only from acknowledged operations,
// is compared with the table after every step (see harness.check for the
// invariants); at the end every job runs to completion and LanceDB reads
// the table, its tagged versions and copies taken during the run back.
package model

// Package torture holds the torture test (make torture): several
// sessions, each on its own connection, call every queue function in a
// random interleaving drawn from a seed, each call in its own transaction
// at READ COMMITTED, REPEATABLE READ or SERIALIZABLE, while a killer
// terminates their backends mid-call and the server is restarted. Every
// call whose COMMIT returned OK is recorded; a call cut off during its
// COMMIT is recorded as uncertain. At the end (and every few seconds on
// the way) the database is checked against the record and against its own
// log of row changes: no acknowledged job lost, none completed twice, no
// stale fencing token settled, no dedupe key orphaned, no schedule slot
// fired twice, and every slot of a catch-up-all schedule fired between
// the first and the last call of its database-clock firers.
//
// It runs only when TORTURE is set (make torture sets it), never in make
// test: TORTURE_SECONDS (default 60) per isolation level, TORTURE_SEED
// (random when unset, printed; the same seed draws the same calls again)
// and TORTURE_ISOLATION (read-committed, repeatable-read, serializable or
// all, the default).
package torture

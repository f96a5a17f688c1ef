// Package store holds the end-to-end tests of the store and engine behind the built
// binary: a damaged store, degraded rooms and file id faults (health_test.go); a FIFO at
// the store's path (fifo_test.go); notebooks served from their saved file when the
// store has no room (ondisk_test.go); a store written by the real Jupyter server served
// as saved (serverstore_test.go); ship to PostgreSQL and serve from it (scaleout_test.go);
// ship's and serve's memory on large stores (shipmem_test.go, SHIP_BENCH=1,
// SERVE_MEMORY=1); notebook versions across replicas and a restart (versions_test.go).
// main_test.go builds the binary once.
//
// The binary and the pycrdt-store-like writer are internal/testenv/sidecartest's.
package store

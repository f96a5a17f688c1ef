// Package archtest checks that docs/ARCHITECTURE.md's rules hold, from the module's
// sources and `go list -deps -json` (tests excluded): which packages may import which,
// that the libraries' typed configs are built only in sidecar/config's mapping file,
// and that every workaround of mcp-go lives in a file the document names. It has no code
// but its tests; breaking a rule fails them.
//
// Files: doc.go (this), archtest_test.go (the rules and their checks).
package archtest

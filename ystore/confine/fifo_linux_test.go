package confine

import (
	"path/filepath"
	"syscall"
	"testing"
)

// Locate refuses a named pipe at once, without waiting for a writer.
func TestLocateFIFO(t *testing.T) {
	alice, _ := homes(t)
	p := filepath.Join(alice, "pipe")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := dirOf(t, alice).Locate(p); err == nil {
		t.Fatal("Locate of a named pipe succeeded")
	}
}

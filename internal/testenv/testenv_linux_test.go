package testenv

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestHomesAndGiveAway(t *testing.T) {
	homes := Homes(t, "alice", "bob")
	if len(homes) != 2 || filepath.Base(homes[0]) != "alice" || filepath.Base(homes[1]) != "bob" || filepath.Dir(homes[0]) != filepath.Dir(homes[1]) {
		t.Fatalf("Homes = %v, want alice and bob side by side", homes)
	}
	for _, h := range homes {
		if fi, err := os.Stat(h); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v, %v; want a directory of mode 0700", h, fi, err)
		}
	}
	r := &recorder{TB: t}
	GiveAway(r, homes[0])
	if os.Getuid() != 0 {
		if r.skip == "" {
			t.Fatal("GiveAway as a user other than root did not skip")
		}
		return
	}
	var st syscall.Stat_t
	if err := syscall.Stat(homes[0], &st); err != nil || st.Uid != Stranger || st.Gid != Stranger || r.fatal != "" {
		t.Fatalf("after GiveAway: uid %d gid %d, %v %q; want %d", st.Uid, st.Gid, err, r.fatal, Stranger)
	}
}

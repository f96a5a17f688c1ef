// Command imagecheck writes the store that scripts/image-check.sh serves read-only from
// the built image: sidecar/demo's recorded session, written once and unpaced, into the
// directory given (its SQLite Y-store, its jupyter_server_fileid database naming
// demo.ipynb under that directory).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/jupyter-mcp-sidecar/jupyter-mcp-sidecar/sidecar/demo"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: imagecheck DIR")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "imagecheck:", err)
		os.Exit(1)
	}
}

// write creates the store in dir and writes the session into it.
func write(dir string) error {
	ctx := context.Background()
	w := demo.New(demo.Options{Dir: dir})
	if err := w.Create(ctx); err != nil {
		return err
	}
	if err := w.WriteOnce(ctx); err != nil {
		_ = w.Close()
		return err
	}
	return w.Close()
}

package testenv

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// ChildGrace is how long a child has to exit once asked (Stop, Interrupt) before it is
// killed.
const ChildGrace = 10 * time.Second

// Exit says whether a child must exit cleanly: CleanExit fails the test when the child,
// stopped at the test's end, exits otherwise; AnyExit accepts any end.
type Exit bool

// The two Exit rules.
const (
	CleanExit Exit = true
	AnyExit   Exit = false
)

// Child is a helper process a test drives through pipes (a writer, a client, a
// manager): the test writes to In and reads Out; the child's stderr is kept in Stderr,
// logged when the test fails. It is the harness's one launcher of such processes.
type Child struct {
	Cmd    *exec.Cmd
	In     io.WriteCloser
	Out    io.Reader
	Stderr *LockedBuffer

	once sync.Once
	err  error
}

// StartChild starts cmd with its stdin and stdout piped to the test and its stderr kept;
// it is stopped (Stop) when the test ends, and exit says whether it must exit cleanly
// then; when the test has failed, it is killed instead and its stderr logged.
func StartChild(t testing.TB, cmd *exec.Cmd, exit Exit) *Child {
	t.Helper()
	c := &Child{Cmd: cmd, Stderr: &LockedBuffer{}}
	var err error
	if c.In, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if c.Out, err = cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = c.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	t.Cleanup(func() {
		if t.Failed() { // nothing more to wait for
			_ = c.end(func() { _ = cmd.Process.Kill() })
			t.Logf("%s's stderr:\n%s", cmd.Path, c.Stderr)
		} else if err := c.Stop(); err != nil && exit == CleanExit {
			t.Error(err)
		}
	})
	return c
}

// Stop closes the child's stdin, the end of its commands, and waits for it to exit
// (killing it after ChildGrace); it returns how it ended, the same on every call: nil
// for a clean exit, else an error with its stderr.
func (c *Child) Stop() error { return c.end(func() { _ = c.In.Close() }) }

// Interrupt sends the child os.Interrupt and waits for it to exit as Stop does: for a
// child that reads no commands.
func (c *Child) Interrupt() error {
	return c.end(func() { _ = c.Cmd.Process.Signal(os.Interrupt) })
}

// end asks the child to end once, by ask, and waits for it.
func (c *Child) end(ask func()) error {
	c.once.Do(func() {
		ask()
		done := make(chan error, 1)
		go func() { done <- c.Cmd.Wait() }()
		timer := time.NewTimer(ChildGrace)
		defer timer.Stop()
		select {
		case err := <-done:
			c.err = err
		case <-timer.C:
			_ = c.Cmd.Process.Kill()
			<-done
			c.err = fmt.Errorf("did not exit within %v of being asked", ChildGrace)
		}
		if c.err != nil {
			c.err = fmt.Errorf("%s exited: %w\n%s", c.Cmd.Path, c.err, c.Stderr)
		}
	})
	return c.err
}

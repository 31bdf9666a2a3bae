package pgtest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
)

// Halt stops a cluster started by Start, keeping its data directory, so
// that Resume can start it again on the same port: mode "fast" ends the
// sessions (each is told the server is shutting down) and shuts down
// cleanly, "immediate" kills the server as a crash would. While it is
// halted, connections to it are refused.
func (c *Cluster) Halt(ctx context.Context, mode string) error {
	if c.external {
		return errors.New("pgtest: cannot halt an external server")
	}
	if out, err := c.run(ctx, "pg_ctl", "-D", c.Dir, "-w", "-t", "120", "-m", mode, "stop"); err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop: %w: %s", err, out)
	}
	return nil
}

// Resume starts a cluster stopped by Halt, and returns once it accepts
// connections.
func (c *Cluster) Resume(ctx context.Context) error {
	if c.external {
		return errors.New("pgtest: cannot resume an external server")
	}
	if out, err := c.run(ctx, "pg_ctl", "-D", c.Dir, "-l", filepath.Join(c.sockDir, "server.log"), "-w", "-t", "120", "start"); err != nil {
		return fmt.Errorf("pgtest: pg_ctl start: %w: %s", err, out)
	}
	return nil
}

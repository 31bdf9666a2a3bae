package exstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSQLiteFiles: with -db, each store is a file of its own (PATH, then
// PATH-2 …), kept after Close; a file that exists is refused.
func TestSQLiteFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "jobs.db")
	b, err := Open(ctx, Config{Store: SQLite, DB: path})
	require.NoError(t, err)
	_, err = b.NewStore(ctx)
	require.NoError(t, err)
	_, err = b.NewStore(ctx)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	assert.FileExists(t, path)
	assert.FileExists(t, filepath.Join(dir, "jobs-2.db"))

	b, err = Open(ctx, Config{Store: SQLite, DB: path})
	require.NoError(t, err)
	_, err = b.NewStore(ctx)
	assert.ErrorContains(t, err, "exists")
	require.NoError(t, b.Close())
}

// TestSQLiteTemporary: without -db, the files live in a temporary
// directory that Close removes.
func TestSQLiteTemporary(t *testing.T) {
	ctx := context.Background()
	b, err := Open(ctx, Config{Store: SQLite})
	require.NoError(t, err)
	_, err = b.NewStore(ctx)
	require.NoError(t, err)
	dir := b.tmpDir
	require.DirExists(t, dir)
	require.NoError(t, b.Close())
	_, err = os.Stat(dir)
	assert.True(t, os.IsNotExist(err), "the temporary directory is removed")
}

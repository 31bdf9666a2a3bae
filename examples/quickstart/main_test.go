package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jobstate/jobstate/internal/machines"
)

func TestQuickstart(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	s := out.String()
	assert.Contains(t, s, "invoice.pdf: SUCCEEDED (attempts 1, retries 0)")
	assert.Contains(t, s, "scan.tiff: SUCCEEDED (attempts 2, retries 1")
	assert.Contains(t, s, `broken.doc: FAILED (attempts 1, retries 0, last error "invalid document format", permanent)`)
	assert.Contains(t, s, "RUNNING   --retry   --> RETRYING")
	assert.True(t, strings.Contains(s, "stateDiagram-v2"), "the diagram is printed")
	assert.Contains(t, s, "CREATED --> FAILED : cancel", "the out-of-band cancellation of document processing")
}

// TestMachineIsTheLiteralDefinition fails when the quickstart's machine
// differs from document processing's literal definition.
func TestMachineIsTheLiteralDefinition(t *testing.T) {
	def, err := newMachine()
	require.NoError(t, err)
	assert.Equal(t, "docproc", def.Name())
	assert.NoError(t, machines.CheckDefinition(def))
}

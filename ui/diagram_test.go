package ui

import (
	"testing"

	"github.com/jobstate/jobstate"
	"github.com/jobstate/jobstate/ui/internal/uitest"
)

func TestLayoutLayersStatesByDistanceFromInitial(t *testing.T) {
	def, err := uitest.Machine()
	if err != nil {
		t.Fatal(err)
	}
	hist := []jobstate.Transition{{From: "QUEUED", Event: "claim", To: "RUNNING"}, {From: "RUNNING", Event: "retry", To: "RETRYING"}}
	d := layout(def, "RETRYING", hist)
	if len(d.Nodes) != 6 {
		t.Fatalf("%d nodes", len(d.Nodes))
	}
	y := map[string]int{}
	for _, n := range d.Nodes {
		y[n.Name] = n.Y
		if n.X+n.W > d.Width || n.Y+n.H > d.Height {
			t.Errorf("%s lies outside the %dx%d drawing", n.Name, d.Width, d.Height)
		}
		if n.Current != (n.Name == "RETRYING") {
			t.Errorf("%s current=%v", n.Name, n.Current)
		}
		walked := n.Name == "QUEUED" || n.Name == "RUNNING" || n.Name == "RETRYING"
		if n.Walked != walked {
			t.Errorf("%s walked=%v", n.Name, n.Walked)
		}
	}
	// QUEUED on top; RUNNING and CANCELLED one below; the rest two below.
	if !(y["QUEUED"] < y["RUNNING"] && y["RUNNING"] == y["CANCELLED"] && y["RUNNING"] < y["SUCCEEDED"] &&
		y["SUCCEEDED"] == y["FAILED"] && y["FAILED"] == y["RETRYING"]) {
		t.Fatalf("layers %v", y)
	}
	// One arrow per (from, to) pair: the cancel rule's three sources give three.
	taken, cancels := 0, 0
	for _, e := range d.Edges {
		if e.Taken {
			taken++
		}
		if e.Label == "cancel" {
			cancels++
		}
	}
	if len(d.Edges) != 8 || taken != 2 || cancels != 3 {
		t.Fatalf("%d edges, %d taken, %d cancel", len(d.Edges), taken, cancels)
	}
	// The taken arrows are drawn last, over the others.
	if !d.Edges[len(d.Edges)-1].Taken || !d.Edges[len(d.Edges)-2].Taken {
		t.Fatal("taken arrows are not drawn last")
	}
}

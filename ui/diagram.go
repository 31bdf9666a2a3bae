package ui

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/jobstate/jobstate"
)

// diagram is a machine drawn as SVG: boxes for the states in layers (the
// initial state on top, each state one layer below the nearest state that
// leads to it), arrows for the rules. Coordinates are in SVG user units.
type diagram struct {
	Width, Height int
	Nodes         []node
	Edges         []edge
}

// node is one state's box.
type node struct {
	Name            string
	Kind            string
	X, Y, W, H      int
	TextX, TextY    int
	Current, Walked bool
}

// edge is one arrow: the rules from one state to another, their events
// joined in one label.
type edge struct {
	Path           string
	Label          string
	LabelX, LabelY int
	Taken          bool
}

// Layout figures, in SVG user units.
const (
	nodeH    = 34
	layerGap = 90
	nodeGap  = 64
	margin   = 20
	charW    = 8
	minNodeW = 90
)

// layout draws def with current highlighted and the moves of history
// marked as the path taken.
func layout(def *jobstate.Definition, current jobstate.State, history []jobstate.Transition) diagram {
	states := def.States()
	index := make(map[jobstate.State]int, len(states))
	for i, s := range states {
		index[s.Name] = i
	}
	type pair struct{ from, to int }
	labels := make(map[pair][]string)
	var pairs []pair
	adj := make([][]int, len(states))
	for _, r := range def.Rules() {
		to, ok := index[r.To]
		if !ok {
			continue
		}
		for _, f := range r.From {
			from, ok := index[f]
			if !ok {
				continue
			}
			p := pair{from, to}
			if _, seen := labels[p]; !seen {
				pairs = append(pairs, p)
				adj[from] = append(adj[from], to)
			}
			if !contains(labels[p], string(r.Event)) {
				labels[p] = append(labels[p], string(r.Event))
			}
		}
	}

	// Layers: breadth-first distance from the initial state; states it
	// never reaches go below the deepest layer.
	layer := make([]int, len(states))
	for i := range layer {
		layer[i] = -1
	}
	deepest := 0
	if start, ok := index[def.Initial()]; ok {
		layer[start] = 0
		queue := []int{start}
		for len(queue) > 0 {
			s := queue[0]
			queue = queue[1:]
			for _, t := range adj[s] {
				if layer[t] < 0 {
					layer[t] = layer[s] + 1
					deepest = max(deepest, layer[t])
					queue = append(queue, t)
				}
			}
		}
	}
	for i := range layer {
		if layer[i] < 0 {
			layer[i] = deepest + 1
		}
	}

	walked := make(map[jobstate.State]bool)
	taken := make(map[pair]bool)
	for _, t := range history {
		walked[t.From], walked[t.To] = true, true
		f, ok1 := index[t.From]
		to, ok2 := index[t.To]
		if ok1 && ok2 {
			taken[pair{f, to}] = true
		}
	}

	// Place the boxes: each layer a row, states in declaration order.
	rows := make(map[int][]int)
	nLayers := 0
	for i := range states {
		rows[layer[i]] = append(rows[layer[i]], i)
		nLayers = max(nLayers, layer[i]+1)
	}
	var d diagram
	d.Nodes = make([]node, len(states))
	for l := 0; l < nLayers; l++ {
		x := margin
		for _, i := range rows[l] {
			name := string(states[i].Name)
			w := max(minNodeW, charW*utf8.RuneCountInString(name)+24)
			y := margin + l*(nodeH+layerGap)
			d.Nodes[i] = node{
				Name: name, Kind: states[i].Kind.String(),
				X: x, Y: y, W: w, H: nodeH, TextX: x + w/2, TextY: y + nodeH/2 + 5,
				Current: states[i].Name == current, Walked: walked[states[i].Name],
			}
			x += w + nodeGap
			d.Width = max(d.Width, x-nodeGap+margin)
		}
	}
	d.Height = margin*2 + nLayers*nodeH + max(0, nLayers-1)*layerGap

	sort.SliceStable(pairs, func(a, b int) bool { return taken[pairs[a]] == false && taken[pairs[b]] })
	for _, p := range pairs {
		a, b := d.Nodes[p.from], d.Nodes[p.to]
		e := edge{Label: strings.Join(labels[p], ", "), Taken: taken[p]}
		switch {
		case p.from == p.to:
			// A loop on the box's right side.
			x, y := a.X+a.W, a.Y+a.H/2
			e.Path = fmt.Sprintf("M %d %d C %d %d %d %d %d %d", x, y-8, x+36, y-30, x+36, y+30, x, y+8)
			e.LabelX, e.LabelY = x+40, y+4
		case layer[p.to] > layer[p.from]:
			x1, y1 := a.X+a.W/2, a.Y+a.H
			x2, y2 := b.X+b.W/2, b.Y
			e.Path = fmt.Sprintf("M %d %d L %d %d", x1, y1, x2, y2)
			e.LabelX, e.LabelY = (x1+x2)/2+4, (y1+y2)/2
		case layer[p.to] == layer[p.from] && b.X > a.X:
			// Sideways to the right: a straight arrow between the boxes.
			x1, y := a.X+a.W, a.Y+a.H/2
			x2 := b.X
			e.Path = fmt.Sprintf("M %d %d L %d %d", x1, y, x2, y)
			e.LabelX, e.LabelY = x1+4, y-6
		default:
			// Up or sideways to the left: a curve bowing to the right of both boxes.
			x1, y1 := a.X+a.W, a.Y+a.H/2-6
			x2, y2 := b.X+b.W, b.Y+b.H/2+6
			bow := max(x1, x2) + 60
			e.Path = fmt.Sprintf("M %d %d C %d %d %d %d %d %d", x1, y1, bow, y1, bow, y2, x2, y2)
			e.LabelX, e.LabelY = bow-10, (y1+y2)/2
			d.Width = max(d.Width, bow+margin)
		}
		d.Width = max(d.Width, e.LabelX+charW*utf8.RuneCountInString(e.Label)+margin)
		d.Edges = append(d.Edges, e)
	}
	return d
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

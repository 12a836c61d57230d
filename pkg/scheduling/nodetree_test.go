package scheduling

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestNodeTree: the tree visits exactly the nodes fits accepts, in order, as use changes and
// nodes are removed and put back.
func TestNodeTree(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const dims = 3
	var nodes []*target
	for i := 0; i < 37; i++ {
		nodes = append(nodes, &target{id: i, node: &Node{MarkedForDeletion: i == 5},
			alloc: vec{int64(r.IntN(8000)), int64(r.IntN(8000)), 10}, used: make(vec, dims)})
	}
	nt := newNodeTree(nodes, dims)
	for step := 0; step < 2000; step++ {
		n := nodes[r.IntN(len(nodes))]
		switch r.IntN(3) {
		case 0:
			n.used.add(vec{int64(r.IntN(2000)), int64(r.IntN(2000)), 1})
		case 1:
			n.used = make(vec, dims)
		case 2:
			n.removed = !n.removed
		}
		nt.update(n.id, n)
		req := vec{int64(r.IntN(3000)), int64(r.IntN(3000)), 1}
		var want, got []int
		for i, n := range nodes {
			if !n.removed && !n.node.MarkedForDeletion && fits(n.used, req, n.alloc) {
				want = append(want, i)
			}
		}
		nt.each(req, func(i int) bool { got = append(got, i); return false })
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: visited %v, want %v", step, got, want)
		}
	}
}

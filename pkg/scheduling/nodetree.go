package scheduling

import "math"

// nodeTree finds, in order, the existing nodes with room for a request without visiting the
// full ones: a segment tree holding, for every range of nodes, the most free room any of them
// has in each dimension. A node marked for deletion or removed has none.
type nodeTree struct {
	dims int
	size int     // leaves, a power of two
	max  []int64 // node k of the tree (1 is the root), dimension d at k*dims+d
}

func newNodeTree(nodes []*target, dims int) *nodeTree {
	size := 1
	for size < len(nodes) {
		size *= 2
	}
	nt := &nodeTree{dims: dims, size: size, max: make([]int64, 2*size*dims)}
	for i := range nt.max {
		nt.max[i] = math.MinInt64
	}
	for i, t := range nodes {
		nt.setLeaf(i, t)
	}
	for k := size - 1; k >= 1; k-- {
		nt.pull(k)
	}
	return nt
}

func (nt *nodeTree) setLeaf(i int, t *target) {
	leaf := (nt.size + i) * nt.dims
	for d := 0; d < nt.dims; d++ {
		if t.removed || t.node.MarkedForDeletion {
			nt.max[leaf+d] = math.MinInt64
		} else {
			nt.max[leaf+d] = t.alloc[d] - t.used[d]
		}
	}
}

func (nt *nodeTree) pull(k int) {
	a, l, r := k*nt.dims, 2*k*nt.dims, (2*k+1)*nt.dims
	for d := 0; d < nt.dims; d++ {
		nt.max[a+d] = max(nt.max[l+d], nt.max[r+d])
	}
}

// update refreshes node i (a target's id) after its use or removal changed.
func (nt *nodeTree) update(i int, t *target) {
	nt.setLeaf(i, t)
	for k := (nt.size + i) / 2; k >= 1; k /= 2 {
		nt.pull(k)
	}
}

// each calls f on every node with room for req, in order, until f returns true; it reports
// whether f did.
func (nt *nodeTree) each(req vec, f func(i int) bool) bool {
	return nt.visit(1, req, f)
}

func (nt *nodeTree) visit(k int, req vec, f func(i int) bool) bool {
	base := k * nt.dims
	for d := 0; d < nt.dims; d++ {
		if nt.max[base+d] < req[d] {
			return false
		}
	}
	if k >= nt.size {
		return f(k - nt.size)
	}
	return nt.visit(2*k, req, f) || nt.visit(2*k+1, req, f)
}

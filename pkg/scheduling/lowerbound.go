package scheduling

import (
	"fmt"
	"math"
)

// LowerBound is the fractional lower bound on the cost (USD/h) of any plan for the input's
// pending pods: the LP relaxation
//
//	minimise Σ price_t·x_t  subject to  Σ alloc_t[r]·x_t ≥ Σ requests[r] for each resource r, x ≥ 0
//
// over every type some pool allows (price: its cheapest offering the pool allows; alloc:
// allocatable less the pool's DaemonSet overhead), for cpu, memory and every extended resource
// the pods request. No plan can cost less, so plan cost ÷ LowerBound measures waste.
func LowerBound(in Input) (float64, error) {
	s, err := newSolver(&in)
	if err != nil {
		return 0, fmt.Errorf("preparing lower bound: %w", err)
	}
	dims := []int{slotCPU, slotMemory}
	demand := make(vec, len(s.ix.names))
	for _, ps := range s.pods {
		demand.add(ps.req)
	}
	for d := slotPods + 1; d < len(demand); d++ {
		if demand[d] > 0 {
			dims = append(dims, d)
		}
	}
	scale := func(d int) float64 {
		if d == slotMemory {
			return float64(GiB)
		}
		if d == slotCPU {
			return 1000
		}
		return 1
	}
	var cols [][]float64
	var cost []float64
	for _, p := range s.pools {
		p.typeBits.each(func(i int) {
			t := &s.types[i]
			price := math.Inf(1)
			for b, pr := range t.prices {
				if p.mask&(1<<uint(b)) != 0 {
					price = min(price, pr)
				}
			}
			if math.IsInf(price, 1) {
				return
			}
			col := make([]float64, len(dims))
			for k, d := range dims {
				col[k] = max(0, float64(p.alloc[i][d]-p.daemonOn(i).req[d])/scale(d))
			}
			cols = append(cols, col)
			cost = append(cost, price)
		})
	}
	b := make([]float64, len(dims))
	for k, d := range dims {
		b[k] = float64(demand[d]) / scale(d)
	}
	v, _, ok := minCover(cols, cost, b)
	if !ok {
		return 0, fmt.Errorf("computing lower bound: no combination of types covers the requests")
	}
	return v, nil
}

// minCover solves min c·x s.t. Σ x_j·cols_j ≥ b, x ≥ 0 with a two-phase tableau simplex
// (Bland's rule), returning the optimum and x. It reports false when infeasible.
func minCover(cols [][]float64, c, b []float64) (float64, []float64, bool) {
	m, n := len(b), len(cols)
	// Columns: n structural, m surplus, m artificial, then the right-hand side.
	w := n + 2*m + 1
	tab := make([][]float64, m+1)
	for i := range tab {
		tab[i] = make([]float64, w)
	}
	basis := make([]int, m)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			tab[i][j] = cols[j][i]
		}
		tab[i][n+i] = -1
		tab[i][n+m+i] = 1
		tab[i][w-1] = b[i]
		basis[i] = n + m + i
	}
	pivot := func(r, col int) {
		pv := tab[r][col]
		for j := range tab[r] {
			tab[r][j] /= pv
		}
		for i := range tab {
			if i != r && tab[i][col] != 0 {
				f := tab[i][col]
				for j := range tab[i] {
					tab[i][j] -= f * tab[r][j]
				}
			}
		}
		basis[r] = col
	}
	run := func(obj []float64, allowed int) bool {
		// Reduced costs in the last row.
		last := tab[m]
		for j := range last {
			last[j] = 0
		}
		for j := 0; j < allowed; j++ {
			last[j] = obj[j]
		}
		for i, bv := range basis {
			if f := obj[bv]; f != 0 {
				for j := range last {
					last[j] -= f * tab[i][j]
				}
			}
		}
		for iter := 0; iter < 10000; iter++ {
			col := -1
			for j := 0; j < allowed; j++ {
				if last[j] < -1e-9 {
					col = j
					break
				}
			}
			if col < 0 {
				return true
			}
			r, best := -1, math.Inf(1)
			for i := 0; i < m; i++ {
				if tab[i][col] > 1e-12 {
					if ratio := tab[i][w-1] / tab[i][col]; ratio < best-1e-12 {
						r, best = i, ratio
					}
				}
			}
			if r < 0 {
				return false // unbounded
			}
			pivot(r, col)
		}
		return true
	}
	phase1 := make([]float64, w)
	for i := 0; i < m; i++ {
		phase1[n+m+i] = 1
	}
	run(phase1, n+2*m)
	infeasibility := 0.0
	for i, bv := range basis {
		if bv >= n+m {
			infeasibility += tab[i][w-1]
		}
	}
	if infeasibility > 1e-7 {
		return 0, nil, false
	}
	phase2 := make([]float64, w)
	copy(phase2, c)
	if !run(phase2, n+m) {
		return 0, nil, false
	}
	total := 0.0
	x := make([]float64, n)
	for i, bv := range basis {
		if bv < n {
			x[bv] = tab[i][w-1]
			total += c[bv] * tab[i][w-1]
		}
	}
	return total, x, true
}

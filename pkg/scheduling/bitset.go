package scheduling

import "math/bits"

// bitset is a set of instance-type indices.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) set(i int)      { b[i>>6] |= 1 << (uint(i) & 63) }
func (b bitset) has(i int) bool { return b[i>>6]&(1<<(uint(i)&63)) != 0 }

// and stores a∧c into b (all the same length) and reports whether any bit is left.
func (b bitset) and(a, c bitset) bool {
	var any uint64
	for i := range b {
		b[i] = a[i] & c[i]
		any |= b[i]
	}
	return any != 0
}

func (b bitset) empty() bool {
	for _, w := range b {
		if w != 0 {
			return false
		}
	}
	return true
}

func (b bitset) clone() bitset { return append(bitset(nil), b...) }

// each calls f for every member in increasing order.
func (b bitset) each(f func(i int)) {
	for wi, w := range b {
		for w != 0 {
			t := bits.TrailingZeros64(w)
			f(wi*64 + t)
			w &= w - 1
		}
	}
}

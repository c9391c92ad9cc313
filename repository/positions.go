package repository

// positions returns 0, 1, …, n-1: the indexes of n items, to put in an
// order of their own without moving the items.
func positions(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	return p
}

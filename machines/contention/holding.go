package contention

// Holding returns, of children (names in a contention directory), the
// contender nodes that hold under p, in queue order: the nodes whose
// blockers (p's verdict on the nodes strictly below them) are none. It is
// what a "who holds it" query shows; waiters are left out. Nodes of other
// libraries named the same way (Curator's) count.
func Holding(children, markers []string, p Predicate) []string {
	var holding, below []string
	var prev int32
	queue := Contenders(children, markers)
	for i, name := range queue {
		seq, _ := parseSeq(name, markers)
		if i > 0 && seq != prev {
			below = queue[:i]
		}
		prev = seq
		if len(p.blockers(below, name)) == 0 {
			holding = append(holding, name)
		}
	}
	return holding
}

package main

// maxLogged bounds the decider's memory of what it has logged: intent ids are many over a
// long life (every resumed intent has one of its own), so the memory is cleared when it grows
// past this, at worst logging a decision or a blocked node once more.
const maxLogged = 10000

// once reports whether key is new to the decider's log memory, and remembers it.
func (d *decider) once(key string) bool {
	if d.blockedLogged[key] {
		return false
	}
	if d.blockedLogged == nil || len(d.blockedLogged) >= maxLogged {
		d.blockedLogged = map[string]bool{}
	}
	d.blockedLogged[key] = true
	return true
}

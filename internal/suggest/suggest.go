// Package suggest finds the name a user probably meant, for "did you
// mean …?" in error messages.
package suggest

// Closest returns the word of words within two edits of w (the nearest,
// the first of equals), or "" when none is.
func Closest(w string, words []string) string {
	best, bestD := "", 3
	for _, c := range words {
		if d := distance(w, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

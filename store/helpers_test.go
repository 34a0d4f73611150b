package store

import (
	"encoding/json"
	"reflect"
)

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// jsonEqual reports whether two JSON documents are equal as values.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// eventIDs returns the IDs of evs.
func eventIDs(evs []Event) []string {
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	return ids
}

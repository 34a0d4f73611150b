// Package py is the runtime of reaction files translated from Jinja by
// package jinja: the template functions with Python 3 / Jinja 2 semantics,
// as Salt 3007 renders Jinja reaction files, that the translated Go
// templates call where Go's template functions differ from Jinja's meaning
// (pyEq, pyStr, getOr, pyIndex, pyFormat, ...). Funcs returns them by
// those names; package reactions adds them to every template's functions.
//
// Package reactions also uses the Python semantics they rest on, to read
// and compile what a template printed as Salt does: Str and Text (str(),
// and what Jinja prints of any value), Num and ToNum (exact numbers, as
// Salt orders chunks), AsDict, AsList and AsString (a value as a dict,
// list or str), JSONEncode and ToJSON (Salt's |json and |tojson), and the
// values the helpers return (Printed, YAMLQuoted, Bytes).
//
// Values are the ones templates see: event data (map[string]any with keys
// iterated in sorted order, []any, string, bool, nil, int64, float64, and
// json.Number for integers beyond int64 or floats beyond float64), reactord's
// ordered *event.Map, a Python tuple (from regexSearch), and what sprig
// functions build ([]string, []int, map[string]any, int, ...).
//
// Differences from Python, on purpose or by cost:
//   - integers beyond int64 are exact (json.Number holds their digits);
//   - pyLower/pyUpper use Go's simple case mapping ('ß' stays 'ß');
//   - regexSearch uses Go's RE2: no backreferences or lookaround (an error),
//     \d, \w, \s and \b are ASCII only; Python's \Z is translated;
//   - pyUnique of a string keeps first-occurrence order (Salt returns an
//     unordered set);
//   - loadJson rejects NaN and Infinity, which Python's json.loads accepts.
//
// It imports neither package jinja nor package reactions.
package py

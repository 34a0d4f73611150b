package ruletest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/internal/position"
	"github.com/reactord/reactord/internal/yaml11"
)

// plainValue is a node's value as JSON would hold it: maps with string
// keys, lists, strings, bools, nil and json.Number. Errors are at the
// node.
func plainValue(path string, n *yaml11.Node) (any, error) {
	v, err := n.Value()
	if err != nil {
		var ye *yaml11.Error
		if errors.As(err, &ye) {
			return nil, position.At(path, ye.Line, ye.Column, ye.Msg, err)
		}
		return nil, &position.Error{Pos: nodePos(path, n), Msg: err.Error(), Err: err}
	}
	p, err := plain(v)
	if err != nil {
		return nil, &position.Error{Pos: nodePos(path, n), Msg: err.Error(), Err: err}
	}
	return p, nil
}

// liveValue is a node's value with the types an event's data has once
// decoded (int64, float64, ...), as the engine sees it live.
func liveValue(path string, n *yaml11.Node) (any, error) {
	v, err := plainValue(path, n)
	if err != nil {
		return nil, err
	}
	return live(v)
}

// live converts a plain value into the types event data decodes to.
func live(v any) (any, error) {
	raw, err := json.Marshal(map[string]any{"v": v})
	if err != nil {
		return nil, fmt.Errorf("encoding a value: %w", err)
	}
	m, err := event.DecodeData(raw)
	if err != nil {
		return nil, fmt.Errorf("decoding a value: %w", err)
	}
	return m["v"], nil
}

// plain converts a yaml11 value (see plainValue).
func plain(v any) (any, error) {
	switch x := v.(type) {
	case nil, bool, string:
		return x, nil
	case int64:
		return json.Number(strconv.FormatInt(x, 10)), nil
	case *big.Int:
		return json.Number(x.String()), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%v has no JSON form: event data and chunks cannot hold it", x)
		}
		return json.Number(strconv.FormatFloat(x, 'g', -1, 64)), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			p, err := plain(e)
			if err != nil {
				return nil, err
			}
			out[i] = p
		}
		return out, nil
	case *yaml11.Map:
		out := make(map[string]any, x.Len())
		for i, k := range x.Keys {
			p, err := plain(x.Values[i])
			if err != nil {
				return nil, err
			}
			ks, ok := k.(string)
			if !ok {
				ks = fmt.Sprint(k)
				if k == nil {
					ks = "None"
				}
			}
			out[ks] = p
		}
		return out, nil
	}
	return nil, fmt.Errorf("a value of type %T has no JSON form", v)
}

// plainJSON decodes JSON into a plain value.
func plainJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// chunkPlain is a chunk as a plain map.
func chunkPlain(c *event.Chunk) (map[string]any, error) {
	raw, err := event.AppendJSON(nil, c)
	if err != nil {
		return nil, fmt.Errorf("encoding a chunk: %w", err)
	}
	v, err := plainJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("decoding a chunk: %w", err)
	}
	m, _ := v.(map[string]any)
	return m, nil
}

// compact is v as one line of JSON.
func compact(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}

package reactions

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/reactord/reactord/event"
	"github.com/reactord/reactord/jinja/py"
)

// saltCase is one template rendered for one event, with the low chunks
// Salt 3007.1's reactor made of its Jinja twin (recorded with the oracle in
// the shared salt-oracle folder; nothing of Salt is in this repository).
type saltCase struct {
	Name string `json:"name"`
	// Tpl is the Go template; Jinja is its twin as Salt rendered it.
	Tpl   string `json:"tpl"`
	Jinja string `json:"jinja"`
	// Data is the event data as JSON text (numbers as written: 1e400).
	Data string `json:"data"`
	// Salt is Salt's chunks as the oracle prints them: non-finite floats
	// as {"$float": "inf"}, without __sls__.
	Salt json.RawMessage `json:"salt"`
}

// TestRenderParityWithSalt renders every recorded case and compares the
// chunks with Salt's, types included (1 is not 1.0, "1e+16" is a string).
func TestRenderParityWithSalt(t *testing.T) {
	raw, err := os.ReadFile("testdata/parity_salt.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []saltCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			got, rerr := renderForParity(c.Tpl, c.Data)
			want, err := saltChunks(c.Salt)
			if err != nil {
				t.Fatalf("golden: %v", err)
			}
			if got != want {
				t.Errorf("template:\n%s\ndata: %s\nreactord: %s (%v)\nSalt:     %s", c.Tpl, c.Data, got, rerr, want)
			}
		})
	}
}

// renderForParity runs one file through the pipeline as the engine does
// (render, merge, verify_high, compile) and spells its chunks canonically.
func renderForParity(tpl, data string) (string, error) {
	dec := json.NewDecoder(strings.NewReader(data))
	dec.UseNumber()
	var d map[string]any
	if err := dec.Decode(&d); err != nil {
		return "", err
	}
	d = event.NormalizeNumbers(d).(map[string]any)
	f, err := ParseFile("/srv/reactor/parity.sls", []byte(tpl))
	if err != nil {
		return "[]", err
	}
	rs, err := f.Render("parity/test", d)
	if err != nil {
		return "[]", err
	}
	var h High
	h.Add(rs)
	if errs := h.Verify(); len(errs) > 0 {
		return "[]", errs[0]
	}
	var out []any
	for _, c := range h.Compile() {
		m := event.NewMap(c.Len())
		for i := 0; i < c.Len(); i++ {
			k, v := c.At(i)
			if k != "__sls__" && k != "__env__" {
				m.Set(k, v)
			}
		}
		out = append(out, m)
	}
	return canonical(out), nil
}

// saltChunks decodes the oracle's chunks into reactord's value forms and
// spells them canonically.
func saltChunks(raw json.RawMessage) (string, error) {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	v, err := decodeJSONValue(dec)
	if err != nil {
		return "", err
	}
	var fix func(v any) any
	fix = func(v any) any {
		switch x := v.(type) {
		case *event.Map:
			if f, ok := x.Get("$float"); ok && x.Len() == 1 {
				switch f {
				case "nan":
					return math.NaN()
				case "inf":
					return math.Inf(1)
				}
				return math.Inf(-1)
			}
			out := event.NewMap(x.Len())
			for i := 0; i < x.Len(); i++ {
				k, e := x.At(i)
				if k != "__sls__" && k != "__env__" {
					out.Set(k, fix(e))
				}
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = fix(e)
			}
			return out
		}
		return v
	}
	list, _ := fix(v).([]any)
	return canonical(list), nil
}

// canonical spells a value with its Python type: i:1, f:1.0, s:'x'.
func canonical(v any) string {
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case nil:
			b.WriteString("None")
		case bool:
			b.WriteString(strconv.FormatBool(x))
		case string:
			b.WriteString("s:" + strconv.Quote(x))
		case int64:
			b.WriteString("i:" + strconv.FormatInt(x, 10))
		case *big.Int:
			b.WriteString("i:" + x.String())
		case float64:
			b.WriteString("f:" + event.PyFloatRepr(x))
		case json.Number:
			if n, ok := py.ToNum(x); ok && n.IsFloat {
				b.WriteString("f:" + event.PyFloatRepr(n.F))
			} else {
				b.WriteString("i:" + string(x))
			}
		case []any:
			b.WriteByte('[')
			for i, e := range x {
				if i > 0 {
					b.WriteString(", ")
				}
				walk(e)
			}
			b.WriteByte(']')
		case *event.Map:
			b.WriteByte('{')
			for i := 0; i < x.Len(); i++ {
				if i > 0 {
					b.WriteString(", ")
				}
				k, e := x.At(i)
				b.WriteString(strconv.Quote(k) + ": ")
				walk(e)
			}
			b.WriteByte('}')
		default:
			fmt.Fprintf(&b, "%T:%v", v, v)
		}
	}
	if v == nil {
		return "[]"
	}
	walk(v)
	return b.String()
}

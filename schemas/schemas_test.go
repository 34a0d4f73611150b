package schemas

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// catalogue is the event catalogue (one event of each shape Salt emits),
// relative to this package.
const catalogue = "../engine/samples/catalogue.jsonl"

// at is one violation a bad example must produce: its pointer and a
// fragment of its message.
type at struct {
	pointer string
	message string
}

// badCases lists every file under testdata/bad with the violations it must
// produce. A file yields exactly the pointers listed (each at least once).
var badCases = []struct {
	schema Name
	file   string
	want   []at
}{
	// reactor-config.json
	{ReactorConfig, "not_mapping.json", []at{{"", "YAML mapping of option names"}}},
	{ReactorConfig, "reactor_is_path.json", []at{{"/reactor", "YAML list of rules"}}},
	{ReactorConfig, "rule_without_colon.json", []at{{"/reactor/1", "got string, want object"}}},
	{ReactorConfig, "rule_two_tags.json", []at{{"/reactor/0", "exactly one tag glob"}}},
	{ReactorConfig, "rule_empty.json", []at{{"/reactor/0", "needs a tag glob"}}},
	{ReactorConfig, "rule_null_paths.json", []at{{"/reactor/1/salt~1key", "one SLS path or a list"}}},
	{ReactorConfig, "rule_bad_paths.json", []at{
		{"/reactor/0/deploy~1~0done/1", "got number, want string"},
		{"/reactor/0/deploy~1~0done/2", "must not be empty"},
		{"/reactor/1/tag", "must not be empty"},
	}},
	{ReactorConfig, "many_rules.json", []at{
		{"/reactor/2", "got number, want object"},
		{"/reactor/10", "got number, want object"},
	}},
	{ReactorConfig, "file_roots_string.json", []at{
		{"/file_roots/base", "list of directories"},
		{"/file_roots/dev/0", "got null, want string"},
	}},
	{ReactorConfig, "reactord_typos.json", []at{
		{"/reactord/worker", "unknown reactord setting"},
		{"/reactord/logLevel", "unknown reactord setting"},
	}},
	{ReactorConfig, "reactord_values.json", []at{
		{"/reactord/nats", "want string"},
		{"/reactord/log_level", "'debug', 'info', 'warn', 'error'"},
		{"/reactord/workers", "minimum: got 0, want 1"},
		{"/reactord/queue", "minimum: got -1, want 0"},
		{"/reactord/jetstream", "want boolean"},
		{"/reactord/ack_wait", "does not match pattern"},
		{"/reactord/saltapi_password", "unknown reactord setting"},
		{"/reactord/store", "does not match pattern"},
	}},
	{ReactorConfig, "reactord_not_mapping.json", []at{{"/reactord", "got null, want object"}}},

	// reaction-file.json
	{ReactionFile, "not_mapping.json", []at{{"", "mapping of reaction IDs"}}},
	{ReactionFile, "body_is_list.json", []at{{"/include", "got array, want string or object"}}},
	{ReactionFile, "short_form_incomplete.json", []at{
		{"/clear", `got "runner.clear_grains"`},
		{"/also", `got "remote.cache.clear_grains"`},
		{"/spaced", "<type>.<module>.<function>"},
	}},
	{ReactionFile, "unknown_type.json", []at{
		{"/deploy/remote.state.apply", "type local, runner, wheel, caller or cmd"},
		{"/deploy/runner.state", "<type>.<module>.<function>"},
	}},
	{ReactionFile, "no_function.json", []at{
		{"/stamped_only", "calls no function"},
		{"/empty", "calls no function"},
	}},
	{ReactionFile, "args_not_list.json", []at{
		{"/ping/local.test.ping", "got null, want array"},
		{"/orch/runner.state.orchestrate", "got object, want array"},
	}},
	{ReactionFile, "missing_colon.json", []at{{"/ping/local.test.ping/1", "got string, want object"}}},
	{ReactionFile, "no_target.json", []at{
		{"/ping/local.test.ping", "needs a target"},
		{"/run/cmd.cmd.run", "needs a target"},
	}},
	{ReactionFile, "bad_arguments.json", []at{
		{"/install/local.state.single/0/tgt", "tgt must not be empty"},
		{"/install/local.state.single/1/tgt_type", "'compound', 'ipcidr'"},
		{"/install/local.state.single/2/args", "Incorrect argument format"},
		{"/install/local.state.single/3/arg", "list of positional arguments"},
		{"/install/local.state.single/4/kwarg", "got array, want object"},
		{"/install/local.state.single/5/order", `integer, first or last (got "soon")`},
		{"/install/local.state.single/6/timeout", "want number"},
		{"/install/local.state.single/7", "got number, want object"},
	}},
	{ReactionFile, "multi_key_args.json", []at{
		{"/orch/runner.state.orchestrate/0/args/0", "maxProperties: got 2, want 1"},
		{"/orch/runner.state.orchestrate/0/args/1", "got null"},
		{"/orch/runner.state.orchestrate/0/args/2", "minProperties: got 0, want 1"},
		{"/empty_mapping/wheel.key.accept/0/args", "must not be empty"},
	}},
	{ReactionFile, "state_style_functions.json", []at{
		{"/two/local", "too many functions declared"},
		{"/none/runner", "no function declared"},
		{"/typo/caller/0", `got "file touch"`},
	}},

	// low-chunk.json
	{LowChunk, "not_mapping.json", []at{{"", "got string, want object"}}},
	{LowChunk, "missing_keys.json", []at{{"", "missing properties 'name', 'order', 'fun'"}}},
	{LowChunk, "cmd_not_resolved.json", []at{{"/state", "'local', 'runner', 'wheel', 'caller'"}}},
	{LowChunk, "list_target_numbers.json", []at{
		{"/tgt/1", "got number, want string"},
	}},
	{LowChunk, "wrong_types.json", []at{
		{"/__id__", "want string"},
		{"/__sls__", "got null, want string"},
		{"/order", "got string, want number"},
		{"/fun", "minLength: got 0, want 1"},
		{"/tgt", "want string or array"},
		{"/tgt_type", "want string"},
		{"/arg", "want array"},
		{"/kwarg", "want object"},
		{"/args", "want array or object"},
		{"/ret", "want string"},
		{"/timeout", "want number"},
	}},

	// event.json
	{Event, "salt_run_line.json", []at{{"", `{"tag": ..., "data": {...}}`}}},
	{Event, "missing_data.json", []at{{"", "missing property 'data'"}}},
	{Event, "data_not_mapping.json", []at{{"/data", "got string, want object"}}},
	{Event, "empty_tag.json", []at{{"/tag", "must not be empty"}}},
	{Event, "extra_keys.json", []at{
		{"/id", `only "tag" and "data"`},
		{"/headers", `only "tag" and "data"`},
	}},
	{Event, "wrong_field_types.json", []at{
		{"/data/_stamp", `got "yesterday"`},
		{"/data/id", "got array, want string"},
		{"/data/jid", "got number, want string"},
		{"/data/retcode", "got string, want integer"},
		{"/data/success", "got string, want boolean"},
		{"/data/fun", "got null, want string"},
		{"/data/minions", "got string, want array"},
		{"/data/pretag", "got number, want null or string"},
	}},
}

// TestConcurrentFirstUse runs the first validations in parallel, for the
// race detector.
func TestConcurrentFirstUse(t *testing.T) {
	var wg sync.WaitGroup
	for range 8 {
		for _, n := range Names() {
			wg.Go(func() {
				if vs := Check(n, map[string]any{}); vs == nil && n == Event {
					t.Error("empty event accepted")
				}
			})
		}
	}
	wg.Wait()
}

// dir returns testdata/<kind>/<schema without .json>.
func dir(kind string, n Name) string {
	return filepath.Join("testdata", kind, strings.TrimSuffix(string(n), ".json"))
}

// decode reads one JSON value the way reactord does (UseNumber) and fails
// on trailing data.
func decode(t *testing.T, data []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decoding: %v", err)
	}
	if _, err := d.Token(); err != io.EOF {
		t.Fatalf("trailing data after the JSON value")
	}
	return v
}

func decodeFile(t *testing.T, path string) any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, data)
}

func TestGoodExamples(t *testing.T) {
	for _, n := range Names() {
		files, err := filepath.Glob(filepath.Join(dir("good", n), "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Errorf("%s: no good examples in %s", n, dir("good", n))
		}
		for _, f := range files {
			t.Run(string(n)+"/"+filepath.Base(f), func(t *testing.T) {
				if err := Validate(n, decodeFile(t, f)); err != nil {
					t.Errorf("want valid, got:\n%v", err)
				}
			})
		}
	}
}

func TestBadExamples(t *testing.T) {
	listed := map[string]bool{}
	for _, tc := range badCases {
		path := filepath.Join(dir("bad", tc.schema), tc.file)
		listed[path] = true
		t.Run(string(tc.schema)+"/"+tc.file, func(t *testing.T) {
			got := Check(tc.schema, decodeFile(t, path))
			if len(got) == 0 {
				t.Fatal("want violations, got none")
			}
			for _, w := range tc.want {
				if !slices.ContainsFunc(got, func(v Violation) bool {
					return v.Pointer == w.pointer && strings.Contains(v.Message, w.message)
				}) {
					t.Errorf("no violation at %q containing %q; got:\n%s", w.pointer, w.message, list(got))
				}
			}
			for _, v := range got {
				if !slices.ContainsFunc(tc.want, func(w at) bool { return w.pointer == v.Pointer }) {
					t.Errorf("unexpected violation %s", v)
				}
			}
			err := Validate(tc.schema, decodeFile(t, path))
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("Validate returned %v, want a *ValidationError", err)
			}
			if verr.Schema != tc.schema || !slices.Equal(verr.Violations, got) {
				t.Errorf("Validate and Check disagree:\n%v\nversus\n%s", err, list(got))
			}
		})
	}
	// Every fixture must be in the table, so none is silently untested.
	for _, n := range Names() {
		files, _ := filepath.Glob(filepath.Join(dir("bad", n), "*.json"))
		for _, f := range files {
			if !listed[f] {
				t.Errorf("%s is not listed in badCases", f)
			}
		}
	}
}

func list(vs []Violation) string {
	var sb strings.Builder
	for _, v := range vs {
		sb.WriteString("\t" + v.String() + "\n")
	}
	return sb.String()
}

// TestSaltLowChunk checks the chunk Salt's own unit tests expect for the
// new_local reaction (LOW_CHUNKS["new_local"] in tests/pytests/unit/utils/test_reactor.py).
func TestSaltLowChunk(t *testing.T) {
	const chunk = `{"state": "local", "__id__": "install_zsh", "name": "install_zsh",
		"__sls__": "/srv/reactor/new_local.sls", "order": 1, "tgt": "test",
		"fun": "state.single",
		"args": [{"fun": "pkg.installed"}, {"name": "zsh"}, {"fromrepo": "updates"}]}`
	if err := Validate(LowChunk, decode(t, []byte(chunk))); err != nil {
		t.Errorf("Salt's example chunk: %v", err)
	}
	// A render prints an array of chunks; each element is one LowChunk.
	var arr []any
	d := json.NewDecoder(strings.NewReader("[" + chunk + "," + chunk + "]"))
	d.UseNumber()
	if err := d.Decode(&arr); err != nil {
		t.Fatal(err)
	}
	for _, c := range arr {
		if err := Validate(LowChunk, c); err != nil {
			t.Error(err)
		}
	}
}

func TestEventCatalogue(t *testing.T) {
	f, err := os.Open(catalogue)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("event catalogue %s not found (the testdata/good/event copies still run in TestGoodExamples)", catalogue)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	lines := 0
	for sc.Scan() {
		lines++
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := Validate(Event, decode(t, line)); err != nil {
			t.Errorf("%s:%d: %v", catalogue, lines, err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if lines == 0 {
		t.Errorf("%s is empty", catalogue)
	}
}

// TestSources checks the schema documents themselves: $schema, $id, titles,
// descriptions, and that every x-message names a keyword used beside it.
func TestSources(t *testing.T) {
	if got := Names(); len(got) != 4 {
		t.Fatalf("Names() = %v", got)
	}
	for _, n := range Names() {
		t.Run(string(n), func(t *testing.T) {
			src, err := Source(n)
			if err != nil {
				t.Fatal(err)
			}
			doc, ok := decode(t, src).(map[string]any)
			if !ok {
				t.Fatal("schema is not an object")
			}
			if doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
				t.Errorf("$schema = %v", doc["$schema"])
			}
			if doc["$id"] != "https://reactord.dev/schemas/"+string(n) || doc["$id"] != n.URL() {
				t.Errorf("$id = %v", doc["$id"])
			}
			for _, k := range []string{"title", "description"} {
				if s, _ := doc[k].(string); s == "" {
					t.Errorf("no %s", k)
				}
			}
			walkSchema(t, "", doc)
			// The documented examples must validate.
			examples, _ := doc["examples"].([]any)
			if len(examples) == 0 {
				t.Error("no examples")
			}
			for i, ex := range examples {
				if err := Validate(n, ex); err != nil {
					t.Errorf("examples/%d: %v", i, err)
				}
			}
		})
	}
}

// walkSchema checks every subschema below a schema object.
func walkSchema(t *testing.T, path string, s map[string]any) {
	t.Helper()
	if msgs, ok := s["x-message"].(map[string]any); ok {
		for kw := range msgs {
			if _, ok := s[kw]; !ok {
				t.Errorf("%s: x-message for %q, which this subschema does not use", path, kw)
			}
		}
	}
	for _, group := range []string{"$defs", "properties"} {
		m, _ := s[group].(map[string]any)
		for name, sub := range m {
			sm, ok := sub.(map[string]any)
			if !ok {
				t.Errorf("%s/%s/%s: not a schema object", path, group, name)
				continue
			}
			_, ref := sm["$ref"]
			if d, _ := sm["description"].(string); d == "" && !ref {
				t.Errorf("%s/%s/%s: no description", path, group, name)
			}
			walkSchema(t, path+"/"+group+"/"+name, sm)
		}
	}
	for _, kw := range []string{"items", "additionalProperties", "contains", "not", "propertyNames"} {
		if sm, ok := s[kw].(map[string]any); ok {
			walkSchema(t, path+"/"+kw, sm)
		}
	}
	if m, ok := s["patternProperties"].(map[string]any); ok {
		for re, sub := range m {
			if sm, ok := sub.(map[string]any); ok {
				walkSchema(t, path+"/patternProperties/"+re, sm)
			}
		}
	}
}

func TestUnknownName(t *testing.T) {
	const bogus Name = "nope.json"
	if err := Validate(bogus, map[string]any{}); err == nil || !strings.Contains(err.Error(), `unknown schema "nope.json"`) {
		t.Errorf("Validate: %v", err)
	}
	if vs := Check(bogus, nil); len(vs) != 1 || vs[0].Pointer != "" || !strings.Contains(vs[0].Message, "unknown schema") {
		t.Errorf("Check: %v", vs)
	}
	if _, err := Source(bogus); err == nil {
		t.Error("Source: no error")
	}
	if _, err := Source("../go.mod"); err == nil {
		t.Error("Source read a file that is not a schema")
	}
}

// TestBrokenSchema checks that a schema that fails to compile makes
// Validate and Check report the compile error instead of panicking.
func TestBrokenSchema(t *testing.T) {
	for _, src := range []string{
		`{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": 5}`,
		`{"pattern": "(unclosed"}`,
		`{"$ref": "#/$defs/missing"}`,
		`not json`,
	} {
		broken := newCompiled(Event, []byte(src))
		if broken.err == nil || !strings.Contains(broken.err.Error(), "compiling embedded schema event.json") {
			t.Fatalf("%s: err = %v", src, broken.err)
		}
		if _, err := lookup(Event); err != nil { // compile the real ones first
			t.Fatal(err)
		}
		saved := registry[Event]
		registry[Event] = broken
		err := Validate(Event, map[string]any{})
		vs := Check(Event, map[string]any{})
		registry[Event] = saved
		if !errors.Is(err, broken.err) {
			t.Errorf("%s: Validate returned %v, want the compile error", src, err)
		}
		if len(vs) != 1 || vs[0].Message != broken.err.Error() {
			t.Errorf("%s: Check returned %v", src, vs)
		}
	}
}

func TestErrorText(t *testing.T) {
	err := Validate(ReactorConfig, map[string]any{
		"reactor": []any{
			map[string]any{"a": "x.sls"},
			map[string]any{"b": "y.sls"},
			"salt/key",
		},
		"reactord": map[string]any{"workers": json.Number("0")},
	})
	want := "/reactor/2: a reactor rule is a mapping of one tag glob to its SLS paths " +
		"('- \"salt/minion/*/start\": [/srv/reactor/start.sls]'); Salt would skip this item silently (got string, want object)\n" +
		"/reactord/workers: minimum: got 0, want 1"
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
	if got := (Violation{Message: "m"}).String(); got != "(root): m" {
		t.Errorf("root violation prints as %q", got)
	}
}

// TestGoValues feeds values that did not come from encoding/json.
func TestGoValues(t *testing.T) {
	type settings struct {
		Driver  string `json:"driver"`
		Workers int    `json:"workers"`
	}
	type level string
	cases := []struct {
		name string
		v    any
		want []string // pointers; nil means valid
	}{
		{"native ints and slices", map[string]any{
			"reactor":    []map[string]any{{"salt/key": []string{"/srv/reactor/key.sls"}}},
			"file_roots": map[string][]string{"base": {"/srv/salt"}},
			"reactord":   map[string]any{"workers": int64(2), "log_level": level("info")},
		}, nil},
		{"float64 integer", map[string]any{"reactord": map[string]any{"workers": float64(3)}}, nil},
		{"float64 fraction", map[string]any{"reactord": map[string]any{"workers": 2.5}}, []string{"/reactord/workers"}},
		{"plain int", map[string]any{"reactord": map[string]any{"workers": 0}}, []string{"/reactord/workers"}},
		{"struct via encoding/json", map[string]any{"reactord": settings{Driver: "dryrun", Workers: 1}}, nil},
		{"pointer to struct", map[string]any{"reactord": &settings{Workers: 0}}, []string{"/reactord/workers"}},
		{"nil pointer", map[string]any{"reactord": (*settings)(nil)}, []string{"/reactord"}},
		{"raw message", map[string]any{"reactor": json.RawMessage(`[{"a": 1}]`)}, []string{"/reactor/0/a"}},
		{"yaml.v2 style map", map[any]any{"reactor": []any{map[any]any{"salt/key": "k.sls"}}}, nil},
		{"non-string key", map[any]any{"reactor": []any{map[any]any{1234: "k.sls"}}}, []string{"/reactor/0"}},
		{"NaN", map[string]any{"reactord": map[string]any{"workers": math.NaN()}}, []string{"/reactord/workers"}},
		{"channel", map[string]any{"x": make(chan int)}, []string{"/x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(ReactorConfig, tc.v)
			var ptrs []string
			for _, v := range got {
				ptrs = append(ptrs, v.Pointer)
			}
			if !slices.Equal(ptrs, tc.want) {
				t.Errorf("got %v, want violations at %q", got, tc.want)
			}
		})
	}
}

// TestNormalizeKeepsInput checks that validating never modifies the value.
func TestNormalizeKeepsInput(t *testing.T) {
	inner := map[string]any{"workers": float32(2)}
	v := map[string]any{"reactord": inner, "reactor": []any{map[string]any{"t": []string{"a.sls"}}}}
	if err := Validate(ReactorConfig, v); err != nil {
		t.Fatal(err)
	}
	if _, ok := v["reactor"].([]any)[0].(map[string]any)["t"].([]string); !ok {
		t.Error("input was modified")
	}
	if _, ok := inner["workers"].(float32); !ok {
		t.Error("input was modified")
	}
}

func TestPointerOrder(t *testing.T) {
	vs := []Violation{{"/a/10", "x"}, {"/a/9", "x"}, {"/b", "x"}, {"", "x"}, {"/a/9/c", "x"}, {"/a/9", "a"}, {"/a/x", "x"}}
	sortViolations(vs)
	want := []Violation{{"", "x"}, {"/a/9", "a"}, {"/a/9", "x"}, {"/a/9/c", "x"}, {"/a/10", "x"}, {"/a/x", "x"}, {"/b", "x"}}
	if !slices.Equal(vs, want) {
		t.Errorf("got %v, want %v", vs, want)
	}
}

// TestUnknownSettingMessageListsEvery: the message an unknown reactord
// setting gets names every setting the schema knows, and nothing else, so
// that a setting added to the schema is not left out of the operator's list.
func TestUnknownSettingMessageListsEvery(t *testing.T) {
	var doc struct {
		Defs map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
			XMessage   map[string]string          `json:"x-message"`
		} `json:"$defs"`
	}
	src, err := Source(ReactorConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	settings := doc.Defs["settings"]
	msg := settings.XMessage["additionalProperties"]
	_, list, ok := strings.Cut(msg, "(known settings: ")
	list, _, ok2 := strings.Cut(list, ")")
	if !ok || !ok2 {
		t.Fatalf("the settings' additionalProperties message %q lists no known settings", msg)
	}
	var want []string
	for name := range settings.Properties {
		want = append(want, name)
	}
	slices.Sort(want)
	if got := strings.Split(list, ", "); !slices.Equal(got, want) {
		t.Errorf("known settings in the message:\n%v\nthe schema's settings:\n%v", got, want)
	}
}

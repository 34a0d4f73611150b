package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The limits of issue 48 ("one way to decide, set and publish"), kept here so
// that the code does not drift back.
const (
	// maxLogMessage is the longest log message: a short constant, greppable
	// and countable; the values and the fix go in attributes.
	maxLogMessage = 80
	// maxPublishEntries is how many exported Publish* functions and
	// methods natsbus offers in all: one way to publish, chosen by what
	// the caller needs.
	maxPublishEntries = 3
	// maxTestSleeps is how many time.Sleep calls the tests keep: the rest
	// wait on a condition or run in a synctest bubble.
	maxTestSleeps = 30
	// maxCommandLines is the size of cmd/reactord outside its tests: the
	// commands are a table, their work in the packages that do it.
	maxCommandLines = 2500
)

// goFile is one parsed Go file of the module.
type goFile struct {
	rel  string // slash-separated, relative to the module root
	fset *token.FileSet
	file *ast.File
}

// moduleFiles parses every Go file of the module (testdata and hidden
// directories aside) for which keep returns true.
func moduleFiles(t *testing.T, keep func(rel string) bool) []goFile {
	t.Helper()
	base := root(t)
	var out []goFile
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != base && (name == "testdata" || strings.HasPrefix(name, ".") || name == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, err := filepath.Rel(base, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !keep(rel) {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parsing %s: %w", rel, err)
		}
		out = append(out, goFile{rel: rel, fset: fset, file: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func isTest(rel string) bool { return strings.HasSuffix(rel, "_test.go") }

// logMessageArg maps a logging method to the index of its message
// argument: slog's Logger methods, their Context forms, and
// ratelog.Keyed.Log (log, level, key, msg).
var logMessageArg = map[string]int{
	"Debug": 0, "Info": 0, "Warn": 0, "Error": 0,
	"DebugContext": 1, "InfoContext": 1, "WarnContext": 1, "ErrorContext": 1,
	"Log": 2, "LogAttrs": 2,
}

// logMessages returns the message of every logging call in f: its text
// when it is a constant string, and whether it is one.
func logMessages(f goFile, visit func(pos token.Position, msg string, constant bool)) {
	ast.Inspect(f.file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		i, ok := logMessageArg[sel.Sel.Name]
		if !ok {
			return true
		}
		if sel.Sel.Name == "Log" && len(call.Args) >= 4 {
			// ratelog.Keyed.Log(log, level, key, msg, ...)
			if lit, ok := call.Args[3].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				i = 3
			}
		}
		if len(call.Args) <= i {
			return true
		}
		pos := f.fset.Position(call.Pos())
		switch arg := call.Args[i].(type) {
		case *ast.BasicLit:
			if arg.Kind == token.STRING {
				s, err := strconv.Unquote(arg.Value)
				if err == nil {
					visit(pos, s, true)
				}
			}
		case *ast.BinaryExpr:
			// "prefix: " + something: a message built at run time.
			if lit, ok := arg.X.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				visit(pos, lit.Value, false)
			}
		}
		return true
	})
}

// TestLogMessagesShort: every log message is a constant of at most
// maxLogMessage characters (docs/operating.md, "Log messages").
func TestLogMessagesShort(t *testing.T) {
	files := moduleFiles(t, func(rel string) bool { return !isTest(rel) })
	n := 0
	for _, f := range files {
		logMessages(f, func(pos token.Position, msg string, constant bool) {
			n++
			where := fmt.Sprintf("%s:%d", f.rel, pos.Line)
			switch {
			case !constant:
				t.Errorf("%s: log message built at run time (%s + …): make it a constant, the value an attribute", where, msg)
			case len(msg) > maxLogMessage:
				t.Errorf("%s: log message of %d characters, more than %d: %q", where, len(msg), maxLogMessage, msg)
			}
		})
	}
	if n < 100 {
		t.Fatalf("found only %d log messages: the scan is broken", n)
	}
}

// TestLogMessagesScan: the scan finds what it must, so that
// TestLogMessagesShort cannot pass by finding nothing.
func TestLogMessagesScan(t *testing.T) {
	src := `package p
func f() {
	log.Info("short", "k", 1)
	log.WarnContext(ctx, "a warning")
	every.Log(log, slog.LevelWarn, key, "rate-limited")
	log.Error("built: " + err.Error())
	log.Info(msg)
}`
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	logMessages(goFile{rel: "p.go", fset: fset, file: file}, func(_ token.Position, msg string, constant bool) {
		got = append(got, fmt.Sprintf("%s/%v", msg, constant))
	})
	want := []string{"short/true", "a warning/true", "rate-limited/true", `"built: "/false`}
	if !slices.Equal(got, want) {
		t.Errorf("scan = %q, want %q", got, want)
	}
}

// TestOnePublishWay: natsbus offers at most maxPublishEntries exported
// Publish* functions and methods in all.
func TestOnePublishWay(t *testing.T) {
	files := moduleFiles(t, func(rel string) bool {
		return strings.HasPrefix(rel, "natsbus/") && !isTest(rel)
	})
	var entries []string
	for _, f := range files {
		for _, d := range f.file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() || !strings.HasPrefix(fn.Name.Name, "Publish") {
				continue
			}
			name := fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) == 1 {
				name = "(" + recvType(fn.Recv.List[0].Type) + ")." + name
			}
			entries = append(entries, f.rel+": "+name)
		}
	}
	if len(entries) == 0 {
		t.Fatal("no Publish entry point found in natsbus: the scan is broken")
	}
	if len(entries) > maxPublishEntries {
		t.Errorf("natsbus has %d exported Publish* entry points, more than %d:\n%s",
			len(entries), maxPublishEntries, strings.Join(entries, "\n"))
	}
}

// TestTestSleeps: at most maxTestSleeps time.Sleep calls in tests, not
// counting those in simulated time (simulatedSleeps).
func TestTestSleeps(t *testing.T) {
	files := moduleFiles(t, isTest)
	var sleeps []string
	simulated := 0
	for _, f := range files {
		fake := simulatedRanges(f.file)
		ast.Inspect(f.file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !isPkgCall(call, "time", "Sleep") {
				return true
			}
			for _, r := range fake {
				if call.Pos() >= r.Pos() && call.End() <= r.End() {
					simulated++
					return true
				}
			}
			sleeps = append(sleeps, fmt.Sprintf("%s:%d", f.rel, f.fset.Position(call.Pos()).Line))
			return true
		})
	}
	t.Logf("%d time.Sleep calls in tests in real time, %d in synctest bubbles (simulated time)", len(sleeps), simulated)
	if len(sleeps) > maxTestSleeps {
		t.Errorf("%d time.Sleep calls in tests, more than %d (wait on a condition: internal/wait, or testing/synctest):\n%s",
			len(sleeps), maxTestSleeps, strings.Join(sleeps, "\n"))
	}
}

// isPkgCall reports whether call is pkg.name(...).
func isPkgCall(call *ast.CallExpr, pkg, name string) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg
}

// simulatedRanges are the parts of f that run in a synctest bubble, where
// time.Sleep advances a fake clock at once: a function literal given to
// synctest.Test, a function of f named there, and a function that calls
// synctest.Wait (only valid inside a bubble).
func simulatedRanges(f *ast.File) []ast.Node {
	var out []ast.Node
	bubbled := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || !isPkgCall(call, "synctest", "Test") || len(call.Args) != 2 {
			return true
		}
		switch fn := call.Args[1].(type) {
		case *ast.FuncLit:
			out = append(out, fn)
		case *ast.Ident:
			bubbled[fn.Name] = true
		}
		return true
	})
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		waits := false
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok && isPkgCall(call, "synctest", "Wait") {
				waits = true
			}
			return !waits
		})
		if bubbled[fn.Name.Name] || waits {
			out = append(out, fn)
		}
	}
	return out
}

// TestCommandLayerSize: cmd/reactord stays wiring, at most maxCommandLines
// lines outside its tests (its functions are held to maxFuncLines by
// TestSizes).
func TestCommandLayerSize(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root(t), "cmd", "reactord", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, f := range files {
		if isTest(f) {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		total += strings.Count(string(src), "\n")
	}
	if total == 0 {
		t.Fatal("cmd/reactord: no lines: the scan is broken")
	}
	if total > maxCommandLines {
		t.Errorf("cmd/reactord has %d lines outside its tests, more than %d: move a command's work into the package that does it", total, maxCommandLines)
	}
}

// packageStateAllowed are package-level variables that change but are not
// the product's state, each with why.
var packageStateAllowed = map[string]string{
	"internal/freeport.mu":          "tests only: the ports handed out in this test process",
	"internal/freeport.given":       "tests only: the ports handed out in this test process",
	"internal/lazyfs.availableOnce": "tests only: whether FUSE works here, asked once",
	"internal/lazyfs.availableErr":  "tests only: whether FUSE works here, asked once",
	"schemas.compileOnce":           "the embedded schemas compiled once, on first use; constant after",
	"schemas.registry":              "the embedded schemas compiled once, on first use; constant after",
}

// TestNoMutablePackageState: no package-level variable outside tests is a
// lock, an atomic or a sync.Once, or is assigned after its declaration
// (by the package or by its tests);
// process-wide state belongs in options and instances, so that two daemons
// in one process (or two tests) do not share it. The scan is syntactic:
// a variable changed only through its methods is not seen.
func TestNoMutablePackageState(t *testing.T) {
	files := moduleFiles(t, func(string) bool { return true })
	byDir := map[string][]goFile{}
	tests := map[string][]goFile{}
	for _, f := range files {
		dir := filepath.ToSlash(filepath.Dir(f.rel))
		if isTest(f.rel) {
			tests[dir] = append(tests[dir], f)
			continue
		}
		byDir[dir] = append(byDir[dir], f)
	}
	for dir, fs := range byDir {
		vars := map[string]bool{}
		for _, f := range fs {
			for _, d := range f.file.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.VAR {
					continue
				}
				for _, s := range g.Specs {
					vs := s.(*ast.ValueSpec)
					for _, n := range vs.Names {
						if n.Name == "_" {
							continue
						}
						vars[n.Name] = true
						if syncType(vs.Type) && packageStateAllowed[dir+"."+n.Name] == "" {
							t.Errorf("%s:%d: package-level %s is a lock, an atomic or a sync.Once: put it in an instance",
								f.rel, f.fset.Position(n.Pos()).Line, n.Name)
						}
					}
				}
			}
		}
		// A test that sets a package variable (a hook, a shorter timeout)
		// makes it state too: such a knob belongs in options.
		for _, f := range append(fs, tests[dir]...) {
			for _, p := range assignedPackageVars(f, vars) {
				if packageStateAllowed[dir+"."+p.name] != "" {
					continue
				}
				t.Errorf("%s:%d: package-level %s assigned outside its declaration: put it in options or an instance",
					f.rel, p.line, p.name)
			}
		}
	}
}

// syncType reports whether a declared type is from sync or sync/atomic.
func syncType(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.ArrayType:
		return syncType(x.Elt)
	case *ast.IndexExpr:
		return syncType(x.X)
	case *ast.IndexListExpr:
		return syncType(x.X)
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && (id.Name == "sync" || id.Name == "atomic")
}

// assignment is a package-level variable assigned at a line.
type assignment struct {
	name string
	line int
}

// assignedPackageVars finds the assignments and increments, inside the
// functions of f, to the package-level variables vars that the function
// does not shadow with a name of its own.
func assignedPackageVars(f goFile, vars map[string]bool) []assignment {
	var out []assignment
	for _, d := range f.file.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		local := localNames(fn)
		target := func(e ast.Expr) {
			for {
				switch x := e.(type) {
				case *ast.IndexExpr:
					e = x.X
					continue
				case *ast.SelectorExpr:
					e = x.X
					continue
				case *ast.StarExpr:
					e = x.X
					continue
				case *ast.ParenExpr:
					e = x.X
					continue
				case *ast.Ident:
					if vars[x.Name] && !local[x.Name] {
						out = append(out, assignment{x.Name, f.fset.Position(x.Pos()).Line})
					}
				}
				return
			}
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch s := n.(type) {
			case *ast.AssignStmt:
				if s.Tok == token.DEFINE {
					return true
				}
				for _, l := range s.Lhs {
					target(l)
				}
			case *ast.IncDecStmt:
				target(s.X)
			}
			return true
		})
	}
	return out
}

// localNames are the names a function declares: receiver, parameters,
// results, and every := or var inside it (scopes are not told apart).
func localNames(fn *ast.FuncDecl) map[string]bool {
	local := map[string]bool{}
	fields := func(l *ast.FieldList) {
		if l == nil {
			return
		}
		for _, f := range l.List {
			for _, n := range f.Names {
				local[n.Name] = true
			}
		}
	}
	fields(fn.Recv)
	fields(fn.Type.Params)
	fields(fn.Type.Results)
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.AssignStmt:
			if s.Tok == token.DEFINE {
				for _, l := range s.Lhs {
					if id, ok := l.(*ast.Ident); ok {
						local[id.Name] = true
					}
				}
			}
		case *ast.ValueSpec:
			for _, n := range s.Names {
				local[n.Name] = true
			}
		case *ast.RangeStmt:
			if s.Tok == token.DEFINE {
				for _, e := range []ast.Expr{s.Key, s.Value} {
					if id, ok := e.(*ast.Ident); ok {
						local[id.Name] = true
					}
				}
			}
		case *ast.FuncLit:
			fields(s.Type.Params)
			fields(s.Type.Results)
		}
		return true
	})
	return local
}

// TestSleepScan: sleeps in a bubble are told from real ones.
func TestSleepScan(t *testing.T) {
	src := `package p
func TestA(t *testing.T) { synctest.Test(t, func(t *testing.T) { time.Sleep(1) }) }
func TestB(t *testing.T) { synctest.Test(t, testB) }
func testB(t *testing.T) { time.Sleep(1) }
func pass(d time.Duration) { time.Sleep(d); synctest.Wait() }
func TestC(t *testing.T) { time.Sleep(1) }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p_test.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	fake := simulatedRanges(f)
	var real []int
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || !isPkgCall(call, "time", "Sleep") {
			return true
		}
		for _, r := range fake {
			if call.Pos() >= r.Pos() && call.End() <= r.End() {
				return true
			}
		}
		real = append(real, fset.Position(call.Pos()).Line)
		return true
	})
	if !slices.Equal(real, []int{6}) {
		t.Errorf("real sleeps on lines %v, want [6]", real)
	}
}

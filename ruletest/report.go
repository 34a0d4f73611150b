package ruletest

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// WriteText writes the report for a person: each failed test at
// file:line:col with its differences, one line per test file, and a total.
// With Options.Verbose, the tests that passed too, with their chunks.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, s := range r.Suites {
		failed := 0
		for i := range s.Results {
			res := &s.Results[i]
			switch {
			case !res.Passed():
				failed++
				fmt.Fprintf(&b, "--- FAIL: %s: %s\n", res.Pos, res.Name)
				for _, l := range res.Failure {
					b.WriteString(indent(l, "    ") + "\n")
				}
			case r.verbose:
				fmt.Fprintf(&b, "--- PASS: %s: %s\n", res.Pos, res.Name)
				for _, l := range produced(res.Chunks) {
					b.WriteString("  " + l + "\n")
				}
			}
		}
		if failed > 0 {
			fmt.Fprintf(&b, "FAIL %s: %d of %d tests failed\n", s.Path, failed, len(s.Results))
		} else {
			fmt.Fprintf(&b, "ok   %s: %d tests\n", s.Path, len(s.Results))
		}
	}
	if f := r.Failed(); f > 0 {
		fmt.Fprintf(&b, "FAIL: %d of %d tests failed\n", f, r.Total())
	} else {
		fmt.Fprintf(&b, "PASS: %d tests\n", r.Total())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// The JUnit XML elements CI systems read (Jenkins, GitLab, GitHub
// reporters): testsuites, testsuite, testcase, failure.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	File      string        `xml:"file,attr"`
	Line      int           `xml:"line,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the report as JUnit XML: a testsuite per test file, a
// testcase per test, a failure with the differences for each that failed.
func (r *Report) WriteJUnit(w io.Writer) error {
	out := junitSuites{Name: "reactord test", Tests: r.Total(), Failures: r.Failed()}
	var total time.Duration
	for _, s := range r.Suites {
		js := junitSuite{Name: s.Path, Tests: len(s.Results), Time: seconds(s.Took)}
		total += s.Took
		for i := range s.Results {
			res := &s.Results[i]
			jc := junitCase{Name: res.Name, Classname: s.Path, File: res.Pos.File, Line: res.Pos.Line, Time: seconds(res.Took)}
			if !res.Passed() {
				js.Failures++
				jc.Failure = &junitFailure{Message: res.Failure[0], Type: "difference",
					Text: res.Pos.String() + ": " + res.Name + "\n" + strings.Join(res.Failure, "\n") + "\n"}
			}
			js.Cases = append(js.Cases, jc)
		}
		out.Suites = append(out.Suites, js)
	}
	out.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("writing JUnit XML: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// WriteJUnitFile writes the report as JUnit XML (WriteJUnit) to a file.
func (r *Report) WriteJUnitFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("JUnit report: %w", err)
	}
	err = r.WriteJUnit(f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("JUnit report: %w", cerr)
	}
	return err
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

package archtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// markdownLink matches an inline link or image, [text](target "title"),
// and a reference definition, [name]: target.
var (
	markdownLink  = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	markdownRef   = regexp.MustCompile(`(?m)^\s{0,3}\[[^\]]+\]:\s+(\S+)`)
	htmlAnchor    = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	inlineCode    = regexp.MustCompile("`[^`\n]*`")
	sectionQuoted = regexp.MustCompile(`((?:docs/)?[\w.-]+\.md|README(?:'s)?),?\s+(?:section\s+)?"([^"]+)"`)
)

// trackedFiles lists the files git tracks, relative to the module root,
// testdata aside.
func trackedFiles(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files")
	cmd.Dir = root(t)
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout)", err)
	}
	var files []string
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f == "" || strings.Contains("/"+f, "/testdata/") {
			continue
		}
		files = append(files, f)
	}
	return files
}

// markdownProse returns md without its fenced and indented code blocks
// and inline code, where a link is an example, not a link.
func markdownProse(md string) string {
	var b strings.Builder
	fenced := false
	prevBlank := true
	for _, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			fenced = !fenced
			b.WriteByte('\n')
			continue
		}
		indented := strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t")
		if fenced || (indented && prevBlank) {
			b.WriteByte('\n')
			continue
		}
		prevBlank = trimmed == ""
		b.WriteString(inlineCode.ReplaceAllString(line, ""))
		b.WriteByte('\n')
	}
	return b.String()
}

// headingSlugs returns the anchors GitHub gives md's headings (and its
// explicit <a id> anchors), with the text of each heading by slug.
func headingSlugs(md string) map[string]string {
	slugs := map[string]string{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		if text == "" || !strings.HasPrefix(line, strings.Repeat("#", len(line)-len(strings.TrimLeft(line, "#")))+" ") {
			continue
		}
		slug := githubSlug(text)
		if n := seen[slug]; n > 0 {
			seen[slug]++
			slug = fmt.Sprintf("%s-%d", slug, n)
		} else {
			seen[slug] = 1
		}
		slugs[slug] = text
	}
	for _, m := range htmlAnchor.FindAllStringSubmatch(md, -1) {
		slugs[m[1]] = m[1]
	}
	return slugs
}

// githubSlug is the anchor GitHub makes of a heading: lower case, inline
// markup and punctuation dropped (hyphens and underscores kept), each
// space a hyphen.
func githubSlug(heading string) string {
	heading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestMarkdownLinks: every relative link in the tracked Markdown files
// names a file that exists and, after '#', a heading of that file.
func TestMarkdownLinks(t *testing.T) {
	base := root(t)
	slugsOf := map[string]map[string]string{}
	slugs := func(file string) (map[string]string, error) {
		if s, ok := slugsOf[file]; ok {
			return s, nil
		}
		src, err := os.ReadFile(filepath.Join(base, file))
		if err != nil {
			return nil, err
		}
		slugsOf[file] = headingSlugs(string(src))
		return slugsOf[file], nil
	}
	links := 0
	for _, f := range trackedFiles(t) {
		if !strings.HasSuffix(f, ".md") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(base, f))
		if err != nil {
			t.Fatal(err)
		}
		prose := markdownProse(string(src))
		var targets []string
		for _, m := range markdownLink.FindAllStringSubmatch(prose, -1) {
			targets = append(targets, m[1])
		}
		for _, m := range markdownRef.FindAllStringSubmatch(prose, -1) {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || target == "..." {
				continue // a web address, or Python's salt['mod.fun'](...) in prose
			}
			links++
			file, anchor, _ := strings.Cut(target, "#")
			if file == "" {
				file = f
			} else {
				file = path.Clean(path.Join(path.Dir(f), file))
			}
			info, err := os.Stat(filepath.Join(base, file))
			if err != nil {
				t.Errorf("%s: link to %s: no such file", f, target)
				continue
			}
			if anchor == "" {
				continue
			}
			if info.IsDir() || !strings.HasSuffix(file, ".md") {
				t.Errorf("%s: link to %s: an anchor in a file that is not Markdown", f, target)
				continue
			}
			s, err := slugs(file)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := s[anchor]; !ok {
				t.Errorf("%s: link to %s: %s has no heading with that anchor", f, target, file)
			}
		}
	}
	if links < 50 {
		t.Fatalf("found only %d relative links: the scan is broken", links)
	}
}

// TestSectionReferences: a file that names a section of a Markdown file
// in words (`README.md, "Configuration"`, `the README's "From Salt's
// reactor to reactord"`, `docs/operating.md "Drivers"`), in any tracked
// file, Go comments and configuration examples included, names a heading
// that exists.
func TestSectionReferences(t *testing.T) {
	base := root(t)
	refs := 0
	for _, f := range trackedFiles(t) {
		if strings.HasSuffix(f, "_test.go") {
			continue // a test's strings are examples
		}
		src, err := os.ReadFile(filepath.Join(base, f))
		if err != nil || bytes.IndexByte(src, 0) >= 0 {
			continue // unreadable or binary
		}
		for _, ref := range sectionRefs(string(src)) {
			refs++
			file := ref.file
			if file == "README" || file == "README's" {
				file = "README.md"
			}
			if !strings.Contains(file, "/") && file != "README.md" {
				if _, err := os.Stat(filepath.Join(base, file)); err != nil {
					file = path.Join("docs", file)
				}
			}
			md, err := os.ReadFile(filepath.Join(base, file))
			if err != nil {
				t.Errorf("%s: names section %q of %s: no such file", f, ref.section, ref.file)
				continue
			}
			if !hasHeading(string(md), ref.section) {
				t.Errorf("%s: names section %q of %s, which has no such heading", f, ref.section, file)
			}
		}
	}
	if refs == 0 {
		t.Log("no section named in words anywhere")
	}
}

// sectionRef is a section of a Markdown file named in words.
type sectionRef struct{ file, section string }

// sectionRefs finds the sections src names in words, across line breaks
// and comment markers (# and //) at the start of lines.
func sectionRefs(src string) []sectionRef {
	var joined strings.Builder
	for _, line := range strings.Split(src, "\n") {
		line = strings.TrimSpace(line)
		line = strings.TrimLeft(line, "#/ ")
		joined.WriteString(line)
		joined.WriteByte(' ')
	}
	var out []sectionRef
	for _, m := range sectionQuoted.FindAllStringSubmatch(joined.String(), -1) {
		out = append(out, sectionRef{file: m[1], section: m[2]})
	}
	return out
}

// hasHeading reports whether md has a heading whose text is section,
// ignoring case, inline code marks and a trailing period.
func hasHeading(md, section string) bool {
	norm := func(s string) string {
		s = strings.ToLower(strings.TrimSpace(s))
		s = strings.ReplaceAll(s, "`", "")
		return strings.TrimSuffix(s, ".")
	}
	want := norm(section)
	for _, text := range headingSlugs(md) {
		if norm(text) == want {
			return true
		}
	}
	return false
}

// TestLinkScan: the scans find what they must, so that the link tests
// cannot pass by finding nothing.
func TestLinkScan(t *testing.T) {
	md := "# Title\n\n## The `reactord:` section\n\n## Title\n\nSee [x](a.md#b) and [y](#title-1).\n\n    [code](no.md)\n\n```\n[code](no.md)\n```\n"
	prose := markdownProse(md)
	var got []string
	for _, m := range markdownLink.FindAllStringSubmatch(prose, -1) {
		got = append(got, m[1])
	}
	if strings.Join(got, " ") != "a.md#b #title-1" {
		t.Errorf("links = %q, want [a.md#b #title-1]", got)
	}
	s := headingSlugs(md)
	for _, want := range []string{"title", "the-reactord-section", "title-1"} {
		if _, ok := s[want]; !ok {
			t.Errorf("no anchor %q in %v", want, s)
		}
	}
	refs := sectionRefs("# The keys are listed in README.md, \"Configuration\".\n# see the README's \"From\n# Salt's reactor\"")
	if len(refs) != 2 || refs[0] != (sectionRef{"README.md", "Configuration"}) || refs[1] != (sectionRef{"README's", "From Salt's reactor"}) {
		t.Errorf("section references = %q", refs)
	}
	if !hasHeading(md, "The reactord: section") {
		t.Error("hasHeading misses a heading with inline code")
	}
}

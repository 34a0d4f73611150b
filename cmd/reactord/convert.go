package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/reactord/reactord/jinja"
)

func cmdConvert(args []string, stdout, stderr io.Writer) int {
	fset := newFlags("convert", "reactord convert [-w] FILE|DIR...",
		`Translates Salt Jinja reaction files into reactord Go templates, with
Jinja's meaning: a missing key is an error as under Salt's StrictUndefined,
comparisons and 'in' follow Python, set keeps Jinja's scoping. A directory
converts every .sls file under it. The converted template goes to stdout,
or with -w replaces the file, the original kept as FILE.orig. A file that
uses what reactord cannot render (salt[...] calls, pillar, grains, opts,
#!py, macros, imports) is refused whole, with every problem as
file:line:col: construct: reason; it is never half converted. Each file
gets one summary line on stderr. Exit 0 when every file converted, 1 when
some were refused, 2 on bad usage or an unreadable file.`, stderr)
	write := fset.Bool("w", false, "rewrite each file in place, keeping the original as FILE.orig")
	if ok, code := parseFlags(fset, args, stdout); !ok {
		return code
	}
	if fset.NArg() == 0 {
		fmt.Fprintln(stderr, "convert: need FILE or DIR")
		fset.Usage()
		return exitUsage
	}
	var files []string
	for _, arg := range fset.Args() {
		st, err := os.Stat(arg)
		if err != nil {
			fmt.Fprintf(stderr, "convert: %v\n", err)
			return exitUsage
		}
		if !st.IsDir() {
			files = append(files, arg)
			continue
		}
		err = filepath.WalkDir(arg, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(path, ".sls") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			fmt.Fprintf(stderr, "convert: %v\n", err)
			return exitUsage
		}
	}
	code := exitOK
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(stderr, "convert: %v\n", err)
			return exitUsage
		}
		out, err := jinja.Convert(path, src)
		var errs jinja.Errors
		switch {
		case errors.Is(err, jinja.ErrNotJinja) && *write:
			fmt.Fprintf(stderr, "%s: skipped: not a Jinja file\n", path)
			continue
		case errors.Is(err, jinja.ErrNotJinja):
			// Printed as it is, so that convert FILE > NEW always
			// leaves a file reactord reads as FILE meant.
			out = src
			fmt.Fprintf(stderr, "%s: not a Jinja file: printed as it is\n", path)
		case errors.As(err, &errs):
			fmt.Fprintf(stderr, "%s: refused: %d problem(s)\n", path, len(errs))
			for _, e := range errs {
				fmt.Fprintf(stderr, "  %v\n", e)
			}
			code = exitFound
			continue
		case err != nil:
			fmt.Fprintf(stderr, "%s: refused: %v\n", path, err)
			code = exitFound
			continue
		}
		if !*write {
			if len(files) > 1 {
				fmt.Fprintf(stdout, "# %s\n", path)
			}
			if _, err := stdout.Write(out); err != nil {
				fmt.Fprintf(stderr, "convert: %v\n", err)
				return exitUsage
			}
			if err == nil {
				fmt.Fprintf(stderr, "%s: converted\n", path)
			}
			continue
		}
		if err := rewrite(path, src, out); err != nil {
			fmt.Fprintf(stderr, "convert: %v\n", err)
			return exitUsage
		}
		fmt.Fprintf(stderr, "%s: converted (original kept as %s.orig)\n", path, path)
	}
	return code
}

// rewrite keeps the original as path.orig and replaces path with out.
func rewrite(path string, orig, out []byte) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path+".orig", orig, st.Mode().Perm()); err != nil {
		return fmt.Errorf("keeping the original: %w", err)
	}
	tmp := path + ".convert.tmp"
	if err := os.WriteFile(tmp, out, st.Mode().Perm()); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

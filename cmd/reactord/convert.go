package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/reactord/reactord/internal/cli"
	"github.com/reactord/reactord/jinja"
)

// convertFlags defines convert's flags and returns the command.
func convertFlags(fs *flag.FlagSet) cli.Func {
	write := fs.Bool("w", false, "rewrite each file in place, keeping the original as FILE.orig")
	return func(_ context.Context, args []string, s cli.Streams) int {
		if len(args) == 0 {
			return cli.UsageError(fs, "need FILE or DIR")
		}
		files, err := sourceFiles(args)
		if err != nil {
			fmt.Fprintf(s.Stderr, "convert: %v\n", err)
			return exitUsage
		}
		code := exitOK
		for _, path := range files {
			switch c := convertFile(path, *write, len(files) > 1, s.Stdout, s.Stderr); c {
			case exitUsage:
				return c
			case exitFound:
				code = c
			}
		}
		return code
	}
}

// sourceFiles is the files args name: each file, and every .sls file
// under each directory.
func sourceFiles(args []string) ([]string, error) {
	var files []string
	for _, arg := range args {
		st, err := os.Stat(arg)
		if err != nil {
			return nil, err
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
			return nil, err
		}
	}
	return files, nil
}

// convertFile converts one file: printed on stdout (under a "# PATH"
// line when named names several files), or rewritten in place with write.
// It returns exitFound when the file was refused, exitUsage when it
// could not be read or written.
func convertFile(path string, write, named bool, stdout, stderr io.Writer) int {
	src, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "convert: %v\n", err)
		return exitUsage
	}
	out, err := jinja.Convert(path, src)
	var errs jinja.Errors
	switch {
	case errors.Is(err, jinja.ErrNotJinja) && write:
		fmt.Fprintf(stderr, "%s: skipped: not a Jinja file\n", path)
		return exitOK
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
		return exitFound
	case err != nil:
		fmt.Fprintf(stderr, "%s: refused: %v\n", path, err)
		return exitFound
	}
	if !write {
		if named {
			fmt.Fprintf(stdout, "# %s\n", path)
		}
		if _, err := stdout.Write(out); err != nil {
			fmt.Fprintf(stderr, "convert: %v\n", err)
			return exitUsage
		}
		if err == nil {
			fmt.Fprintf(stderr, "%s: converted\n", path)
		}
		return exitOK
	}
	if err := rewrite(path, src, out); err != nil {
		fmt.Fprintf(stderr, "convert: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "%s: converted (original kept as %s.orig)\n", path, path)
	return exitOK
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

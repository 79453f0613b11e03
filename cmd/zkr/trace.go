package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/zkrecipes/zkrecipes/observers"
)

const traceSynopsis = "zkr trace FILE.jsonl -html OUT.html [-trace-json OUT.json]"

// traceCmd renders a recording a service wrote (observers.WithRecording,
// or observers.Timeline) as an HTML timeline and/or Chrome Trace JSON.
// FILE "-" is standard input. Flags may come before or after FILE. A
// recording cut short (its writer crashed mid-line) is rendered up to the
// cut, with a warning. It needs no server.
func traceCmd(e *env, args []string) int {
	fs := flag.NewFlagSet("zkr trace", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	htmlOut := fs.String("html", "", "write the timeline as a self-contained HTML page to this file")
	jsonOut := fs.String("trace-json", "", "write it as Chrome Trace Event JSON (ui.perfetto.dev) to this file")
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintln(e.stderr, "usage: "+traceSynopsis)
				fs.SetOutput(e.stderr)
				fs.PrintDefaults()
				return 0
			}
			return e.fail("trace", usageError{err.Error()})
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch {
	case len(files) != 1:
		return e.fail("trace", usagef("want one FILE, got %q (usage: %s)", files, traceSynopsis))
	case *htmlOut == "" && *jsonOut == "":
		return e.fail("trace", usagef("nothing to write: give -html OUT or -trace-json OUT (usage: %s)", traceSynopsis))
	}
	in := io.Reader(os.Stdin)
	if files[0] != "-" {
		f, err := os.Open(files[0])
		if err != nil {
			return e.fail("trace", err)
		}
		defer f.Close()
		in = f
	}
	tf, err := observers.ReadRecording(in)
	if err != nil {
		fmt.Fprintf(e.stderr, "zkr trace: %s: %v; rendering what came before it\n", files[0], err)
	}
	for _, out := range []struct {
		file  string
		write func(io.Writer) error
	}{{*htmlOut, tf.WriteHTML}, {*jsonOut, tf.WriteChromeTrace}} {
		if out.file == "" {
			continue
		}
		if err := writeTo(out.file, out.write); err != nil {
			return e.fail("trace", err)
		}
		fmt.Fprintf(e.stdout, "wrote %s: %d events, %d spans\n", out.file, len(tf.Records()), len(tf.Spans()))
	}
	return 0
}

// writeTo creates file and writes it with write.
func writeTo(file string, write func(io.Writer) error) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

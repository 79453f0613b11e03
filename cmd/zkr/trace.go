package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/zkrecipes/zkrecipes/observers"
)

const traceSynopsis = "zkr trace FILE.jsonl... -html OUT.html [-trace-json OUT.json]"

// traceCmd renders recordings a service wrote (observers.WithRecording,
// or observers.Timeline) as one HTML timeline and/or Chrome Trace JSON.
// Several FILEs (one per process) are merged into one timeline, ordered by
// time, each instance's lane named after its file: "a/worker-1" for
// a.jsonl's worker-1. FILE "-" is standard input. Flags may come before or
// after the FILEs. A recording cut short (its writer crashed mid-line) is
// rendered up to the cut, with a warning. It needs no server.
func traceCmd(e *env, args []string) int {
	fs := newFlags("trace")
	htmlOut := fs.String("html", "", "write the timeline as a self-contained HTML page to this file")
	jsonOut := fs.String("trace-json", "", "write it as Chrome Trace Event JSON (ui.perfetto.dev) to this file")
	var files []string
	for {
		if err := parseFlags(fs, traceSynopsis, e.stderr, args); err != nil {
			return e.fail("trace", err)
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch {
	case len(files) == 0:
		return e.fail("trace", usagef("no FILE (usage: %s)", traceSynopsis))
	case *htmlOut == "" && *jsonOut == "":
		return e.fail("trace", usagef("nothing to write: give -html OUT or -trace-json OUT (usage: %s)", traceSynopsis))
	}
	var merged bytes.Buffer
	labels := map[string]bool{}
	for _, file := range files {
		label := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
		if labels[label] { // svc1/rec.jsonl and svc2/rec.jsonl
			label = strings.TrimSuffix(file, filepath.Ext(file))
		}
		labels[label] = true
		if len(files) == 1 {
			label = ""
		}
		if err := e.readRecording(&merged, file, label); err != nil {
			return e.fail("trace", err)
		}
	}
	tf, err := observers.ReadRecording(&merged)
	if err != nil {
		fmt.Fprintf(e.stderr, "zkr trace: %v; rendering what came before it\n", err)
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

// readRecording appends file's lines to w, each event's and note's
// instance put under label when there is one (a span needs none: it
// follows its instance's lane). A line cut short ends the file, with a
// warning.
func (e *env) readRecording(w *bytes.Buffer, file, label string) error {
	in := io.Reader(os.Stdin)
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	dec := json.NewDecoder(in)
	for n := 1; ; n++ {
		var line map[string]json.RawMessage
		err := dec.Decode(&line)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "zkr trace: %s: line %d: %v; rendering what came before it\n", file, n, err)
			return nil
		}
		if _, span := line["span"]; label != "" && !span {
			var inst string
			json.Unmarshal(line["instance"], &inst) // none: ""
			line["instance"], _ = json.Marshal(strings.TrimSuffix(label+"/"+inst, "/"))
		}
		b, _ := json.Marshal(line)
		w.Write(append(b, '\n'))
	}
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

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/adapters/zk"
	"github.com/zkrecipes/zkrecipes/machines/discovery"
	"github.com/zkrecipes/zkrecipes/testkit"
)

// TestServices: zkr services lists the services under a base with their
// numbers of instances, and a service's instances, in text and JSON; a
// missing base or service is "no such path" (3).
func TestServices(t *testing.T) {
	srv := testkit.StartServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	conn, err := zk.Connect(ctx, []string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, in := range []discovery.Instance{
		{Name: "api", ID: "i-2", Address: "10.0.0.6", Port: 8080, Payload: json.RawMessage(`{"zone": "b"}`)},
		{Name: "api", ID: "i-1", Address: "10.0.0.5", Port: 8080, SSLPort: 8443},
		{Name: "api", ID: "i-3", Address: "10.0.0.7", SSLPort: 8443, Payload: json.RawMessage(`"x"`)},
		{Name: "web", ID: "w-1", Address: "10.0.1.5", Port: 80},
	} {
		r, err := discovery.Register(ctx, conn, "/services", in)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
	}
	zkrun := func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"services", "-zk", srv.Addr()}, args...), &stdout, &stderr, nil)
		return stdout.String(), stderr.String(), code
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"the services", []string{"/services"}, "api\t3\nweb\t1\n"},
		{"a service's instances", []string{"/services", "api"},
			"i-1\t10.0.0.5\t8080\tnull\ni-2\t10.0.0.6\t8080\t{\"zone\":\"b\"}\ni-3\t10.0.0.7\t-\t\"x\"\n"},
		{"the services in JSON", []string{"-o", "json", "/services"},
			`{"name":"api","instances":3}` + "\n" + `{"name":"web","instances":1}` + "\n"},
		{"a service's instances in JSON", []string{"-o", "json", "/services", "web"},
			`{"id":"w-1","address":"10.0.1.5","port":80,"payload":null}` + "\n"},
		{"sslPort in JSON", []string{"-o", "json", "/services", "api"},
			`{"id":"i-1","address":"10.0.0.5","port":8080,"sslPort":8443,"payload":null}` + "\n" +
				`{"id":"i-2","address":"10.0.0.6","port":8080,"payload":{"zone":"b"}}` + "\n" +
				`{"id":"i-3","address":"10.0.0.7","port":0,"sslPort":8443,"payload":"x"}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := zkrun(tc.args...)
			if code != 0 || stdout != tc.want || stderr != "" {
				t.Errorf("zkr services %q: exit %d, stdout %q, stderr %q; want 0 and %q", tc.args, code, stdout, stderr, tc.want)
			}
		})
	}

	for _, args := range [][]string{{"/missing"}, {"/services", "missing"}} {
		stdout, stderr, code := zkrun(args...)
		if code != exitConnect || stdout != "" || !strings.Contains(stderr, "no such path: "+strings.Join(args, "/")+"\n") {
			t.Errorf("zkr services %q: exit %d, stdout %q, stderr %q; want 3 and no such path", args, code, stdout, stderr)
		}
	}
}

func TestServicesBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-zk", "127.0.0.1:1"},                           // no BASE
		{"-zk", "127.0.0.1:1", "services"},               // a relative BASE
		{"-zk", "127.0.0.1:1", "/services", "a/b"},       // NAME is two nodes
		{"-zk", "127.0.0.1:1", "/services", "a", "b"},    // three arguments
		{"-zk", "127.0.0.1:1", "-o", "xml", "/services"}, // an unknown format
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"services"}, args...), &stdout, &stderr, nil)
		if code != exitUsage || stdout.Len() > 0 || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("zkr services %q: exit %d, stdout %q, stderr %q; want %d, nothing, one line", args, code, stdout.String(), stderr.String(), exitUsage)
		}
	}
}
